// safetensors reader (Hugging Face / MLX weights). Layout: u64 little-endian
// header length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {...}}, then the data. Memory-mapped; tensor
// data is used in place.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mmap.h"
#include "core/status.h"

namespace laya::safetensors {

struct TensorInfo {
  std::string name;
  DType type = DType::F32;   // F32, F16, BF16 or U32 (MLX-packed); others are rejected as unsupported
  std::string dtype_str;     // as written in the file ("BF16")
  std::vector<int64_t> shape;  // row-major, as in the file (outermost first)
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

class File {
 public:
  static Result<std::unique_ptr<File>> parse(MappedFile map);
  static Result<std::unique_ptr<File>> open(const std::string& path);

  const std::string& path() const { return map_.path(); }
  const MappedFile& mapping() const { return map_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile map_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Shard file names listed in a model.safetensors.index.json ("weight_map"),
// deduplicated, in first-seen order; paths are relative to the index file.
Result<std::vector<std::string>> read_index(const std::string& index_path);

}  // namespace laya::safetensors
