// Shapes of real models, for writing random-weight benchmark GGUFs
// (`laya mkmodel`): the same tensor names, shapes, types (including
// llama.cpp's Q4_K_M mix) and tokenizer metadata a converted checkpoint has,
// with random weights, so laya and llama.cpp can be benchmarked on identical
// bytes without downloading anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/dtype.h"
#include "core/status.h"
#include "model/arch.h"

namespace laya {

struct ModelPreset {
  std::string name;   // "llama-3.2-1b"
  std::string arch;   // GGUF general.architecture: llama, qwen2, qwen3
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0, n_ctx = 0;
  double rope_theta = 10000;
  float rms_eps = 1e-5f;
  bool tied = true;      // no output.weight: the output projection is token_embd
  bool qkv_bias = false;  // qwen2 (as its ArchSpec; the plan follows these)
  bool qk_norm = false;   // qwen3
  // Llama 3 rope scaling, written as rope_freqs.weight (factor 0 = none).
  double rope_factor = 0, rope_low_freq = 1, rope_high_freq = 4;
  int64_t rope_orig_ctx = 8192;
  // Granite's multipliers (config.json's embedding_multiplier, residual_multiplier,
  // attention_multiplier, logits_scaling), written as llama.cpp's <arch>.embedding_scale,
  // .residual_scale, .attention.scale and .logit_scale; 0 = not written. llama.cpp's granite
  // loader requires logit_scale.
  float embd_scale = 0, residual_scale = 0, attn_scale = 0, logit_scale = 0;
  // Gemma 2 / 3's attention (0 = none): the local layers' sliding window, the
  // layer period of which the last layer is global (2: alternating, 6: five
  // local to one), the local layers' RoPE base, soft-capping of the scores and
  // of the logits, and query_pre_attn_scalar (queries scaled by its -0.5th
  // power). In GGUF, as convert_hf_to_gguf.py writes them: <arch>.attention.
  // sliding_window, .attn_logit_softcapping, .final_logit_softcapping; the
  // period, the local base and the scalar are not written there (llama.cpp's
  // loaders and laya's ArchSpec::attn know each family's), only to config.json.
  int64_t sliding_window = 0, swa_period = 0;
  double rope_theta_local = 0;
  float attn_softcap = 0, final_softcap = 0, query_pre_attn_scalar = 0;
  std::string tokenizer;  // "llama3", "qwen3" (fixture tokenizer.json) or "synthetic"
  bool hidden = false;    // test presets, not listed in --help

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

const std::vector<ModelPreset>& model_presets();
const ModelPreset* find_preset(std::string_view name);

// The file types `laya mkmodel --type` writes (GGUF general.file_type values).
// kMlx4 / kMlx8 are no GGUF type: a Hugging Face folder (config.json +
// model.safetensors) quantized as mlx-lm's convert does (format/mlx_quantize.h):
// groups of 64, BF16 scales and biases, every matrix and the embedding.
enum class MkType { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 7, kQ4_K_M = 15, kBF16 = 32, kMlx4 = 1004, kMlx8 = 1008 };
// "Q8_0", "Q4_K_M", "Q4_0" (every matrix Q4_0, as llama-quantize --pure), "F16",
// "BF16", "F32", "MLX4", "MLX8".
bool parse_mk_type(std::string_view s, MkType* out);
inline bool is_mlx_type(MkType t) { return t == MkType::kMlx4 || t == MkType::kMlx8; }
const char* mk_type_name(MkType t);

struct PlannedTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] = row length
  DType type = DType::F32;
  TensorRole role = TensorRole::kMatrix;
};

// The tensors of a preset (its architecture's table, model/arch.h), in file
// order, with the type each gets for `type`; empty for an unknown architecture.
// Q4_K_M follows llama.cpp's llama_tensor_get_type (src/llama-quant.cpp):
// Q4_K by default; token_embd of a tied model (= the output) Q6_K; attn_v and
// ffn_down Q6_K on "use_more_bits" layers; rows not a multiple of 256 fall
// back (Q4_K → Q5_0, Q6_K → Q8_0; the output/tied embedding → Q8_0).
std::vector<PlannedTensor> plan_tensors(const ModelPreset& p, MkType type);

struct MkModelOptions {
  MkType type = MkType::kQ8_0;
  uint64_t seed = 1;
  std::string tokenizer_json;  // empty: the preset's fixture (../shared/fixtures/...), else synthetic
  std::string fixtures_dir;    // where hf/llama3/tokenizer.json etc. live; empty: search the defaults
  int n_threads = 0;           // 0: hardware concurrency; at most ThreadPool::max_threads() (else kInvalidArgument)
  // Told after each chunk written: bytes of the file written so far and in
  // all (the library prints nothing; `laya mkmodel` draws a bar). Empty: none.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Whether an existing file may be replaced and which inputs it may not be
  // (core/atomic_file.h); checked before any work, the file written atomically.
  OutputOptions output;
};

struct MkModelReport {
  uint64_t file_bytes = 0;
  uint64_t n_params = 0;
  std::string tokenizer_source;  // path of the tokenizer.json used, or "synthetic"
  int64_t n_tokens_real = 0;     // tokens taken from the tokenizer (rest padded)
  double seconds = 0;
};

// Writes the random-weight GGUF for preset `p` to `path`, streaming.
Result<MkModelReport> make_random_model(const ModelPreset& p, const MkModelOptions& opt, const std::string& path);

}  // namespace laya
