// Llama 2 / 3.x, TinyLlama, SmolLM, Mistral-style (Mistral 7B v0.1: its sliding window on every layer).
// The whole architecture: its flags, and the Llama family's table and block.
// Registered by this file's name (model/arch.h); extern because the generated
// registry in archs.cpp names it.
#include "model/arch.h"

namespace laya {
extern const ArchSpec kArchLlama = {
    .name = "llama",
    .hf_model_types = {"llama", "mistral", nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = false,
    .gguf_rope_interleaved = true,
    .tied_by_default = false,
    .tensors = llama_family_tensors,
    .forward = llama_family_forward,
    .logits = llama_family_logits,
    .block = "pre-norm RMSNorm, attention with RoPE, SwiGLU feed-forward",
};
}  // namespace laya
