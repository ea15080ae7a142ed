// libFuzzer target: parse arbitrary bytes as safetensors and touch the first
// and last byte of every tensor and every metadata entry.
#include <cstddef>
#include <cstdint>

#include "format/safetensors.h"

namespace {
volatile uint64_t g_sink;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = laya::safetensors::File::parse(laya::MappedFile::borrow(data, size, "fuzz.safetensors"));
  if (!r.ok()) {
    g_sink = g_sink + r.status().message().size();
    return 0;
  }
  const laya::safetensors::File& f = *r.value();
  uint64_t acc = 0;
  for (const auto& [k, v] : f.metadata()) acc += k.size() + v.size();
  for (const auto& t : f.tensors()) {
    acc += t.shape.size() + t.dtype_str.size() + static_cast<uint64_t>(t.type);
    if (t.nbytes > 0) acc += t.data[0] + t.data[t.nbytes - 1];
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    if (t.data < data || t.data + t.nbytes > data + size) __builtin_trap();
  }
  g_sink = g_sink + acc;
  return 0;
}
