// mkmodel's tokenizer metadata (see vocab.h).
#include "modelgen/vocab.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace laya::modelgen {

void synthetic_vocab(const ModelPreset& p, VocabMeta* v) {
  v->model = "gpt2";
  v->pre = "default";  // llama.cpp's name for its default split (an unknown name is refused at load)
  v->source = "synthetic";
  v->tokens.clear();
  for (int b = 0; b < 256; ++b) v->tokens.push_back(tok::byte_to_unicode(static_cast<uint8_t>(b)));
  v->types.assign(256, kNormal);
  // A few merges so BPE has something to do: "Ġ" + lowercase letter, then letter pairs.
  const std::string sp = v->tokens[' '];
  std::vector<std::pair<std::string, std::string>> cand;
  for (char c = 'a'; c <= 'z'; ++c) cand.push_back({sp, std::string(1, c)});
  for (char a : std::string("etaoinshrdlu"))
    for (char b : std::string("etaoinshrdlu")) cand.push_back({std::string(1, a), std::string(1, b)});
  const int64_t room = p.n_vocab - 256 - 2 - (p.arch == "phi3" ? 4 : 0);  // after them: phi3's names, bos, eos
  for (size_t i = 0; i < cand.size() && static_cast<int64_t>(v->tokens.size()) - 256 < room; ++i) {
    v->merges.push_back(cand[i].first + " " + cand[i].second);
    v->tokens.push_back(cand[i].first + cand[i].second);
    v->types.push_back(kNormal);
  }
  // llama.cpp sets attributes on these by name in a model whose general.name
  // says phi3 (llama-vocab.cpp: unordered_map::at, the load fails without
  // them); Phi-3's own vocabulary has them.
  if (p.arch == "phi3") {
    for (const char* t : {"<unk>", "<s>", "</s>", "<|endoftext|>"}) {
      v->tokens.push_back(t);
      v->types.push_back(kControl);
    }
  }
  v->bos = static_cast<int32_t>(v->tokens.size());
  v->tokens.push_back("<|begin_of_text|>");
  v->types.push_back(kControl);
  v->eos = static_cast<int32_t>(v->tokens.size());
  v->tokens.push_back("<|end_of_text|>");
  v->types.push_back(kControl);
  v->add_bos = true;
  v->n_real = static_cast<int64_t>(v->tokens.size());
}

namespace {

// convert_hf_to_gguf.py: does_token_look_special.
bool looks_special(const std::string& t) {
  auto starts = [&](const char* s) { return t.rfind(s, 0) == 0; };
  auto ends = [&](const char* s) {
    const size_t n = std::strlen(s);
    return t.size() >= n && t.compare(t.size() - n, n, s) == 0;
  };
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (starts("<|") && ends("|>")) return true;
  if (starts("<\xEF\xBD\x9C") && ends("\xEF\xBD\x9C>")) return true;
  if (starts("<unused") && ends(">")) return true;
  return false;
}

// What tokenizer_config.json (next to tokenizer.json) says; empty when absent
// or unreadable, as the converter treats it.
struct HfTokenizerConfig {
  std::string bos, eos, pad;      // token texts
  std::optional<bool> add_bos;    // add_bos_token
};

HfTokenizerConfig read_tokenizer_config(const std::string& tokenizer_json) {
  HfTokenizerConfig c;
  const std::string path = (std::filesystem::path(tokenizer_json).parent_path() / "tokenizer_config.json").string();
  auto text = read_file(path);
  if (!text.ok()) return c;
  auto cfg = parse_json(*text, path);
  if (!cfg.ok() || !cfg->is_object()) return c;
  auto tok_text = [&](const char* key) -> std::string {
    if (!cfg->contains(key)) return {};
    const auto& e = (*cfg)[key];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
    return {};
  };
  c.bos = tok_text("bos_token");
  c.eos = tok_text("eos_token");
  c.pad = tok_text("pad_token");
  if (cfg->contains("add_bos_token") && (*cfg)["add_bos_token"].is_boolean()) c.add_bos = (*cfg)["add_bos_token"].get<bool>();
  return c;
}

// id → (text, type) of model.vocab and added_tokens.
using TokensById = std::map<int64_t, std::pair<std::string, int32_t>>;

TokensById read_tokens(const nlohmann::json& j) {
  TokensById by_id;
  const auto& vocab = j["model"]["vocab"];
  for (auto it = vocab.begin(); it != vocab.end(); ++it) by_id[it.value().get<int64_t>()] = {it.key(), kNormal};
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      const int64_t id = a.value("id", int64_t(-1));
      if (id < 0) continue;
      const std::string content = a.value("content", std::string());
      const bool special = a.value("special", false) || looks_special(content);
      by_id[id] = {content, special ? kControl : kUserDefined};
    }
  }
  return by_id;
}

void push_pad(VocabMeta* v) {
  v->tokens.push_back("[PAD" + std::to_string(v->tokens.size()) + "]");
  v->types.push_back(kUnused);
}

// A tokenizer no larger than the model: every id in place, the rest padding.
void place_tokens(const ModelPreset& p, const TokensById& by_id, VocabMeta* v) {
  v->tokens.resize(static_cast<size_t>(p.n_vocab));
  v->types.assign(static_cast<size_t>(p.n_vocab), kUnused);
  for (int64_t i = 0; i < p.n_vocab; ++i) v->tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
  for (auto& [id, e] : by_id) {
    v->tokens[static_cast<size_t>(id)] = e.first;
    v->types[static_cast<size_t>(id)] = e.second;
  }
  v->n_real = static_cast<int64_t>(by_id.size());
}

// A larger tokenizer than the model (smollm2 with the Llama 3 vocabulary):
// keep the lowest ids, then the BOS/EOS at the end.
void truncate_tokens(const ModelPreset& p, TokensById& by_id, const HfTokenizerConfig& cfg, VocabMeta* v) {
  std::vector<int64_t> keep_special;
  auto find_text = [&](const std::string& s) -> int64_t {
    for (auto& [id, e] : by_id)
      if (e.first == s) return id;
    return -1;
  };
  for (const std::string& s : {cfg.bos, cfg.eos}) {
    int64_t id = find_text(s);
    if (id >= 0 && std::find(keep_special.begin(), keep_special.end(), id) == keep_special.end()) keep_special.push_back(id);
  }
  const int64_t n_low = p.n_vocab - static_cast<int64_t>(keep_special.size());
  for (auto& [id, e] : by_id) {
    if (id >= n_low) break;
    while (static_cast<int64_t>(v->tokens.size()) < id) push_pad(v);  // a gap in the ids
    v->tokens.push_back(e.first);
    v->types.push_back(e.second);
  }
  while (static_cast<int64_t>(v->tokens.size()) < n_low) push_pad(v);
  for (int64_t id : keep_special) {
    v->tokens.push_back(by_id[id].first);
    v->types.push_back(by_id[id].second);
  }
  v->n_real = p.n_vocab;
}

// model.merges ("a b" strings or [a, b] pairs); a truncated vocabulary keeps
// only the merges whose parts and result it still has.
void read_merges(const nlohmann::json& model, bool truncated, VocabMeta* v) {
  if (!model.contains("merges") || !model["merges"].is_array()) return;
  std::unordered_set<std::string> present;
  present.reserve(v->tokens.size() * 2);
  for (size_t i = 0; i < v->tokens.size(); ++i)
    if (v->types[i] != kUnused) present.insert(v->tokens[i]);
  v->merges.reserve(model["merges"].size());
  for (const auto& m : model["merges"]) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) continue;
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      continue;
    }
    if (truncated && (!present.count(a) || !present.count(b) || !present.count(a + b))) continue;
    v->merges.push_back(a + " " + b);
  }
}

}  // namespace

Status hf_vocab(const ModelPreset& p, const std::string& path, VocabMeta* v) {
  LAYA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  LAYA_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(text, path));
  if (!j.is_object() || !j.contains("model") || !j["model"].contains("vocab"))
    return Status(StatusCode::kCorrupt, fmt::format("{}: not a tokenizer.json with model.vocab", path));
  const auto& model = j["model"];
  if (model.value("type", std::string("BPE")) != "BPE")
    return Status(StatusCode::kUnsupported, fmt::format("{}: model.type is not BPE", path));
  TokensById by_id = read_tokens(j);
  HfTokenizerConfig cfg = read_tokenizer_config(path);
  // Qwen has no bos_token in tokenizer_config; its config.json's bos_token_id is <|endoftext|>.
  if (cfg.bos.empty() && !cfg.pad.empty()) cfg.bos = cfg.pad;
  if (cfg.bos.empty() && !cfg.eos.empty()) cfg.bos = cfg.eos;

  const int64_t n_in = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  v->tokens.clear();
  v->types.clear();
  if (n_in <= p.n_vocab) place_tokens(p, by_id, v);
  else truncate_tokens(p, by_id, cfg, v);
  read_merges(model, n_in > p.n_vocab, v);
  auto id_of = [&](const std::string& s) -> int32_t {
    if (s.empty()) return -1;
    for (size_t i = v->tokens.size(); i-- > 0;)
      if (v->tokens[i] == s && v->types[i] == kControl) return static_cast<int32_t>(i);
    return -1;
  };
  v->bos = id_of(cfg.bos);
  v->eos = id_of(cfg.eos);
  v->pad = id_of(cfg.pad);
  v->model = "gpt2";
  // The pre-tokenizer family, as llama.cpp's converter names it (it hashes a
  // test tokenization; the special tokens tell the two families apart here).
  bool llama3 = false, qwen = false;
  for (const auto& [id, e] : by_id) {
    if (e.first == "<|begin_of_text|>") llama3 = true;
    if (e.first == "<|im_start|>") qwen = true;
  }
  v->pre = llama3 ? "llama-bpe" : qwen ? "qwen2" : "default";
  v->add_bos = cfg.add_bos.value_or(llama3);  // Llama 3's post-processor adds <|begin_of_text|>
  v->source = path;
  return Status::Ok();
}

std::string find_fixture_tokenizer(const ModelPreset& p, const std::string& fixtures_dir) {
  namespace fs = std::filesystem;
  if (p.tokenizer != "llama3" && p.tokenizer != "qwen3") return {};
  std::vector<fs::path> roots;
  if (!fixtures_dir.empty()) roots.push_back(fixtures_dir);
  if (const char* env = std::getenv("LAYA_FIXTURES"); env && *env) roots.push_back(env);
  std::error_code ec;
  fs::path cur = fs::current_path(ec);
  for (int up = 0; up < 6 && !cur.empty(); ++up) {
    roots.push_back(cur / "shared" / "fixtures");
    roots.push_back(cur / ".." / "shared" / "fixtures");
    if (cur == cur.parent_path()) break;
    cur = cur.parent_path();
  }
  for (const auto& r : roots) {
    fs::path t = r / "tokenizer" / "hf" / p.tokenizer / "tokenizer.json";
    if (fs::is_regular_file(t, ec)) return fs::weakly_canonical(t, ec).string();
  }
  return {};
}

}  // namespace laya::modelgen
