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

  // kIo when the file was truncated or rewritten in place since it was
  // mapped (fstat of the open descriptor: size or modification time differ),
  // or when a read of the mapping found a page past a truncated end. Callers
  // check this after reading the mapping (a load) and before each use of it
  // (a forward pass). ~0.6 us; borrowed memory is always Ok.
  //
  // Reading a page past a truncated end raises SIGBUS, which would end the
  // process (issue 29: `cp` over a model while /admin/model loaded it killed
  // the server). open() therefore registers each mapping with a SIGBUS
  // handler that maps zero pages over the rest of a mapping that faulted and
  // marks it: the read in progress continues on zeros and this check then
  // fails, so the load fails cleanly and the old model keeps serving. A
  // fault outside every registered mapping goes to the previous handler (the
  // default: the process ends, as it should for a real bus error).
  Status check_unchanged() const;

 private:
  void release();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
  int fd_ = -1;                // kept open for check_unchanged()
  int guard_ = -1;             // slot in the SIGBUS handler's table; -1: not guarded
  int64_t mtime_ns_ = 0;       // at open
  std::string path_;
};

}  // namespace laya
