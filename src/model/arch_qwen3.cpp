// Qwen3 (dense): no biases, per-head RMSNorm on q and k, head_dim set explicitly.
// The whole architecture: its flags and its tensor table (the Llama family's).
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
};
}  // namespace laya
