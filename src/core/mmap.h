// Read-only memory map of a whole file. Weights are used in place from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace laya {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;

  static Result<MappedFile> open(const std::string& path);
  // Wrap caller-owned memory (tests, fuzzers). Not unmapped on destruction.
  static MappedFile borrow(const void* data, size_t size, std::string name);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Try to lock the pages in RAM; returns a clear message when the OS refuses.
  Status lock();

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
  std::string path_;
};

}  // namespace laya
