// Qwen3 (dense): no biases, per-head RMSNorm on q and k, head_dim set explicitly.
// The whole architecture: its flags, and the Llama family's table and block.
// Registered by this file's name (model/arch.h); extern because the generated
// registry in archs.cpp names it.
#include "model/arch.h"

namespace laya {
extern const ArchSpec kArchQwen3 = {
    .name = "qwen3",
    .hf_model_types = {"qwen3", nullptr, nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = true,
    .gguf_rope_interleaved = false,
    .tied_by_default = true,
    .tensors = llama_family_tensors,
    .forward = llama_family_forward,
    .logits = llama_family_logits,
    .block = "pre-norm RMSNorm, attention with per-head q/k RMSNorm and RoPE, SwiGLU feed-forward",
};
}  // namespace laya
