// Helpers shared by the CLI subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace laya::cli {

// The model used when -m is not given (shipped default, else empty).
std::string default_model_path();

// "1,2,3" → ids; InvalidArgument naming the bad item.
Result<std::vector<int32_t>> parse_id_list(const std::string& s);

// Writes a float32 C-order .npy file of the given shape.
Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

// Prints "laya <cmd>: <message>" to stderr and returns the exit code for it.
int report_error(const char* cmd, const Status& st);

// Prints "laya <cmd>: warning: <note>" to stderr when the note is not empty
// (e.g. Engine::memory_lock_note()).
void warn(const char* cmd, const std::string& note);

}  // namespace laya::cli
