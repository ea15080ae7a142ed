// Qwen2 / Qwen2.5: biases on q, k, v; usually tied embeddings (small sizes).
// The whole architecture: its flags, and the Llama family's table and block.
// Registered by this file's name (model/arch.h); extern because the generated
// registry in archs.cpp names it.
#include "model/arch.h"

namespace laya {
extern const ArchSpec kArchQwen2 = {
    .name = "qwen2",
    .hf_model_types = {"qwen2", nullptr, nullptr, nullptr},
    .qkv_bias = true,
    .qk_norm = false,
    .gguf_rope_interleaved = false,
    .tied_by_default = false,
    .tensors = llama_family_tensors,
    .forward = llama_family_forward,
    .logits = llama_family_logits,
    .block = "pre-norm RMSNorm, attention with q/k/v biases and RoPE, SwiGLU feed-forward",
};
}  // namespace laya
