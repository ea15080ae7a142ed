// libFuzzer target: parse arbitrary bytes as GGUF, then touch everything the
// parser returned (first and last byte of every tensor, every metadata value
// through every getter) so that a bad pointer or length is caught by ASan.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/gguf.h"

namespace {

volatile uint64_t g_sink;

void touch_value(const laya::gguf::Value& v, int depth) {
  uint64_t acc = v.u ^ static_cast<uint64_t>(v.i) ^ static_cast<uint64_t>(v.f != 0) ^ v.is_int();
  if (!v.str.empty()) acc += static_cast<uint8_t>(v.str.front()) + static_cast<uint8_t>(v.str.back());
  if (v.type == laya::gguf::ValueType::kArray) {
    for (const auto& s : v.strings) {
      if (!s.empty()) acc += static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
    }
    if (v.raw && v.count > 0) {
      acc += static_cast<uint64_t>(v.array_i64(0)) + static_cast<uint64_t>(v.array_i64(v.count - 1));
      acc += static_cast<uint64_t>(v.array_f64(0) != 0) + static_cast<uint64_t>(v.array_f64(v.count - 1) != 0);
    }
    for (const auto& it : v.items) touch_value(it, depth + 1);
  }
  g_sink = g_sink + acc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = laya::gguf::File::parse(laya::MappedFile::borrow(data, size, "fuzz.gguf"));
  if (!r.ok()) {
    g_sink = g_sink + r.status().message().size();
    return 0;
  }
  const laya::gguf::File& f = *r.value();
  uint64_t acc = f.version() + f.alignment();
  for (const auto& [key, v] : f.metadata()) {
    touch_value(v, 0);
    if (auto s = f.get_string(key); s.ok()) acc += s.value().size();
    if (auto i = f.get_int(key); i.ok()) acc += static_cast<uint64_t>(i.value());
    if (auto d = f.get_float(key); d.ok()) acc += d.value() != 0;
    if (auto b = f.get_bool(key); b.ok()) acc += b.value();
    if (auto sa = f.get_string_array(key); sa.ok()) acc += sa.value()->size();
    if (auto na = f.get_numeric_array(key); na.ok()) acc += na.value()->count;
    if (f.find(key) != &v) __builtin_trap();
  }
  for (const auto& t : f.tensors()) {
    acc += static_cast<uint64_t>(t.n_elements()) + t.shape_string().size();
    if (t.nbytes > 0) acc += t.data[0] + t.data[t.nbytes - 1];
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    if (t.data < data || (t.nbytes > 0 && t.data + t.nbytes > data + size)) __builtin_trap();
  }
  g_sink = g_sink + acc;
  return 0;
}
