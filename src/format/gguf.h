// GGUF v2/v3 reader. The file is memory-mapped; tensor data is never copied.
// Every length and count read from the header is checked against the bytes
// that remain before anything is allocated from it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mmap.h"
#include "core/status.h"

namespace laya::gguf {

enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Bytes of one scalar value of type t (0 for strings and arrays).
size_t scalar_size(ValueType t);
const char* value_type_name(ValueType t);

// One metadata value. Scalars are widened; strings and arrays of strings are
// string_views into the mapping; numeric arrays keep a pointer to their raw
// little-endian bytes (no copy) plus the element type; nested arrays are
// parsed into `items`.
struct Value {
  ValueType type = ValueType::kU8;
  uint64_t u = 0;       // unsigned ints, bool
  int64_t i = 0;        // signed ints (also filled for unsigned that fit)
  double f = 0;         // floats (also filled for all ints)
  std::string_view str; // kString
  // kArray:
  ValueType elem_type = ValueType::kU8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;           // numeric elements, packed
  std::vector<std::string_view> strings;  // string elements
  std::vector<Value> items;               // nested array elements

  bool is_int() const;
  // Numeric array element as double / int64 (index < count, numeric elem_type).
  double array_f64(uint64_t idx) const;
  int64_t array_i64(uint64_t idx) const;
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;           // relative to the data section
  const uint8_t* data = nullptr; // inside the mapping
  size_t nbytes = 0;
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // "[256, 512]"
};

class File {
 public:
  // Parse an opened mapping. `name` is used in error messages.
  static Result<std::unique_ptr<File>> parse(MappedFile map);
  static Result<std::unique_ptr<File>> open(const std::string& path);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return map_.path(); }
  const MappedFile& mapping() const { return map_; }

  const std::map<std::string, Value, std::less<>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed getters: NotFound when absent, Corrupt with the key and the type
  // found when the type does not fit.
  Result<std::string> get_string(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  // Array of strings (e.g. tokenizer.ggml.tokens).
  Result<const std::vector<std::string_view>*> get_string_array(std::string_view key) const;
  // Numeric array (e.g. tokenizer.ggml.scores): the Value, checked to be an array
  // of a numeric type.
  Result<const Value*> get_numeric_array(std::string_view key) const;

 private:
  MappedFile map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, Value, std::less<>> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class Parser;
};

}  // namespace laya::gguf
