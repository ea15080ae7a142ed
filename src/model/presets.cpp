// Model presets and the random-weight GGUF generator behind `laya mkmodel`.
#include "model/presets.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "backend/cpu/quantize.h"
#include "format/gguf_writer.h"
#include "model/hparams.h"

namespace laya {

// ---- presets ----------------------------------------------------------------------

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = [] {
    std::vector<ModelPreset> v;
    {
      // meta-llama/Llama-3.2-1B config.json
      ModelPreset p;
      p.name = "llama-3.2-1b";
      p.arch = "llama";
      p.n_embd = 2048, p.n_layer = 16, p.n_head = 32, p.n_head_kv = 8, p.head_dim = 64, p.n_ff = 8192;
      p.n_vocab = 128256, p.n_ctx = 131072;
      p.rope_theta = 500000, p.rms_eps = 1e-5f, p.tied = true;
      p.rope_factor = 32, p.rope_low_freq = 1, p.rope_high_freq = 4, p.rope_orig_ctx = 8192;
      p.tokenizer = "llama3";
      v.push_back(p);
    }
    {
      // Qwen/Qwen2.5-0.5B config.json
      ModelPreset p;
      p.name = "qwen2.5-0.5b";
      p.arch = "qwen2";
      p.n_embd = 896, p.n_layer = 24, p.n_head = 14, p.n_head_kv = 2, p.head_dim = 64, p.n_ff = 4864;
      p.n_vocab = 151936, p.n_ctx = 32768;
      p.rope_theta = 1000000, p.rms_eps = 1e-6f, p.tied = true, p.qkv_bias = true;
      p.tokenizer = "qwen3";
      v.push_back(p);
    }
    {
      // Qwen/Qwen3-0.6B config.json
      ModelPreset p;
      p.name = "qwen3-0.6b";
      p.arch = "qwen3";
      p.n_embd = 1024, p.n_layer = 28, p.n_head = 16, p.n_head_kv = 8, p.head_dim = 128, p.n_ff = 3072;
      p.n_vocab = 151936, p.n_ctx = 40960;
      p.rope_theta = 1000000, p.rms_eps = 1e-6f, p.tied = true, p.qk_norm = true;
      p.tokenizer = "qwen3";
      v.push_back(p);
    }
    {
      // HuggingFaceTB/SmolLM2-135M config.json
      ModelPreset p;
      p.name = "smollm2-135m";
      p.arch = "llama";
      p.n_embd = 576, p.n_layer = 30, p.n_head = 9, p.n_head_kv = 3, p.head_dim = 64, p.n_ff = 1536;
      p.n_vocab = 49152, p.n_ctx = 8192;
      p.rope_theta = 100000, p.rms_eps = 1e-5f, p.tied = true;
      p.tokenizer = "llama3";
      v.push_back(p);
    }
    {
      // Tiny models for tests: K-quant-sized rows, synthetic vocabulary.
      ModelPreset p;
      p.name = "test-tiny";
      p.arch = "llama";
      p.n_embd = 256, p.n_layer = 2, p.n_head = 4, p.n_head_kv = 2, p.head_dim = 64, p.n_ff = 512;
      p.n_vocab = 320, p.n_ctx = 256;
      p.rope_theta = 10000, p.rms_eps = 1e-5f, p.tied = true;
      p.tokenizer = "synthetic";
      p.hidden = true;
      v.push_back(p);
      ModelPreset q = p;
      q.name = "test-tiny-qwen2";
      q.arch = "qwen2", q.qkv_bias = true, q.n_embd = 160, q.n_head = 5, q.n_head_kv = 1, q.head_dim = 32, q.n_ff = 288;
      q.rms_eps = 1e-6f;
      v.push_back(q);
      ModelPreset r = p;
      r.name = "test-tiny-qwen3";
      r.arch = "qwen3", r.qk_norm = true, r.head_dim = 128, r.n_head = 4, r.n_head_kv = 2, r.rms_eps = 1e-6f;
      v.push_back(r);
      ModelPreset s = p;
      s.name = "test-tiny-llama3";
      s.rope_factor = 32, s.rope_theta = 500000, s.rope_orig_ctx = 128, s.tied = false;
      v.push_back(s);
    }
    return v;
  }();
  return kPresets;
}

const ModelPreset* find_preset(std::string_view name) {
  for (const auto& p : model_presets())
    if (p.name == name) return &p;
  return nullptr;
}

bool parse_mk_type(std::string_view s, MkType* out) {
  std::string u(s);
  for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u == "Q8_0") *out = MkType::kQ8_0;
  else if (u == "Q4_K_M") *out = MkType::kQ4_K_M;
  else if (u == "F16") *out = MkType::kF16;
  else if (u == "BF16") *out = MkType::kBF16;
  else if (u == "F32") *out = MkType::kF32;
  else return false;
  return true;
}

const char* mk_type_name(MkType t) {
  switch (t) {
    case MkType::kF32: return "F32";
    case MkType::kF16: return "F16";
    case MkType::kQ8_0: return "Q8_0";
    case MkType::kQ4_K_M: return "Q4_K_M";
    case MkType::kBF16: return "BF16";
  }
  return "?";
}

// ---- tensor plan (llama.cpp's llama_tensor_get_type for Q4_K_M) ---------------------

namespace {

// llama-quant.cpp: tensor_type_fallback.
DType fallback(DType t, int64_t ncols) {
  const int64_t bs = dtype_info(t).block_size;
  if (ncols % bs == 0) return t;
  DType r;
  switch (t) {
    case DType::Q4_K: r = DType::Q5_0; break;
    case DType::Q5_K: r = DType::Q5_1; break;
    case DType::Q6_K: r = DType::Q8_0; break;
    default: r = t; break;
  }
  if (ncols % dtype_info(r).block_size != 0) r = DType::F16;
  return r;
}

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

}  // namespace

std::vector<PlannedTensor> plan_tensors(const ModelPreset& p, MkType type) {
  std::vector<PlannedTensor> out;
  auto add = [&](std::string name, std::vector<int64_t> ne, TensorRole role) {
    out.push_back({std::move(name), std::move(ne), DType::F32, role});
  };
  add("token_embd.weight", {p.n_embd, p.n_vocab}, TensorRole::kEmbedding);
  if (p.rope_factor > 0) add("rope_freqs.weight", {p.head_dim / 2}, TensorRole::kRopeFreqs);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    add(b + "attn_norm.weight", {p.n_embd}, TensorRole::kNorm);
    add(b + "attn_q.weight", {p.n_embd, p.q_dim()}, TensorRole::kWeight);
    add(b + "attn_k.weight", {p.n_embd, p.kv_dim()}, TensorRole::kWeight);
    add(b + "attn_v.weight", {p.n_embd, p.kv_dim()}, TensorRole::kWeight);
    if (p.qkv_bias) {
      add(b + "attn_q.bias", {p.q_dim()}, TensorRole::kBias);
      add(b + "attn_k.bias", {p.kv_dim()}, TensorRole::kBias);
      add(b + "attn_v.bias", {p.kv_dim()}, TensorRole::kBias);
    }
    add(b + "attn_output.weight", {p.q_dim(), p.n_embd}, TensorRole::kWeight);
    if (p.qk_norm) {
      add(b + "attn_q_norm.weight", {p.head_dim}, TensorRole::kNorm);
      add(b + "attn_k_norm.weight", {p.head_dim}, TensorRole::kNorm);
    }
    add(b + "ffn_norm.weight", {p.n_embd}, TensorRole::kNorm);
    add(b + "ffn_gate.weight", {p.n_embd, p.n_ff}, TensorRole::kWeight);
    add(b + "ffn_up.weight", {p.n_embd, p.n_ff}, TensorRole::kWeight);
    add(b + "ffn_down.weight", {p.n_ff, p.n_embd}, TensorRole::kWeight);
  }
  add("output_norm.weight", {p.n_embd}, TensorRole::kNorm);
  if (!p.tied) add("output.weight", {p.n_embd, p.n_vocab}, TensorRole::kWeight);

  const int n_layer = static_cast<int>(p.n_layer);
  int i_attention_wv = 0, i_ffn_down = 0;
  for (auto& t : out) {
    if (t.ne.size() < 2) continue;  // 1-D tensors (norms, biases, rope factors) stay F32
    const int64_t ncols = t.ne[0];
    switch (type) {
      case MkType::kF32: t.type = DType::F32; break;
      case MkType::kF16: t.type = DType::F16; break;
      case MkType::kBF16: t.type = DType::BF16; break;
      case MkType::kQ8_0: t.type = fallback(DType::Q8_0, ncols); break;
      case MkType::kQ4_K_M: {
        DType nt = DType::Q4_K;
        const bool is_output = t.name == "output.weight";
        const bool is_embd = t.name == "token_embd.weight";
        if (is_output || (p.tied && is_embd)) {
          // The output projection (and a tied embedding that serves as it).
          nt = ncols % kQK_K != 0 ? DType::Q8_0 : DType::Q6_K;
        } else if (is_embd) {
          // untied token embedding: the default type
        } else if (t.name.find("attn_v.weight") != std::string::npos) {
          if (use_more_bits(i_attention_wv, n_layer)) nt = DType::Q6_K;
          ++i_attention_wv;
        } else if (t.name.find("ffn_down") != std::string::npos) {
          if (use_more_bits(i_ffn_down, n_layer)) nt = DType::Q6_K;
          ++i_ffn_down;
        }
        t.type = fallback(nt, ncols);
        break;
      }
    }
  }
  return out;
}

// ---- tokenizer metadata ---------------------------------------------------------------

namespace {

enum TokType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct VocabMeta {
  std::string model = "gpt2";
  std::string pre;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int32_t bos = -1, eos = -1, pad = -1;
  bool add_bos = false;
  std::string source;
  int64_t n_real = 0;
};

// GPT-2's byte → printable unicode code point map, as UTF-8 strings.
std::vector<std::string> byte_level_alphabet() {
  std::vector<int> cps(256, -1);
  std::vector<bool> direct(256, false);
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  int n = 0;
  for (int b = 0; b < 256; ++b) cps[b] = direct[b] ? b : 256 + n++;
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    const int c = cps[b];
    std::string s;
    if (c < 0x80) {
      s.push_back(static_cast<char>(c));
    } else {
      s.push_back(static_cast<char>(0xC0 | (c >> 6)));
      s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
    out[b] = s;
  }
  return out;
}

void synthetic_vocab(const ModelPreset& p, VocabMeta* v) {
  v->model = "gpt2";
  v->pre = "gpt2";
  v->source = "synthetic";
  v->tokens = byte_level_alphabet();
  v->types.assign(256, kNormal);
  // A few merges so BPE has something to do: "Ġ" + lowercase letter, then letter pairs.
  const std::string sp = v->tokens[' '];
  std::vector<std::pair<std::string, std::string>> cand;
  for (char c = 'a'; c <= 'z'; ++c) cand.push_back({sp, std::string(1, c)});
  for (char a : std::string("etaoinshrdlu"))
    for (char b : std::string("etaoinshrdlu")) cand.push_back({std::string(1, a), std::string(1, b)});
  const int64_t room = p.n_vocab - 256 - 2;
  for (size_t i = 0; i < cand.size() && static_cast<int64_t>(v->tokens.size()) - 256 < room; ++i) {
    v->merges.push_back(cand[i].first + " " + cand[i].second);
    v->tokens.push_back(cand[i].first + cand[i].second);
    v->types.push_back(kNormal);
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

Status read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kNotFound, strformat("%s: cannot open", path.c_str()));
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

// Tokens / types / merges of a tokenizer.json as convert_hf_to_gguf.py's
// get_vocab_base writes them, padded ([PAD{i}], UNUSED) or truncated to n_vocab.
Status hf_vocab(const ModelPreset& p, const std::string& path, VocabMeta* v) {
  std::string text;
  LAYA_TRY(read_file(path, &text));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].contains("vocab"))
    return Status(StatusCode::kCorrupt, strformat("%s: not a tokenizer.json with model.vocab", path.c_str()));
  const auto& model = j["model"];
  if (model.value("type", std::string("BPE")) != "BPE")
    return Status(StatusCode::kUnsupported, strformat("%s: model.type is not BPE", path.c_str()));
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it)
    by_id[it.value().get<int64_t>()] = {it.key(), kNormal};
  std::string bos_text, eos_text, pad_text;
  bool have_cfg = false;
  nlohmann::json cfg;
  {
    std::filesystem::path cp = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    std::string ct;
    if (read_file(cp.string(), &ct).ok()) {
      cfg = nlohmann::json::parse(ct, nullptr, false);
      have_cfg = !cfg.is_discarded() && cfg.is_object();
    }
  }
  auto tok_text = [&](const char* key) -> std::string {
    if (!have_cfg || !cfg.contains(key)) return {};
    const auto& e = cfg[key];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
    return {};
  };
  bos_text = tok_text("bos_token");
  eos_text = tok_text("eos_token");
  pad_text = tok_text("pad_token");
  std::vector<int64_t> special_ids;
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      const int64_t id = a.value("id", int64_t(-1));
      if (id < 0) continue;
      const std::string content = a.value("content", std::string());
      const bool special = a.value("special", false) || looks_special(content);
      by_id[id] = {content, special ? kControl : kUserDefined};
      if (special) special_ids.push_back(id);
    }
  }
  // Qwen has no bos_token in tokenizer_config; its config.json's bos_token_id is <|endoftext|>.
  if (bos_text.empty() && !pad_text.empty()) bos_text = pad_text;
  if (bos_text.empty() && !eos_text.empty()) bos_text = eos_text;

  const int64_t n_in = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  if (n_in <= p.n_vocab) {
    tokens.resize(static_cast<size_t>(p.n_vocab));
    types.assign(static_cast<size_t>(p.n_vocab), kUnused);
    for (int64_t i = 0; i < p.n_vocab; ++i) tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
    for (auto& [id, e] : by_id) {
      tokens[static_cast<size_t>(id)] = e.first;
      types[static_cast<size_t>(id)] = e.second;
    }
    v->n_real = static_cast<int64_t>(by_id.size());
  } else {
    // Larger tokenizer than the model (smollm2 with the Llama 3 vocabulary):
    // keep the lowest ids, then the BOS/EOS (and other control tokens that fit) at the end.
    std::vector<int64_t> keep_special;
    auto find_text = [&](const std::string& s) -> int64_t {
      for (auto& [id, e] : by_id)
        if (e.first == s) return id;
      return -1;
    };
    for (const std::string& s : {bos_text, eos_text}) {
      int64_t id = find_text(s);
      if (id >= 0 && std::find(keep_special.begin(), keep_special.end(), id) == keep_special.end()) keep_special.push_back(id);
    }
    const int64_t n_low = p.n_vocab - static_cast<int64_t>(keep_special.size());
    for (auto& [id, e] : by_id) {
      if (id >= n_low) break;
      if (static_cast<int64_t>(tokens.size()) != id) {
        // gap in the ids: pad
        while (static_cast<int64_t>(tokens.size()) < id) {
          tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
          types.push_back(kUnused);
        }
      }
      tokens.push_back(e.first);
      types.push_back(e.second);
    }
    while (static_cast<int64_t>(tokens.size()) < n_low) {
      tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
      types.push_back(kUnused);
    }
    for (int64_t id : keep_special) {
      tokens.push_back(by_id[id].first);
      types.push_back(by_id[id].second);
    }
    v->n_real = p.n_vocab;
  }
  std::unordered_set<std::string> present;
  present.reserve(tokens.size() * 2);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (types[i] != kUnused) present.insert(tokens[i]);
  const bool truncated = n_in > p.n_vocab;
  if (model.contains("merges") && model["merges"].is_array()) {
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
  auto id_of = [&](const std::string& s) -> int32_t {
    if (s.empty()) return -1;
    for (size_t i = tokens.size(); i-- > 0;)
      if (tokens[i] == s && types[i] == kControl) return static_cast<int32_t>(i);
    return -1;
  };
  v->bos = id_of(bos_text);
  v->eos = id_of(eos_text);
  v->pad = id_of(pad_text);
  v->tokens = std::move(tokens);
  v->types = std::move(types);
  v->model = "gpt2";
  // The pre-tokenizer family, as llama.cpp's converter names it (it hashes a
  // test tokenization; the special tokens tell the two families apart here).
  bool llama3 = false, qwen = false;
  for (const auto& [id, e] : by_id) {
    if (e.first == "<|begin_of_text|>") llama3 = true;
    if (e.first == "<|im_start|>") qwen = true;
  }
  (void)p;
  v->pre = llama3 ? "llama-bpe" : qwen ? "qwen2" : "gpt2";
  if (have_cfg && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    v->add_bos = cfg["add_bos_token"].get<bool>();
  } else {
    v->add_bos = llama3;  // Llama 3's post-processor adds <|begin_of_text|>
  }
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

// ---- random weights ---------------------------------------------------------------------

inline uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Normal-ish values (Irwin–Hall of four 16-bit uniforms: mean 0, std `std`,
// bounded at ±3.46 std), from xorshift64*.
void fill_normal(float* x, int64_t n, uint64_t seed, float mean, float std) {
  uint64_t s = seed;
  uint64_t state = splitmix64(s) | 1;
  const float scale = std / (65536.0f * 0.57735027f);  // sqrt(4/12) * 65536
  const float offset = 2.0f * 65535.0f / 2.0f;
  for (int64_t i = 0; i < n; ++i) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const uint64_t r = state * 0x2545F4914F6CDD1Dull;
    const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    x[i] = mean + (sum - 2.0f * offset) * scale;
  }
}

}  // namespace

Result<MkModelReport> make_random_model(const ModelPreset& p, const MkModelOptions& opt, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  MkModelReport rep;
  VocabMeta vocab;
  std::string tok_path = opt.tokenizer_json;
  if (tok_path.empty()) tok_path = find_fixture_tokenizer(p, opt.fixtures_dir);
  if (!tok_path.empty()) {
    LAYA_TRY(hf_vocab(p, tok_path, &vocab).with_context("tokenizer"));
  } else {
    synthetic_vocab(p, &vocab);
  }
  // Pad a synthetic or small vocabulary up to n_vocab.
  while (static_cast<int64_t>(vocab.tokens.size()) < p.n_vocab) {
    vocab.tokens.push_back("[PAD" + std::to_string(vocab.tokens.size()) + "]");
    vocab.types.push_back(kUnused);
  }
  rep.tokenizer_source = vocab.source;
  rep.n_tokens_real = vocab.n_real;

  gguf::Writer w(32);
  const std::string a = p.arch + ".";
  w.set_string("general.architecture", p.arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", p.name + " (random weights, laya mkmodel)");
  w.set_u32("general.file_type", static_cast<uint32_t>(opt.type));
  w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(p.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(p.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(p.n_layer));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(p.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(p.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(p.n_head_kv));
  w.set_f32(a + "rope.freq_base", static_cast<float>(p.rope_theta));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(p.head_dim));
  if (p.qk_norm || p.head_dim * p.n_head != p.n_embd) {
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(p.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(p.head_dim));
  }
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(p.n_vocab));
  w.set_string("tokenizer.ggml.model", vocab.model);
  w.set_string("tokenizer.ggml.pre", vocab.pre);
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_string_array("tokenizer.ggml.merges", vocab.merges);
  if (vocab.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos));
  if (vocab.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos));
  if (vocab.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  // Free the vocabulary copies: the writer holds the encoded bytes.
  vocab = VocabMeta();

  const std::vector<PlannedTensor> plan = plan_tensors(p, opt.type);
  for (const auto& t : plan) {
    LAYA_ASSIGN_OR_RETURN(size_t idx, w.add_tensor(t.name, t.type, t.ne));
    (void)idx;
    int64_t ne = 1;
    for (int64_t d : t.ne) ne *= d;
    rep.n_params += static_cast<uint64_t>(ne);
    if (!cpu::can_quantize(t.type))
      return Status(StatusCode::kUnsupported, strformat("tensor '%s': no quantizer for %s", t.name.c_str(), dtype_name(t.type)));
  }
  rep.file_bytes = w.file_size();
  LAYA_TRY(w.begin(path));

  int n_threads = opt.n_threads > 0 ? opt.n_threads : static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads < 1) n_threads = 1;
  std::vector<uint8_t> buf;
  std::vector<std::vector<float>> rows(static_cast<size_t>(n_threads));
  uint64_t done_bytes = 0;
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const PlannedTensor& t = plan[ti];
    const int64_t ncols = t.ne[0];
    int64_t nrows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) nrows *= t.ne[d];
    const size_t rb = row_bytes(t.type, ncols);
    if (t.role == TensorRole::kRopeFreqs) {
      std::vector<float> f = llama3_rope_factors(p.head_dim, p.rope_theta, p.rope_factor, p.rope_low_freq, p.rope_high_freq,
                                                 static_cast<double>(p.rope_orig_ctx));
      LAYA_TRY(w.write(f.data(), f.size() * sizeof(float)));
      continue;
    }
    float mean = 0, stdv = 0.02f;
    if (t.role == TensorRole::kNorm) mean = 1.0f, stdv = 0.05f;
    if (t.role == TensorRole::kBias) stdv = 0.02f;
    const uint64_t tseed = opt.seed * 0x100000001B3ull + ti * 0x9E3779B97F4A7C15ull;
    // Batches of rows of ~32 MB output, split over the threads.
    const int64_t batch = std::max<int64_t>(1, static_cast<int64_t>((size_t{32} << 20) / rb));
    for (int64_t r0 = 0; r0 < nrows; r0 += batch) {
      const int64_t nr = std::min(batch, nrows - r0);
      buf.resize(static_cast<size_t>(nr) * rb);
      auto work = [&](int tid) {
        std::vector<float>& row = rows[static_cast<size_t>(tid)];
        row.resize(static_cast<size_t>(ncols));
        for (int64_t r = tid; r < nr; r += n_threads) {
          uint64_t s = tseed + static_cast<uint64_t>(r0 + r);
          fill_normal(row.data(), ncols, splitmix64(s), mean, stdv);
          cpu::quantize_row(t.type, row.data(), buf.data() + static_cast<size_t>(r) * rb, ncols);
        }
      };
      const int nt = static_cast<int>(std::min<int64_t>(n_threads, nr));
      if (nt <= 1) {
        work(0);
      } else {
        std::vector<std::thread> th;
        for (int k = 1; k < nt; ++k) th.emplace_back(work, k);
        work(0);
        for (auto& x : th) x.join();
      }
      LAYA_TRY(w.write(buf.data(), buf.size()));
      done_bytes += buf.size();
      if (opt.verbose) {
        std::fprintf(stderr, "\r  %-28s %-5s %5.1f%% of %.1f MB", t.name.c_str(), dtype_name(t.type),
                     100.0 * static_cast<double>(done_bytes) / static_cast<double>(rep.file_bytes), rep.file_bytes / 1048576.0);
        std::fflush(stderr);
      }
    }
  }
  if (opt.verbose) std::fprintf(stderr, "\n");
  LAYA_TRY(w.finish());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace laya
