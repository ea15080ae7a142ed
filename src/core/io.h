// Small whole-file reads (configs, tokenizer.json, traces): one helper with
// one set of error messages, and a size cap so a wrong path (a device, a
// huge file) fails cleanly instead of exhausting memory. Model weights are
// never read this way: they are memory-mapped (core/mmap.h).
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"

namespace laya {

// The whole content of a regular file of at most max_bytes. Errors name the
// path: missing (kNotFound), a folder / FIFO / device (kInvalidArgument),
// larger than max_bytes (kOutOfRange), a read error (kIo).
Result<std::string> read_file(const std::string& path, size_t max_bytes = size_t{1} << 30);

}  // namespace laya
