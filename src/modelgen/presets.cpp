// Model presets and their tensor plans (types as llama.cpp's quantizer
// chooses them), for `laya mkmodel`.
#include "modelgen/presets.h"

#include <cctype>
#include <span>

#include "model/arch.h"
#include "model/hparams.h"

namespace laya {

// ---- presets ----------------------------------------------------------------------

namespace {

// Shapes of published checkpoints (their config.json).
void add_public_presets(std::vector<ModelPreset>& v) {
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
}

// The other families' blocks at 0.3-0.5 B parameters (none of them
// publishes a model that small): the shapes `laya bench` compares them at
// (starcoder2-0.5b: 309 M, phi3-0.5b: 374 M, gemma2-0.5b: 514 M,
// gemma3-0.5b: 526 M). Their vocabularies' sizes, a synthetic tokenizer.
void add_family_presets(std::vector<ModelPreset>& v) {
  ModelPreset p;  // microsoft/Phi-3-mini-4k-instruct's proportions: MHA, untied, vocab 32064
  p.name = "phi3-0.5b";
  p.arch = "phi3";
  p.n_embd = 1024, p.n_layer = 24, p.n_head = 16, p.n_head_kv = 16, p.head_dim = 64, p.n_ff = 2816;
  p.n_vocab = 32064, p.n_ctx = 4096;
  p.rope_theta = 10000, p.rms_eps = 1e-5f, p.tied = false;
  p.tokenizer = "synthetic";
  v.push_back(p);
  ModelPreset g = p;  // ibm-granite/granite-3.1-2b-base's proportions: GQA 4:1, tied, vocab 49155
  g.name = "granite-0.5b";
  g.arch = "granite";
  g.n_head_kv = 4, g.n_ff = 4096, g.n_vocab = 49155, g.rope_theta = 5000000, g.tied = true;
  g.embd_scale = 12.0f, g.residual_scale = 0.22f, g.attn_scale = 0.015625f, g.logit_scale = 8.0f;  // 3.1-2b's
  v.push_back(g);
  ModelPreset s = p;  // bigcode/starcoder2-3b's: GQA, biases, LayerNorm, tied, vocab 49152
  s.name = "starcoder2-0.5b";
  s.arch = "starcoder2";
  s.n_head_kv = 2, s.n_ff = 4096, s.n_vocab = 49152, s.n_ctx = 16384, s.rope_theta = 999999.4420358813;
  s.tied = true, s.qkv_bias = true;
  v.push_back(s);
  ModelPreset m = p;  // google/codegemma-2b's: MQA, head_dim 256, tied, vocab 256000
  m.name = "gemma-0.5b";
  m.arch = "gemma";
  m.n_layer = 18, m.n_head = 4, m.n_head_kv = 1, m.head_dim = 256, m.n_ff = 4096, m.n_vocab = 256000;
  m.n_ctx = 8192, m.rms_eps = 1e-6f, m.tied = true;
  v.push_back(m);
  // google/gemma-2-2b's: GQA 2:1, head_dim 256 (query_pre_attn_scalar the
  // same), n_ff 4 n_embd, layers alternating a 4096 window and the whole
  // context, scores soft-capped at 50, logits at 30; 16 layers for ~0.5 B.
  ModelPreset g2 = m;
  g2.name = "gemma2-0.5b";
  g2.arch = "gemma2";
  g2.n_layer = 16, g2.n_head_kv = 2;
  g2.sliding_window = 4096, g2.swa_period = 2, g2.attn_softcap = 50.0f, g2.final_softcap = 30.0f;
  g2.query_pre_attn_scalar = 256;
  v.push_back(g2);
  // google/gemma-3-1b-pt's: MQA, head_dim 256, q/k norms, n_ff 6 n_embd,
  // vocab 262144, five layers with a 512 window and RoPE base 10000 to one
  // global with rope_theta 1e6, no soft-capping; 12 layers for ~0.5 B.
  ModelPreset g3 = m;
  g3.name = "gemma3-0.5b";
  g3.arch = "gemma3";
  g3.n_layer = 12, g3.n_ff = 6144, g3.n_vocab = 262144, g3.n_ctx = 32768, g3.qk_norm = true;
  g3.rope_theta = 1000000, g3.rope_theta_local = 10000, g3.sliding_window = 512, g3.swa_period = 6;
  g3.query_pre_attn_scalar = 256;
  v.push_back(g3);
}

void add_test_presets(std::vector<ModelPreset>& v) {
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
  // The same with Qwen's whole vocabulary (and so its chat template): chat serving tests.
  ModelPreset qc = q;
  qc.name = "test-tiny-qwen2-chat";
  qc.n_vocab = 151936, qc.tokenizer = "qwen3";
  v.push_back(qc);
  ModelPreset r = p;
  r.name = "test-tiny-qwen3";
  r.arch = "qwen3", r.qk_norm = true, r.head_dim = 128, r.n_head = 4, r.n_head_kv = 2, r.rms_eps = 1e-6f;
  v.push_back(r);
  for (const char* fam : {"phi3", "granite", "starcoder2", "gemma"}) {  // their blocks and tables, tiny
    ModelPreset f = p;
    f.name = std::string("test-tiny-") + fam;
    f.arch = fam;
    f.qkv_bias = f.arch == "starcoder2";
    f.tied = f.arch != "phi3";
    if (f.arch == "granite") f.embd_scale = 12.0f, f.residual_scale = 0.22f, f.attn_scale = 0.015625f, f.logit_scale = 8.0f;
    v.push_back(f);
  }
  // Gemma 2 / 3's attention metadata, with a window of 16 positions.
  ModelPreset g2 = p;
  g2.name = "test-tiny-gemma2";
  g2.arch = "gemma2";
  g2.sliding_window = 16, g2.swa_period = 2, g2.attn_softcap = 50.0f, g2.final_softcap = 30.0f;
  g2.query_pre_attn_scalar = 64;
  v.push_back(g2);
  ModelPreset g3 = p;
  g3.name = "test-tiny-gemma3";
  g3.arch = "gemma3";
  g3.n_layer = 6, g3.qk_norm = true, g3.rope_theta = 1000000, g3.rope_theta_local = 10000;
  g3.sliding_window = 16, g3.swa_period = 6, g3.query_pre_attn_scalar = 64;
  v.push_back(g3);
  ModelPreset s = p;
  s.name = "test-tiny-llama3";
  s.rope_factor = 32, s.rope_theta = 500000, s.rope_orig_ctx = 128, s.tied = false;
  v.push_back(s);
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = [] {
    std::vector<ModelPreset> v;
    add_public_presets(v);
    add_family_presets(v);
    add_test_presets(v);
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
  else if (u == "Q4_0") *out = MkType::kQ4_0;
  else if (u == "MLX4") *out = MkType::kMlx4;
  else if (u == "MLX8") *out = MkType::kMlx8;
  else return false;
  return true;
}

const char* mk_type_name(MkType t) {
  switch (t) {
    case MkType::kF32: return "F32";
    case MkType::kF16: return "F16";
    case MkType::kQ8_0: return "Q8_0";
    case MkType::kQ4_0: return "Q4_0";
    case MkType::kMlx4: return "MLX4";
    case MkType::kMlx8: return "MLX8";
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

// The preset's sizes as the hyper-parameters the tensor table is written in.
HParams preset_hparams(const ModelPreset& p) {
  HParams h;
  h.arch = p.arch;
  h.n_vocab = p.n_vocab, h.n_embd = p.n_embd, h.n_layer = p.n_layer, h.n_head = p.n_head, h.n_head_kv = p.n_head_kv;
  h.head_dim = p.head_dim, h.n_ff = p.n_ff;
  return h;
}

// Each tensor's name, shape and role, in the order convert_hf_to_gguf.py
// writes them, from the architecture's table.
std::vector<PlannedTensor> planned_shapes(const ModelPreset& p, const ArchSpec& arch) {
  const HParams h = preset_hparams(p);
  const TensorFlags flags{.qkv_bias = p.qkv_bias, .qk_norm = p.qk_norm, .untied_output = !p.tied,
                          .rope_freqs = p.rope_factor > 0};
  const std::span<const TensorSpec> specs = arch.tensors();
  std::vector<PlannedTensor> out;
  auto add = [&](const TensorSpec& s, int64_t layer) {
    if (!s.expected(flags)) return;
    std::vector<int64_t> ne;
    for (int d = 0; d < s.n_dims; ++d) ne.push_back(dim_value(s.shape[d], h));
    out.push_back({s.gguf_name(layer), std::move(ne), DType::F32, s.role});
  };
  for (const TensorSpec& s : specs)
    if (s.placement == Placement::kBeforeLayers) add(s, 0);
  for (int64_t il = 0; il < p.n_layer; ++il)
    for (const TensorSpec& s : specs)
      if (s.per_layer()) add(s, il);
  for (const TensorSpec& s : specs)
    if (s.placement == Placement::kAfterLayers) add(s, 0);
  return out;
}

}  // namespace

std::vector<PlannedTensor> plan_tensors(const ModelPreset& p, MkType type) {
  const ArchSpec* arch = find_arch_by_gguf_name(p.arch);
  if (!arch) return {};  // make_random_model reports it
  std::vector<PlannedTensor> out = planned_shapes(p, *arch);
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
      case MkType::kQ4_0: t.type = fallback(DType::Q4_0, ncols); break;
      case MkType::kMlx4: t.type = ncols % 64 == 0 ? DType::MLX_Q4 : DType::BF16; break;
      case MkType::kMlx8: t.type = ncols % 64 == 0 ? DType::MLX_Q8 : DType::BF16; break;
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


}  // namespace laya
