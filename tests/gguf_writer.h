// Test-only GGUF byte builder: assembles valid files and lets a test break
// any field (magic, version, counts, types, offsets, alignment) on purpose.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace laya::test {

// Little-endian byte buffer.
struct Bytes {
  std::vector<uint8_t> b;

  template <typename T>
  Bytes& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u16(uint16_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& i8(int8_t v) { return put(v); }
  Bytes& i16(int16_t v) { return put(v); }
  Bytes& i32(int32_t v) { return put(v); }
  Bytes& i64(int64_t v) { return put(v); }
  Bytes& f32(float v) { return put(v); }
  Bytes& f64(double v) { return put(v); }
  // GGUF string: u64 length + bytes.
  Bytes& str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b.insert(b.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& raw(const Bytes& v) { return raw(v.b); }
  // Array header: u32 element type + u64 count (elements follow).
  Bytes& arr(uint32_t elem_type, uint64_t count) { return u32(elem_type).u64(count); }
  size_t size() const { return b.size(); }
};

// GGUF value type ids (as in the file).
namespace gt {
constexpr uint32_t U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
                   ARRAY = 9, U64 = 10, I64 = 11, F64 = 12;
}  // namespace gt

class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;                // ggml type (0 = F32)
    std::optional<uint64_t> offset;   // relative to the data section; default: packed, aligned
    std::vector<uint8_t> data;        // written at the offset
  };

  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors_override;
  std::optional<uint64_t> n_kv_override;
  uint64_t alignment = 32;  // padding used when building (set general.alignment yourself to change the file's)

  // A key with any type id and raw payload bytes.
  GgufWriter& kv_raw(std::string_view key, uint32_t type, const Bytes& payload) {
    Bytes e;
    e.str(key).u32(type).raw(payload);
    kvs_.push_back(std::move(e.b));
    return *this;
  }
  GgufWriter& kv_u8(std::string_view k, uint8_t v) { return kv_raw(k, gt::U8, Bytes().u8(v)); }
  GgufWriter& kv_i8(std::string_view k, int8_t v) { return kv_raw(k, gt::I8, Bytes().i8(v)); }
  GgufWriter& kv_u16(std::string_view k, uint16_t v) { return kv_raw(k, gt::U16, Bytes().u16(v)); }
  GgufWriter& kv_i16(std::string_view k, int16_t v) { return kv_raw(k, gt::I16, Bytes().i16(v)); }
  GgufWriter& kv_u32(std::string_view k, uint32_t v) { return kv_raw(k, gt::U32, Bytes().u32(v)); }
  GgufWriter& kv_i32(std::string_view k, int32_t v) { return kv_raw(k, gt::I32, Bytes().i32(v)); }
  GgufWriter& kv_u64(std::string_view k, uint64_t v) { return kv_raw(k, gt::U64, Bytes().u64(v)); }
  GgufWriter& kv_i64(std::string_view k, int64_t v) { return kv_raw(k, gt::I64, Bytes().i64(v)); }
  GgufWriter& kv_f32(std::string_view k, float v) { return kv_raw(k, gt::F32, Bytes().f32(v)); }
  GgufWriter& kv_f64(std::string_view k, double v) { return kv_raw(k, gt::F64, Bytes().f64(v)); }
  GgufWriter& kv_bool(std::string_view k, bool v) { return kv_raw(k, gt::BOOL, Bytes().u8(v ? 1 : 0)); }
  GgufWriter& kv_str(std::string_view k, std::string_view v) { return kv_raw(k, gt::STRING, Bytes().str(v)); }
  GgufWriter& kv_arr_i32(std::string_view k, const std::vector<int32_t>& v) {
    Bytes p;
    p.arr(gt::I32, v.size());
    for (int32_t x : v) p.i32(x);
    return kv_raw(k, gt::ARRAY, p);
  }
  GgufWriter& kv_arr_f32(std::string_view k, const std::vector<float>& v) {
    Bytes p;
    p.arr(gt::F32, v.size());
    for (float x : v) p.f32(x);
    return kv_raw(k, gt::ARRAY, p);
  }
  GgufWriter& kv_arr_str(std::string_view k, const std::vector<std::string>& v) {
    Bytes p;
    p.arr(gt::STRING, v.size());
    for (const auto& x : v) p.str(x);
    return kv_raw(k, gt::ARRAY, p);
  }

  // An F32 tensor filled with 0, 1, 2, ... (or `data` if given).
  GgufWriter& tensor(std::string name, std::vector<uint64_t> ne, uint32_t type = 0,
                     std::optional<uint64_t> offset = std::nullopt, std::optional<std::vector<uint8_t>> data = std::nullopt) {
    Tensor t;
    t.name = std::move(name);
    t.ne = std::move(ne);
    t.type = type;
    t.offset = offset;
    if (data) {
      t.data = std::move(*data);
    } else if (type == 0) {
      uint64_t n = 1;
      for (uint64_t d : t.ne) n *= d;
      for (uint64_t i = 0; i < n && i < (1u << 20); ++i) {
        float f = static_cast<float>(i);
        uint8_t tmp[4];
        std::memcpy(tmp, &f, 4);
        t.data.insert(t.data.end(), tmp, tmp + 4);
      }
    }
    tensors_.push_back(std::move(t));
    return *this;
  }

  // Byte offset where the data section starts in the built file.
  size_t data_start() const { return data_start_; }

  std::vector<uint8_t> build() {
    Bytes out;
    out.u32(magic).u32(version);
    out.u64(n_tensors_override.value_or(tensors_.size()));
    out.u64(n_kv_override.value_or(kvs_.size()));
    for (const auto& kv : kvs_) out.raw(kv);
    std::vector<uint64_t> offs;
    uint64_t next = 0;
    for (const auto& t : tensors_) {
      uint64_t off = t.offset.value_or(next);
      offs.push_back(off);
      if (!t.offset) next = align_up(off + t.data.size());
      out.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) out.u64(d);
      out.u32(t.type).u64(off);
    }
    while (out.size() % alignment) out.u8(0);
    data_start_ = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      if (t.data.empty()) continue;
      size_t at = data_start_ + static_cast<size_t>(offs[i]);
      if (out.b.size() < at + t.data.size()) out.b.resize(at + t.data.size(), 0);
      std::memcpy(out.b.data() + at, t.data.data(), t.data.size());
    }
    return out.b;
  }

 private:
  uint64_t align_up(uint64_t x) const { return (x + alignment - 1) / alignment * alignment; }
  std::vector<std::vector<uint8_t>> kvs_;
  std::vector<Tensor> tensors_;
  size_t data_start_ = 0;
};

}  // namespace laya::test
