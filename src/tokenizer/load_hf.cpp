// Tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json):
// model BPE (byte-level or SentencePiece-style with byte_fallback), added
// tokens, normalizers (NFC/NFKC/NFD/NFKD/Lowercase/Prepend/Replace/Sequence),
// pre-tokenizers (Split/ByteLevel/Metaspace/Digits/Punctuation/Whitespace/
// WhitespaceSplit/Sequence), TemplateProcessing post-processor, decoders.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"
#include "core/shown.h"
#include "tokenizer/internal.h"

namespace laya::tok {

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
    if (!arr.is_null() && !arr.is_array()) return bad(name, field + ".normalizers", "expected an array");
    for (size_t i = 0; i < arr.size(); ++i)
      LAYA_TRY(parse_normalizer(arr[i], name, field + ".normalizers[" + std::to_string(i) + "]", out));
  } else if (type == "NFC") out->steps.push_back({Op::kNFC, {}, {}});
  else if (type == "NFKC") out->steps.push_back({Op::kNFKC, {}, {}});
  else if (type == "NFD") out->steps.push_back({Op::kNFD, {}, {}});
  else if (type == "NFKD") out->steps.push_back({Op::kNFKD, {}, {}});
  else if (type == "Lowercase") out->steps.push_back({Op::kLowercase, {}, {}});
  else if (type == "Prepend") out->steps.push_back({Op::kPrepend, str_or(j, "prepend", ""), {}});
  else if (type == "Replace") {
    const json& pat = fld(fld(j, "pattern"), "String");
    if (!pat.is_string())
      return unsupported(name, field + ".pattern", "only String patterns are supported in Replace normalizers");
    out->steps.push_back({Op::kReplace, pat.get<std::string>(), str_or(j, "content", "")});
  } else {
    return unsupported(name, field + ".type", "normalizer " + shown(type) + " is not supported (supported: NFC, NFKC, "
                       "NFD, NFKD, Lowercase, Prepend, Replace, Sequence)");
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
    if (!arr.is_null() && !arr.is_array()) return bad(name, field + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < arr.size(); ++i)
      LAYA_TRY(parse_pre(arr[i], name, field + ".pretokenizers[" + std::to_string(i) + "]", pre, norm));
  } else if (type == "Split") {
    const json& pat = fld(j, "pattern");
    std::string p;
    bool literal;
    if (fld(pat, "Regex").is_string()) p = pat["Regex"].get<std::string>(), literal = false;
    else if (fld(pat, "String").is_string()) p = pat["String"].get<std::string>(), literal = true;
    else return bad(name, field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    std::string beh = str_or(j, "behavior", "Isolated");
    SplitBehavior b;
    if (beh == "Isolated") b = SplitBehavior::kIsolated;
    else if (beh == "Removed") b = SplitBehavior::kRemoved;
    else if (beh == "MergedWithPrevious") b = SplitBehavior::kMergedWithPrevious;
    else if (beh == "MergedWithNext") b = SplitBehavior::kMergedWithNext;
    else if (beh == "Contiguous") b = SplitBehavior::kContiguous;
    else return bad(name, field + ".behavior", "unknown behavior " + shown(beh));
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
    return unsupported(name, field + ".type", "pre-tokenizer " + shown(type) + " is not supported (supported: Split, "
                       "ByteLevel, Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit, Sequence)");
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

// Who holds an id while tokenizer.json is read (else the index in added_tokens).
constexpr int32_t kNoOwner = -2, kVocabOwner = -1;

// Decoders: decode() concatenates the tokens' bytes, which the loader has
// already mapped ("▁" → " ", <0xNN> → the byte, byte-level characters → bytes),
// and drops one leading space for SentencePiece-style decoders. These are the
// decoders that amount to exactly that; any other would print different text.
Status check_decoder(const json& d, const std::string& name, const std::string& field) {
  if (d.is_null()) return Status::Ok();
  if (!d.is_object()) return bad(name, field, "expected an object");
  const std::string type = str_or(d, "type", "");
  if (type == "ByteLevel" || type == "ByteFallback" || type == "Fuse" || type == "Metaspace") return Status::Ok();
  if (type == "Sequence") {
    const json& arr = fld(d, "decoders");
    if (!arr.is_array()) return bad(name, field + ".decoders", "missing or not an array");
    for (size_t i = 0; i < arr.size(); ++i)
      LAYA_TRY(check_decoder(arr[i], name, field + ".decoders[" + std::to_string(i) + "]"));
    return Status::Ok();
  }
  if (type == "Replace") {
    // The SentencePiece word marker back to a space, which the loader does.
    if (str_or(fld(d, "pattern"), "String", "") == "\xE2\x96\x81" && str_or(d, "content", "") == " ") return Status::Ok();
    return unsupported(name, field, "only a Replace of \"\xE2\x96\x81\" by \" \" is supported in decoders");
  }
  if (type == "Strip") {
    // At most one leading space (SentencePiece's prefix), nothing at the end.
    const int64_t start = fld(d, "start").is_number_integer() ? fld(d, "start").get<int64_t>() : 0;
    const int64_t stop = fld(d, "stop").is_number_integer() ? fld(d, "stop").get<int64_t>() : 0;
    if (str_or(d, "content", "") == " " && start <= 1 && stop == 0) return Status::Ok();
    return unsupported(name, field, "only a Strip of one leading space is supported in decoders");
  }
  if (type == "WordPiece" || type == "BPEDecoder" || type == "CTC")
    return unsupported(name, field + ".type", "decoder " + shown(type) + " is not supported");
  return unsupported(name, field + ".type", "unknown decoder " + shown(type) + " (supported: ByteLevel, ByteFallback, "
                     "Fuse, Metaspace, Replace, Strip, Sequence)");
}

// Post-processors: a TemplateProcessing's ids are added around the text
// (hf_post_processor); ByteLevel only trims offsets. Others would add ids
// this loader does not know about.
Status check_post_processor(const json& p, const std::string& name, const std::string& field) {
  if (p.is_null()) return Status::Ok();
  if (!p.is_object()) return bad(name, field, "expected an object");
  const std::string type = str_or(p, "type", "");
  if (type == "TemplateProcessing" || type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    const json& arr = fld(p, "processors");
    if (!arr.is_array()) return bad(name, field + ".processors", "missing or not an array");
    for (size_t i = 0; i < arr.size(); ++i)
      LAYA_TRY(check_post_processor(arr[i], name, field + ".processors[" + std::to_string(i) + "]"));
    return Status::Ok();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing")
    return unsupported(name, field + ".type", "post-processor " + shown(type) + " is not supported");
  return unsupported(name, field + ".type", "unknown post-processor " + shown(type) +
                                                " (supported: TemplateProcessing, ByteLevel, Sequence)");
}

}  // namespace

// The size of the id space: one more than the largest id of model.vocab and added_tokens.
static Result<size_t> hf_id_space(const json& vocab, const json& added, const std::string& name) {
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer())
      return bad(name, "model.vocab[" + shown(it.key()) + "]", "id is not an integer");
    int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > (1 << 26))
      return bad(name, "model.vocab[" + shown(it.key()) + "]", "id " + std::to_string(id) + " is out of range");
    max_id = std::max(max_id, id);
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    if (!a.is_object() || !fld(a, "id").is_number_integer() || !fld(a, "content").is_string())
      return bad(name, "added_tokens[" + std::to_string(i) + "]", "needs an integer id and a content");
    int64_t id = a["id"].get<int64_t>();
    if (id < 0 || id > (1 << 26)) return bad(name, "added_tokens[" + std::to_string(i) + "].id", "out of range");
    max_id = std::max(max_id, id);
  }
  // Ids are rows of the model's embedding: a gap is an id no text maps to and
  // no decoder can print, and in a hand-edited file it usually means every
  // later id is off by one. Checked here, before tables of max_id + 1 entries
  // are allocated (one stray id of 60 million would cost gigabytes).
  const size_t n = size_t(max_id + 1);
  std::vector<bool> present(n, false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) present[size_t(it.value().get<int64_t>())] = true;
  for (const json& a : added) present[size_t(a["id"].get<int64_t>())] = true;
  size_t first = n, missing = 0;
  for (size_t id = 0; id < n; ++id) {
    if (present[id]) continue;
    if (first == n) first = id;
    ++missing;
  }
  if (missing > 0) {
    return Status(StatusCode::kCorrupt,
                  fmt::format("{}: id {} belongs to no token of model.vocab or added_tokens ({} of ids 0..{} have none): "
                              "ids must be dense; a token deleted by hand, or ids from another vocabulary?",
                              name, first, missing, n - 1));
  }
  return n;
}

// model.vocab: strings, kinds and decoded bytes; byte tokens <0xNN> with byte_fallback.
Status TokenizerBuilder::hf_vocab(const json& model, const std::string& name, size_t n, Tokenizer* t,
                                  std::vector<int32_t>* owner) {
  const json& vocab = model["vocab"];
  t->text_.assign(n, std::string());
  t->bytes_.assign(n, std::string());
  t->kind_.assign(n, TokenKind::kUnused);
  owner->assign(n, kNoOwner);
  BpeModel& bpe = *t->bpe_;
  bpe.vocab.reserve(n * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    size_t id = size_t(it.value().get<int64_t>());
    if ((*owner)[id] != kNoOwner)
      return bad(name, "model.vocab", "id " + std::to_string(id) + " is assigned to both " + shown(t->text_[id]) +
                                          " and " + shown(it.key()));
    (*owner)[id] = kVocabOwner;
    const std::string& s = it.key();
    t->text_[id] = s;
    t->kind_[id] = TokenKind::kNormal;
    if (bpe.byte_level) {
      std::string& dec = t->bytes_[id];
      if (!byte_level_decode(s, &dec)) dec = s;
      bpe.vocab.emplace(dec, int32_t(id));
      continue;
    }
    int b = -1;
    // "<0xAB>": exactly two hex digits (strtol would read "<0xZZ>" as byte 0 and "<0x 1>" as 1).
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    };
    if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0)
      b = hex(s[3]) * 16 + hex(s[4]);
    if (b >= 0 && bpe.byte_fallback) {
      t->bytes_[id] = std::string(1, char(b));
      t->kind_[id] = TokenKind::kByte;
      bpe.byte_ids[b] = int32_t(id);
    } else {
      std::string& r = t->bytes_[id];
      for (size_t i = 0; i < s.size();) {
        if (s.compare(i, 3, "\xE2\x96\x81") == 0) r.push_back(' '), i += 3;
        else r.push_back(s[i++]);
      }
    }
    bpe.vocab.emplace(s, int32_t(id));
  }
  return Status::Ok();
}

// model.merges: "a b" strings or ["a", "b"] pairs; rank = position.
Status TokenizerBuilder::hf_merges(const json& model, const std::string& name, Tokenizer* t) {
  // Views into the parsed JSON, which outlives this call, and the field name
  // made only for a message: copying strings here was ~15 % of loading Llama
  // 3's 9 MB tokenizer.json (0.85-0.92 -> 0.69-0.75 s; the rest is the JSON
  // parse and the hash tables).
  const json& vocab = model["vocab"];
  std::unordered_map<std::string_view, int32_t, StrHash, StrEq> raw_ids;
  raw_ids.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) raw_ids.emplace(it.key(), int32_t(it.value().get<int64_t>()));
  auto id_of = [&](std::string_view s) -> int32_t {
    auto it = raw_ids.find(s);
    return it == raw_ids.end() ? -1 : it->second;
  };
  BpeModel& bpe = *t->bpe_;
  const json& merges = model["merges"];
  bpe.merges.reserve(merges.size() * 2);
  std::string_view a, b;
  std::string ab;
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    auto field = [r] { return "model.merges[" + std::to_string(r) + "]"; };
    if (m.is_string()) {
      const std::string_view s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return bad(name, field(), shown(std::string(s)) + " is not two tokens separated by a space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get_ref<const std::string&>();
      b = m[1].get_ref<const std::string&>();
    } else {
      return bad(name, field(), "expected \"a b\" or [\"a\", \"b\"]");
    }
    ab.assign(a).append(b);
    int32_t la = id_of(a), lb = id_of(b), lm = id_of(ab);
    if (la < 0 || lb < 0 || lm < 0)
      return bad(name, field(), shown(std::string(a) + " " + std::string(b)) + ": token " +
                                    shown(std::string(la < 0 ? a : lb < 0 ? b : std::string_view(ab))) +
                                    " is not in model.vocab");
    bpe.merges.emplace((uint64_t(uint32_t(la)) << 32) | uint32_t(lb), BpeModel::Merge{int32_t(r), lm});
  }
  return Status::Ok();
}

// added_tokens: cut out of raw text before BPE. Control ones ("special": true,
// or what llama.cpp's converter and loader make control) only with
// parse_special; see Tokenizer::split_added.
Status TokenizerBuilder::hf_added_tokens(const json& added, const std::string& name, Tokenizer* t,
                                         std::vector<int32_t>* owner) {
  const bool byte_level = t->bpe_->byte_level;
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    size_t id = size_t(a["id"].get<int64_t>());
    const std::string& content = a["content"].get_ref<const std::string&>();
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    // An added token is matched by its text: empty text matches nowhere.
    if (content.empty()) return bad(name, field + ".content", "is empty (id " + std::to_string(id) + ")");
    // An id names one token. An added token may restate a vocabulary token
    // (Mistral's "<s>"), not replace it: the id would encode as one text and
    // decode as another (a BOS that prints as something else).
    const int32_t prev = (*owner)[id];
    if (prev != kNoOwner && t->text_[id] != content) {
      const std::string who = prev == kVocabOwner ? "model.vocab" : "added_tokens[" + std::to_string(prev) + "]";
      return bad(name, field, "id " + std::to_string(id) + " is " + shown(content) + " but " + who + " has " +
                                  shown(t->text_[id]) + " at that id");
    }
    if (prev == kNoOwner) (*owner)[id] = int32_t(i);
    t->text_[id] = content;
    // The ByteLevel decoder maps an added token through the byte alphabet when
    // every character is in it (so "ĠHi" decodes to " Hi"), else keeps it as is.
    if (!byte_level || !byte_level_decode(content, &t->bytes_[id])) t->bytes_[id] = content;
    const bool control = bool_or(a, "special", false) || hf_added_token_looks_special(content);
    t->kind_[id] = control ? TokenKind::kControl : TokenKind::kUserDefined;
  }
  // llama.cpp's fix-ups, on the added tokens only: a vocabulary token is never
  // special in Hugging Face, whatever its text. No FIM role is named by id here.
  std::vector<std::string> texts(added.size());
  std::vector<TokenKind> kinds(added.size());
  for (size_t i = 0; i < added.size(); ++i) {
    const size_t id = size_t(added[i]["id"].get<int64_t>());
    texts[i] = t->text_[id];
    kinds[i] = t->kind_[id];
  }
  mark_control_tokens(texts, 0, &kinds);
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const int32_t id = int32_t(a["id"].get<int64_t>());
    t->kind_[size_t(id)] = kinds[i];
    t->added_.push_back({texts[i], id, kinds[i] == TokenKind::kControl || kinds[i] == TokenKind::kUnknown,
                         bool_or(a, "lstrip", false), bool_or(a, "rstrip", false)});
  }
  return Status::Ok();
}

// The post-processor template (ids before / after the sequence) and the BOS /
// EOS ids named by tokenizer_config.json.
Status TokenizerBuilder::hf_post_processor(const json& tj, const json& cfg, const std::string& name,
                                           const std::string& cfg_name, Tokenizer* t) {
  const json& vocab = tj["model"]["vocab"];
  auto id_by_name = [&](const std::string& s) -> int32_t {
    for (const auto& ad : t->added_)
      if (ad.content == s) return ad.id;
    auto it = vocab.find(s);
    return it == vocab.end() ? -1 : int32_t(it.value().get<int64_t>());
  };
  if (const json* tp = find_template(fld(tj, "post_processor"))) {
    const json& single = fld(*tp, "single");
    if (!single.is_null() && !single.is_array()) return bad(name, "post_processor.single", "expected an array");
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
      if (fld(fld(st, sid.c_str()), "ids").is_array()) {
        for (const auto& x : st[sid]["ids"]) {
          // get<int32_t> would wrap 2^32 + 5 to 5, an id inside the vocabulary.
          if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
            return bad(name, "post_processor.special_tokens." + sid + ".ids", "not an integer in [0, 2^31)");
          ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
        }
      } else {
        int32_t id = id_by_name(sid);
        if (id < 0)
          return bad(name, "post_processor.single[" + std::to_string(i) + "]", "unknown special token " + shown(sid));
        ids.push_back(id);
      }
      for (int32_t id : ids)
        if (id < 0 || id >= t->n_vocab()) return bad(name, "post_processor.special_tokens." + sid, "id out of range");
      auto& dst = after ? t->suffix_ids_ : t->prefix_ids_;
      dst.insert(dst.end(), ids.begin(), ids.end());
    }
  }
  t->add_bos_ = !t->prefix_ids_.empty();
  t->add_eos_ = !t->suffix_ids_.empty();
  // tokenizer_config.json names BOS and EOS by text: a name that is no token
  // would leave the model without an end of generation, or with the wrong one.
  for (const char* key : {"bos_token", "eos_token"}) {
    const json& v = fld(cfg, key);
    if (v.is_null()) continue;
    if (!v.is_string() && !(v.is_object() && fld(v, "content").is_string()))
      return bad(cfg_name, key, "expected a token's text or {\"content\": text}, found " + std::string(v.type_name()));
    const std::string text = token_name(v);
    if (text.empty()) continue;
    const int32_t id = id_by_name(text);
    if (id < 0)
      return bad(cfg_name, key, shown(text) + " names no token of " + name + " (a tokenizer_config.json from another "
                                "model?)");
    (key == std::string_view("bos_token") ? t->bos_id_ : t->eos_id_) = id;
  }
  if (t->bos_id_ < 0 && !t->prefix_ids_.empty()) t->bos_id_ = t->prefix_ids_[0];
  if (t->eos_id_ < 0 && !t->suffix_ids_.empty()) t->eos_id_ = t->suffix_ids_.back();
  return Status::Ok();
}

// Decoder: SentencePiece-style decoders drop the first leading space.
static bool decoder_strips_leading_space(const json& d) {
  if (!d.is_object()) return false;
  std::string ty = str_or(d, "type", "");
  if (ty == "Strip" && str_or(d, "content", "") == " " && fld(d, "start").is_number_integer() &&
      fld(d, "start").get<int64_t>() >= 1)
    return true;
  if (ty == "Metaspace" && str_or(d, "prepend_scheme", bool_or(d, "add_prefix_space", true) ? "always" : "never") != "never")
    return true;
  if (ty == "Sequence" && fld(d, "decoders").is_array())
    for (const auto& x : d["decoders"])
      if (decoder_strips_leading_space(x)) return true;
  return false;
}

Result<std::unique_ptr<Tokenizer>> TokenizerBuilder::hf(std::string_view tj_text, std::string_view cfg_text,
                                                        const std::string& name, const std::string& cfg_name) {
  LAYA_ASSIGN_OR_RETURN(json tj, parse_json(tj_text, name));
  json cfg = json::object();
  if (!cfg_text.empty()) {
    LAYA_ASSIGN_OR_RETURN(cfg, parse_json(cfg_text, cfg_name));
    if (!cfg.is_object()) return bad(cfg_name, "(root)", "expected a JSON object");
  }
  if (!tj.is_object()) return bad(name, "(root)", "expected a JSON object");
  const json& model = fld(tj, "model");
  if (!model.is_object()) return bad(name, "model", "missing or not an object");
  std::string mtype = str_or(model, "type", "BPE");
  if (mtype != "BPE") return unsupported(name, "model.type", shown(mtype) + " is not supported (only BPE)");
  if (!str_or(model, "continuing_subword_prefix", "").empty() || !str_or(model, "end_of_word_suffix", "").empty())
    return unsupported(name, "model.continuing_subword_prefix", "subword prefixes/suffixes are not supported");
  if (!fld(model, "vocab").is_object()) return bad(name, "model.vocab", "missing or not an object");
  if (!fld(model, "merges").is_array()) return bad(name, "model.merges", "missing or not an array");
  const json& added = fld(tj, "added_tokens");
  if (!added.is_null() && !added.is_array()) return bad(name, "added_tokens", "not an array");
  LAYA_ASSIGN_OR_RETURN(size_t n, hf_id_space(model["vocab"], added, name));

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const bool byte_level = contains_type(fld(tj, "pre_tokenizer"), "ByteLevel") ||
                          contains_type(fld(tj, "decoder"), "ByteLevel");
  t->type_ = byte_level ? ModelType::kByteBpe : ModelType::kSpm;
  t->pre_name_ = "tokenizer.json";
  BpeModel& bpe = *t->bpe_;
  bpe.byte_level = byte_level;
  bpe.mode = MergeMode::kRank;
  bpe.byte_fallback = bool_or(model, "byte_fallback", false);
  bpe.fuse_unk = bool_or(model, "fuse_unk", false);
  bpe.ignore_merges = t->ignore_merges_ = bool_or(model, "ignore_merges", false);
  std::vector<int32_t> owner;  // per id: kNoOwner, kVocabOwner or the index in added_tokens
  LAYA_TRY(hf_vocab(model, name, n, t.get(), &owner));
  LAYA_TRY(hf_merges(model, name, t.get()));
  LAYA_TRY(hf_added_tokens(added, name, t.get(), &owner));
  std::string unk = str_or(model, "unk_token", "");
  if (!unk.empty()) {
    auto it = model["vocab"].find(unk);
    if (it == model["vocab"].end()) return bad(name, "model.unk_token", shown(unk) + " is not in model.vocab");
    t->unk_id_ = bpe.unk_id = int32_t(it.value().get<int64_t>());
    if (t->kind_[size_t(t->unk_id_)] == TokenKind::kNormal) t->kind_[size_t(t->unk_id_)] = TokenKind::kUnknown;
  }
  if (byte_level)
    for (int c = 0; c < 256; ++c) bpe.byte_ids[c] = bpe.find(std::string(1, char(c)));
  LAYA_TRY(parse_normalizer(fld(tj, "normalizer"), name, "normalizer", t->normalizer_.get()));
  LAYA_TRY(parse_pre(fld(tj, "pre_tokenizer"), name, "pre_tokenizer", t->pre_.get(), t->normalizer_.get()));
  LAYA_TRY(check_decoder(fld(tj, "decoder"), name, "decoder"));
  t->spm_decode_strip_ = decoder_strips_leading_space(fld(tj, "decoder"));
  LAYA_TRY(check_post_processor(fld(tj, "post_processor"), name, "post_processor"));
  LAYA_TRY(hf_post_processor(tj, cfg, name, cfg_name, t.get()));
  LAYA_TRY(check_vocabulary(*t, name));
  LAYA_TRY(t->finish_init());
  return t;
}

// The tokenizer_config.json beside a tokenizer.json, for messages about it.
static std::string config_path_beside(const std::string& tokenizer_json) {
  return (std::filesystem::path(tokenizer_json).parent_path() / "tokenizer_config.json").string();
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_json(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(std::string tj, read_file(path));
  std::string cfg;
  const std::string cfg_path = config_path_beside(path);
  std::error_code ec;
  if (std::filesystem::exists(cfg_path, ec)) {
    // Present but unreadable is an error: without it BOS and EOS would
    // silently fall back to the post-processor's guesses.
    LAYA_ASSIGN_OR_RETURN(cfg, read_file(cfg_path));
  }
  return TokenizerBuilder::hf(tj, cfg, path, cfg_path);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_json_text(std::string_view tokenizer_json,
                                                                std::string_view tokenizer_config_json,
                                                                const std::string& name) {
  return TokenizerBuilder::hf(tokenizer_json, tokenizer_config_json, name, config_path_beside(name));
}

}  // namespace laya::tok
