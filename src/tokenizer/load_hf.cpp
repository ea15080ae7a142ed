// Tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json):
// model BPE (byte-level or SentencePiece-style with byte_fallback), added
// tokens, normalizers (NFC/NFKC/NFD/NFKD/Lowercase/Prepend/Replace/Sequence),
// pre-tokenizers (Split/ByteLevel/Metaspace/Digits/Punctuation/Whitespace/
// WhitespaceSplit/Sequence), TemplateProcessing post-processor, decoders.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/internal.h"

namespace laya::tok {

struct TokenizerBuilder {
  static Result<std::unique_ptr<Tokenizer>> gguf(const gguf::File& f);
  static Result<std::unique_ptr<Tokenizer>> hf(std::string_view tj, std::string_view cfg, const std::string& name);
};

using json = nlohmann::json;

namespace {

Status bad(const std::string& name, const std::string& field, const std::string& what) {
  return Status(StatusCode::kCorrupt, name + ": " + field + ": " + what);
}
Status unsupported(const std::string& name, const std::string& field, const std::string& what) {
  return Status(StatusCode::kUnsupported, name + ": " + field + ": " + what);
}

bool contains_type(const json& j, const char* type) {
  if (j.is_object()) {
    auto it = j.find("type");
    if (it != j.end() && it->is_string() && *it == type) return true;
    for (auto& [k, v] : j.items())
      if (contains_type(v, type)) return true;
  } else if (j.is_array()) {
    for (auto& v : j)
      if (contains_type(v, type)) return true;
  }
  return false;
}

const json& fld(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string str_or(const json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return def;
  return it->get<std::string>();
}
bool bool_or(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return def;
  return it->get<bool>();
}

Status parse_normalizer(const json& j, const std::string& name, const std::string& field, Normalizer* out) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return bad(name, field, "expected an object");
  std::string type = str_or(j, "type", "");
  using Op = Normalizer::Op;
  if (type == "Sequence") {
    const json& arr = fld(j, "normalizers");
    for (size_t i = 0; i < arr.size(); ++i)
      LAYA_TRY(parse_normalizer(arr[i], name, field + ".normalizers[" + std::to_string(i) + "]", out));
  } else if (type == "NFC") out->steps.push_back({Op::kNFC, {}, {}});
  else if (type == "NFKC") out->steps.push_back({Op::kNFKC, {}, {}});
  else if (type == "NFD") out->steps.push_back({Op::kNFD, {}, {}});
  else if (type == "NFKD") out->steps.push_back({Op::kNFKD, {}, {}});
  else if (type == "Lowercase") out->steps.push_back({Op::kLowercase, {}, {}});
  else if (type == "Prepend") out->steps.push_back({Op::kPrepend, str_or(j, "prepend", ""), {}});
  else if (type == "Replace") {
    const json& pat = fld(j, "pattern");
    if (!pat.contains("String"))
      return unsupported(name, field + ".pattern", "only String patterns are supported in Replace normalizers");
    out->steps.push_back({Op::kReplace, pat["String"].get<std::string>(), str_or(j, "content", "")});
  } else {
    return unsupported(name, field + ".type", "normalizer '" + type + "' is not supported");
  }
  return Status::Ok();
}

Status add_split(PreTokenizer* pre, const std::string& pattern, bool literal, SplitBehavior b, bool invert,
                 const std::string& name, const std::string& field) {
  auto re = Regex::compile(pattern, literal);
  if (!re.ok()) return re.status().with_context(name + ": " + field);
  PreTokenizer::Step st;
  st.re = std::move(re).value();
  st.behavior = b;
  st.invert = invert;
  pre->steps.push_back(std::move(st));
  return Status::Ok();
}

Status parse_pre(const json& j, const std::string& name, const std::string& field, PreTokenizer* pre,
                 Normalizer* norm) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return bad(name, field, "expected an object");
  std::string type = str_or(j, "type", "");
  if (type == "Sequence") {
    const json& arr = fld(j, "pretokenizers");
    for (size_t i = 0; i < arr.size(); ++i)
      LAYA_TRY(parse_pre(arr[i], name, field + ".pretokenizers[" + std::to_string(i) + "]", pre, norm));
  } else if (type == "Split") {
    const json& pat = fld(j, "pattern");
    std::string p;
    bool literal;
    if (pat.contains("Regex")) p = pat["Regex"].get<std::string>(), literal = false;
    else if (pat.contains("String")) p = pat["String"].get<std::string>(), literal = true;
    else return bad(name, field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    std::string beh = str_or(j, "behavior", "Isolated");
    SplitBehavior b;
    if (beh == "Isolated") b = SplitBehavior::kIsolated;
    else if (beh == "Removed") b = SplitBehavior::kRemoved;
    else if (beh == "MergedWithPrevious") b = SplitBehavior::kMergedWithPrevious;
    else if (beh == "MergedWithNext") b = SplitBehavior::kMergedWithNext;
    else if (beh == "Contiguous") b = SplitBehavior::kContiguous;
    else return bad(name, field + ".behavior", "unknown behavior '" + beh + "'");
    LAYA_TRY(add_split(pre, p, literal, b, bool_or(j, "invert", false), name, field + ".pattern"));
  } else if (type == "ByteLevel") {
    if (bool_or(j, "add_prefix_space", false))
      norm->steps.push_back({Normalizer::Op::kPrependIfFirst, " ", {}});
    if (bool_or(j, "use_regex", true))
      LAYA_TRY(add_split(pre, kGpt2Regex, false, SplitBehavior::kIsolated, false, name, field));
  } else if (type == "Metaspace") {
    std::string rep = str_or(j, "replacement", "\xE2\x96\x81");
    std::string scheme = str_or(j, "prepend_scheme", bool_or(j, "add_prefix_space", true) ? "always" : "never");
    norm->steps.push_back({Normalizer::Op::kReplace, " ", rep});
    if (scheme == "always") norm->steps.push_back({Normalizer::Op::kPrepend, rep, {}});
    else if (scheme == "first") norm->steps.push_back({Normalizer::Op::kPrependIfFirst, rep, {}});
    if (bool_or(j, "split", true))
      LAYA_TRY(add_split(pre, rep, true, SplitBehavior::kMergedWithNext, false, name, field));
  } else if (type == "Digits") {
    bool ind = bool_or(j, "individual_digits", false);
    LAYA_TRY(add_split(pre, ind ? "\\p{N}" : "\\p{N}+", false, SplitBehavior::kIsolated, false, name, field));
  } else if (type == "Punctuation") {
    LAYA_TRY(add_split(pre, "[\\p{P}!-/:-@\\[-`{-~]", false, SplitBehavior::kIsolated, false, name, field));
  } else if (type == "Whitespace") {
    LAYA_TRY(add_split(pre, "\\w+|[^\\w\\s]+", false, SplitBehavior::kRemoved, true, name, field));
  } else if (type == "WhitespaceSplit") {
    LAYA_TRY(add_split(pre, "\\s+", false, SplitBehavior::kRemoved, false, name, field));
  } else {
    return unsupported(name, field + ".type", "pre-tokenizer '" + type + "' is not supported");
  }
  return Status::Ok();
}

const json* find_template(const json& j) {
  if (!j.is_object()) return nullptr;
  std::string type = str_or(j, "type", "");
  if (type == "TemplateProcessing") return &j;
  if (type == "Sequence" && j.contains("processors"))
    for (const auto& p : j["processors"])
      if (const json* t = find_template(p)) return t;
  return nullptr;
}

std::string token_name(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> TokenizerBuilder::hf(std::string_view tj_text, std::string_view cfg_text,
                                                        const std::string& name) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    json tj = json::parse(tj_text);
    json cfg = cfg_text.empty() ? json::object() : json::parse(cfg_text);
    if (!tj.is_object()) return bad(name, "(root)", "expected a JSON object");
    if (!tj.contains("model") || !tj["model"].is_object()) return bad(name, "model", "missing or not an object");
    const json& model = tj["model"];
    std::string mtype = str_or(model, "type", "BPE");
    if (mtype != "BPE")
      return unsupported(name, "model.type", "'" + mtype + "' is not supported (only BPE)");
    if (!str_or(model, "continuing_subword_prefix", "").empty() || !str_or(model, "end_of_word_suffix", "").empty())
      return unsupported(name, "model.continuing_subword_prefix", "subword prefixes/suffixes are not supported");
    if (!model.contains("vocab") || !model["vocab"].is_object())
      return bad(name, "model.vocab", "missing or not an object");
    if (!model.contains("merges") || !model["merges"].is_array())
      return bad(name, "model.merges", "missing or not an array");
    const json& vocab = model["vocab"];
    const json& added = fld(tj, "added_tokens");
    const bool byte_level = contains_type(fld(tj, "pre_tokenizer"), "ByteLevel") ||
                            contains_type(fld(tj, "decoder"), "ByteLevel");
    t->type_ = byte_level ? ModelType::kByteBpe : ModelType::kSpm;
    t->pre_name_ = "tokenizer.json";
    // Size of the id space.
    int64_t max_id = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer())
        return bad(name, "model.vocab[\"" + it.key() + "\"]", "id is not an integer");
      int64_t id = it.value().get<int64_t>();
      if (id < 0 || id > (1 << 26)) return bad(name, "model.vocab[\"" + it.key() + "\"]", "id " + std::to_string(id) + " is out of range");
      max_id = std::max(max_id, id);
    }
    for (size_t i = 0; i < added.size(); ++i) {
      if (!added[i].contains("id") || !added[i]["id"].is_number_integer() || !added[i].contains("content"))
        return bad(name, "added_tokens[" + std::to_string(i) + "]", "needs an integer id and a content");
      int64_t id = added[i]["id"].get<int64_t>();
      if (id < 0 || id > (1 << 26)) return bad(name, "added_tokens[" + std::to_string(i) + "].id", "out of range");
      max_id = std::max(max_id, id);
    }
    const size_t n = size_t(max_id + 1);
    t->text_.assign(n, std::string());
    t->bytes_.assign(n, std::string());
    t->kind_.assign(n, TokenKind::kUnused);
    std::vector<bool> seen(n, false);
    BpeModel& bpe = *t->bpe_;
    bpe.vocab.reserve(n * 2);
    bpe.byte_level = byte_level;
    bpe.mode = MergeMode::kRank;
    bpe.byte_fallback = bool_or(model, "byte_fallback", false);
    bpe.fuse_unk = bool_or(model, "fuse_unk", false);
    bpe.ignore_merges = t->ignore_merges_ = bool_or(model, "ignore_merges", false);
    std::string dec;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      size_t id = size_t(it.value().get<int64_t>());
      if (seen[id])
        return bad(name, "model.vocab", "id " + std::to_string(id) + " is assigned to both '" + t->text_[id] +
                                            "' and '" + it.key() + "'");
      seen[id] = true;
      const std::string& s = it.key();
      t->text_[id] = s;
      t->kind_[id] = TokenKind::kNormal;
      if (byte_level) {
        if (!byte_level_decode(s, &dec)) dec = s;
        t->bytes_[id] = dec;
        bpe.vocab.emplace(dec, int32_t(id));
      } else {
        int b = -1;
        if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') b = int(std::strtol(s.substr(3, 2).c_str(), nullptr, 16));
        if (b >= 0 && bpe.byte_fallback) {
          t->bytes_[id] = std::string(1, char(b));
          t->kind_[id] = TokenKind::kByte;
          bpe.byte_ids[b] = int32_t(id);
        } else {
          std::string r;
          for (size_t i = 0; i < s.size();) {
            if (s.compare(i, 3, "\xE2\x96\x81") == 0) r.push_back(' '), i += 3;
            else r.push_back(s[i++]);
          }
          t->bytes_[id] = r;
        }
        bpe.vocab.emplace(s, int32_t(id));
      }
    }
    std::unordered_map<std::string, int32_t, StrHash, StrEq> raw_ids;
    raw_ids.reserve(n * 2);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) raw_ids.emplace(it.key(), int32_t(it.value().get<int64_t>()));
    // Merges: "a b" strings or ["a", "b"] pairs; rank = position.
    const json& merges = model["merges"];
    bpe.merges.reserve(merges.size() * 2);
    std::string a, b;
    for (size_t r = 0; r < merges.size(); ++r) {
      const json& m = merges[r];
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return bad(name, "model.merges[" + std::to_string(r) + "]", "'" + s + "' is not two tokens separated by a space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        return bad(name, "model.merges[" + std::to_string(r) + "]", "expected \"a b\" or [\"a\", \"b\"]");
      }
      auto id_of = [&](const std::string& s) -> int32_t {
        auto it = raw_ids.find(s);
        return it == raw_ids.end() ? -1 : it->second;
      };
      int32_t la = id_of(a), lb = id_of(b), lm = id_of(a + b);
      if (la < 0 || lb < 0 || lm < 0)
        return bad(name, "model.merges[" + std::to_string(r) + "]",
                   "'" + a + " " + b + "': token '" + (la < 0 ? a : lb < 0 ? b : a + b) + "' is not in model.vocab");
      bpe.merges.emplace((uint64_t(uint32_t(la)) << 32) | uint32_t(lb), BpeModel::Merge{int32_t(r), lm});
    }
    // Added tokens.
    for (size_t i = 0; i < added.size(); ++i) {
      size_t id = size_t(added[i]["id"].get<int64_t>());
      std::string content = added[i]["content"].get<std::string>();
      bool special = bool_or(added[i], "special", false);
      if (seen[id] && t->text_[id] != content)
        return bad(name, "added_tokens[" + std::to_string(i) + "]",
                   "id " + std::to_string(id) + " is '" + content + "' but model.vocab has '" + t->text_[id] + "'");
      seen[id] = true;
      t->text_[id] = content;
      // The ByteLevel decoder maps an added token through the byte alphabet when
      // every character is in it (so "ĠHi" decodes to " Hi"), else keeps it as is.
      if (!byte_level || !byte_level_decode(content, &t->bytes_[id])) t->bytes_[id] = content;
      t->kind_[id] = special ? TokenKind::kControl : TokenKind::kUserDefined;
      t->added_.push_back({content, int32_t(id), special, bool_or(added[i], "lstrip", false),
                           bool_or(added[i], "rstrip", false)});
    }
    // unk
    std::string unk = str_or(model, "unk_token", "");
    if (!unk.empty()) {
      auto it = vocab.find(unk);
      if (it == vocab.end()) return bad(name, "model.unk_token", "'" + unk + "' is not in model.vocab");
      t->unk_id_ = bpe.unk_id = int32_t(it.value().get<int64_t>());
      if (t->kind_[size_t(t->unk_id_)] == TokenKind::kNormal) t->kind_[size_t(t->unk_id_)] = TokenKind::kUnknown;
    }
    if (byte_level)
      for (int c = 0; c < 256; ++c) bpe.byte_ids[c] = bpe.find(std::string(1, char(c)));
    LAYA_TRY(parse_normalizer(fld(tj, "normalizer"), name, "normalizer", t->normalizer_.get()));
    LAYA_TRY(parse_pre(fld(tj, "pre_tokenizer"), name, "pre_tokenizer", t->pre_.get(), t->normalizer_.get()));
    // Decoder: SentencePiece-style decoders drop the first leading space.
    const json& decj = fld(tj, "decoder");
    std::function<bool(const json&)> strips = [&](const json& d) -> bool {
      if (d.is_object()) {
        std::string ty = str_or(d, "type", "");
        if (ty == "Strip" && str_or(d, "content", "") == " " && fld(d, "start").is_number_integer() && fld(d, "start").get<int>() >= 1) return true;
        if (ty == "Metaspace" && str_or(d, "prepend_scheme", bool_or(d, "add_prefix_space", true) ? "always" : "never") != "never")
          return true;
        if (ty == "Sequence" && d.contains("decoders"))
          for (const auto& x : d["decoders"])
            if (strips(x)) return true;
      }
      return false;
    };
    t->spm_decode_strip_ = strips(decj);
    // Special-token ids by name.
    auto id_by_name = [&](const std::string& s) -> int32_t {
      for (const auto& ad : t->added_)
        if (ad.content == s) return ad.id;
      auto it = vocab.find(s);
      return it == vocab.end() ? -1 : int32_t(it.value().get<int64_t>());
    };
    // Post-processor template: ids before / after the sequence.
    if (const json* tp = find_template(fld(tj, "post_processor"))) {
      const json& single = fld(*tp, "single");
      const json& st = fld(*tp, "special_tokens");
      bool after = false;
      for (size_t i = 0; i < single.size(); ++i) {
        const json& e = single[i];
        if (e.contains("Sequence")) {
          after = true;
          continue;
        }
        if (!e.contains("SpecialToken")) continue;
        std::string sid = str_or(e["SpecialToken"], "id", "");
        std::vector<int32_t> ids;
        if (st.contains(sid) && st[sid].contains("ids")) {
          for (const auto& x : st[sid]["ids"]) ids.push_back(x.get<int32_t>());
        } else {
          int32_t id = id_by_name(sid);
          if (id < 0) return bad(name, "post_processor.single[" + std::to_string(i) + "]", "unknown special token '" + sid + "'");
          ids.push_back(id);
        }
        for (int32_t id : ids)
          if (id < 0 || size_t(id) >= n) return bad(name, "post_processor.special_tokens." + sid, "id out of range");
        auto& dst = after ? t->suffix_ids_ : t->prefix_ids_;
        dst.insert(dst.end(), ids.begin(), ids.end());
      }
    }
    t->add_bos_ = !t->prefix_ids_.empty();
    t->add_eos_ = !t->suffix_ids_.empty();
    std::string bos = cfg.is_object() && cfg.contains("bos_token") ? token_name(cfg["bos_token"]) : "";
    std::string eos = cfg.is_object() && cfg.contains("eos_token") ? token_name(cfg["eos_token"]) : "";
    if (!bos.empty()) t->bos_id_ = id_by_name(bos);
    if (!eos.empty()) t->eos_id_ = id_by_name(eos);
    if (t->bos_id_ < 0 && !t->prefix_ids_.empty()) t->bos_id_ = t->prefix_ids_[0];
    if (t->eos_id_ < 0 && !t->suffix_ids_.empty()) t->eos_id_ = t->suffix_ids_.back();
  } catch (const json::exception& e) {
    return Status(StatusCode::kCorrupt, name + ": invalid JSON or field type: " + e.what());
  }
  LAYA_TRY(t->finish_init(name));
  return t;
}

static Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kNotFound, path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_json(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(std::string tj, read_file(path));
  std::string cfg;
  auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(cfg_path, ec)) {
    auto r = read_file(cfg_path.string());
    if (r.ok()) cfg = std::move(r).value();
  }
  return TokenizerBuilder::hf(tj, cfg, path);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_json_text(std::string_view tokenizer_json,
                                                                std::string_view tokenizer_config_json,
                                                                const std::string& name) {
  return TokenizerBuilder::hf(tokenizer_json, tokenizer_config_json, name);
}

}  // namespace laya::tok
