#include "model/arch.h"

namespace laya {

namespace {
const ArchSpec* const kArchTable[] = {
    &kArchLlama,
    &kArchQwen2,
    &kArchQwen3,
};
}  // namespace

const ArchSpec* find_arch_by_gguf_name(std::string_view name) {
  for (const ArchSpec* a : kArchTable)
    if (name == a->name) return a;
  return nullptr;
}

const ArchSpec* find_arch_by_hf_type(std::string_view model_type) {
  for (const ArchSpec* a : kArchTable)
    for (const char* t : a->hf_model_types)
      if (t && model_type == t) return a;
  return nullptr;
}

const char* supported_arch_list() { return "llama (incl. mistral), qwen2, qwen3"; }

}  // namespace laya
