// Architecture table. Llama, Qwen2 and Qwen3 share one forward pass
// (model/transformer.cpp); an architecture is the set of differences below.
// Adding one = one file arch_<name>.cpp defining its ArchSpec + a row in
// arch_table.cpp.
#pragma once

#include <string_view>

namespace laya {

struct ArchSpec {
  const char* name;                  // GGUF general.architecture
  const char* hf_model_types[4];     // config.json "model_type" values (nullptr-terminated)
  bool qkv_bias;                     // q/k/v projections carry a bias
  bool qk_norm;                      // per-head RMSNorm of q and k before RoPE
  bool gguf_rope_interleaved;        // convert_hf_to_gguf permuted the q/k rows
  bool tied_by_default;              // HF default of tie_word_embeddings
};

extern const ArchSpec kArchLlama;
extern const ArchSpec kArchQwen2;
extern const ArchSpec kArchQwen3;

// nullptr when unknown.
const ArchSpec* find_arch_by_gguf_name(std::string_view name);
const ArchSpec* find_arch_by_hf_type(std::string_view model_type);
// "llama, qwen2, qwen3" for error messages.
const char* supported_arch_list();

}  // namespace laya
