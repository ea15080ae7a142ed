// Hyper-parameters of a decoder-only transformer of the Llama family, read
// from GGUF metadata or a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace laya {

// How RoPE pairs the dimensions of a head.
//  kInterleaved: (x[2i], x[2i+1]) — llama.cpp's layout; convert_hf_to_gguf
//                permutes llama q/k rows so GGUF llama files need this.
//  kHalves:      (x[i], x[i + d/2]) — Hugging Face's rotate_half ("NeoX").
enum class RopeLayout { kInterleaved, kHalves };

struct HParams {
  std::string arch;        // "llama", "qwen2", "qwen3"
  int64_t n_vocab = 0;
  int64_t n_embd = 0;      // hidden size
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;    // may differ from n_embd / n_head (qwen3)
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  double rope_theta = 10000.0;
  RopeLayout rope_layout = RopeLayout::kHalves;
  // Per frequency divisor (size head_dim/2) or empty: llama3 scaling, linear.
  std::vector<float> rope_freq_factors;
  bool tied_embeddings = false;
  // Granite's multipliers (1 where a family has none): the embeddings are
  // multiplied by embd_scale, each block's output by residual_scale before
  // it joins the residual stream, the logits divided by logit_scale; the
  // attention scores scaled by attn_scale instead of 1/sqrt(head_dim) (0: that).
  float embd_scale = 1.0f;
  float residual_scale = 1.0f;
  float logit_scale = 1.0f;
  float attn_scale = 0.0f;
  // Sliding-window layers attend to the last sliding_window positions only
  // (0: no window). swa_layers says which (1: windowed), one entry per layer;
  // empty: every layer (Phi-3, StarCoder2, Mistral 7B v0.1). Gemma 2
  // alternates local and global layers, Gemma 3 has five local to one global.
  int64_t sliding_window = 0;
  std::vector<uint8_t> swa_layers;
  // The RoPE base of the windowed layers when it differs from rope_theta
  // (Gemma 3's rope_local_base_freq; rope_freq_factors are the global
  // layers' only); 0: rope_theta.
  double rope_theta_local = 0;
  // Soft-capping, cap · tanh(x / cap), of the attention scores before the
  // softmax and of the final logits (Gemma 2); 0: none.
  float attn_softcap = 0;
  float final_softcap = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;

  int64_t q_dim() const { return n_head * head_dim; }
  // The attention window of layer il (0: the whole context).
  int64_t window(int64_t il) const {
    if (sliding_window <= 0) return 0;
    return swa_layers.empty() || swa_layers[static_cast<size_t>(il)] ? sliding_window : 0;
  }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// rope_freq_factors for Llama 3.x "llama3" scaling (as in transformers'
// _compute_llama3_parameters): inv_freq_scaled = inv_freq / factor_i.
std::vector<float> llama3_rope_factors(int64_t head_dim, double theta, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_ctx);

}  // namespace laya
