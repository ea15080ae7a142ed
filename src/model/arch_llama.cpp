// Llama 2 / 3.x, TinyLlama, SmolLM, Mistral-style (no sliding window).
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
