// GGUF v3 writer, streaming: metadata and tensor declarations are collected
// first, then begin() writes the header (with every tensor's offset computed
// from its declared type and shape) and the tensor data is appended in
// declaration order, in as many pieces as the caller likes. Only the header
// is held in memory; a 2 GB model needs no 2 GB buffer.
//
// Layout written (little-endian), as src/format/gguf.cpp reads it:
//   "GGUF" u32 version=3, u64 n_tensors, u64 n_kv,
//   n_kv × (string key, u32 type, value),
//   n_tensors × (string name, u32 n_dims, n_dims × u64 ne, u32 ggml type, u64 offset),
//   zero padding to the alignment, tensor data (each tensor padded to the alignment).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/dtype.h"
#include "core/status.h"
#include "format/gguf.h"

namespace laya::gguf {

class Writer {
 public:
  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // ---- metadata (before begin()); keys must be unique ----------------------
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_string_array(std::string_view key, const std::vector<std::string>& v);
  // Numeric array of one element type (not kString / kArray); `data` holds
  // `count` packed little-endian elements of that type.
  void set_array(std::string_view key, ValueType elem_type, const void* data, uint64_t count);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v) {
    set_array(key, ValueType::kI32, v.data(), v.size());
  }
  void set_f32_array(std::string_view key, const std::vector<float>& v) {
    set_array(key, ValueType::kF32, v.data(), v.size());
  }
  bool has_key(std::string_view key) const;
  size_t n_kv() const { return kvs_.size(); }

  // ---- tensors (before begin()) --------------------------------------------
  // ne[0] is the row (contiguous) length; it must be a multiple of the type's
  // block size. Returns the tensor's index.
  Result<size_t> add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne);
  size_t n_tensors() const { return tensors_.size(); }
  size_t tensor_nbytes(size_t i) const { return tensors_[i].nbytes; }
  // Total file size once everything is written (valid after all add_tensor calls).
  uint64_t file_size() const;

  // ---- writing ---------------------------------------------------------------
  // Creates the file and writes header, metadata, tensor infos and padding.
  // The file is an AtomicFile (core/atomic_file.h): `path` shows the whole
  // GGUF only after finish(); a failure or a Writer destroyed before then
  // leaves `path` as it was. `opt` says whether an existing file may be replaced.
  Status begin(const std::string& path, const OutputOptions& opt = {});
  // Appends bytes of the current tensor (tensors in declaration order). A
  // piece may not cross into the next tensor; when a tensor is complete its
  // padding is written and the next one becomes current.
  Status write(const void* data, size_t n);
  // Index of the tensor the next write() goes to (n_tensors() when all done).
  size_t current_tensor() const { return cur_; }
  // Checks all tensor bytes were written, then commits the file (fsync, rename).
  Status finish();

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> payload;  // type id + value, as in the file
  };
  struct TensorDecl {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    size_t nbytes = 0;
    uint64_t offset = 0;  // relative to the data section
  };
  void add_kv(std::string_view key, std::vector<uint8_t> payload);
  Status put(const void* p, size_t n);
  Status pad_to_alignment();

  uint64_t alignment_;
  std::vector<Kv> kvs_;
  std::vector<TensorDecl> tensors_;
  uint64_t data_size_ = 0;  // bytes of the data section (padded)
  AtomicFile out_;
  bool begun_ = false;
  uint64_t pos_ = 0;        // bytes written to the file
  size_t cur_ = 0;          // current tensor
  size_t cur_written_ = 0;  // bytes of it written
};

}  // namespace laya::gguf
