// Llama 2 / 3.x, TinyLlama, SmolLM, Mistral-style (no sliding window).
// The whole architecture: its flags and its tensor table (the Llama family's).
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
};
}  // namespace laya
