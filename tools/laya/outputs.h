// The files the CLI writes (logits -o, --json, --steps-out; mkmodel -o goes
// through the GGUF writer): each written atomically (core/atomic_file.h),
// refused before any work when it is an input, and an existing file replaced
// only when it is clearly an earlier output of the same kind.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/status.h"

namespace laya::cli {

// Output options for `option` naming a file the command reads from `inputs`
// (the model path, trace files...). Replacing an existing file:
//   npy_output:   only a .npy file (it starts with "\x93NUMPY");
//   json_output:  only a JSON document of this command: an object having
//                 every key of `keys` (or, for `array_keys`, an array of
//                 objects having those keys);
//   lines_output: only a text file of one number per line.
OutputOptions npy_output(const std::string& option, std::vector<std::string> inputs);
OutputOptions json_output(const std::string& option, std::vector<std::string> inputs, std::vector<std::string> keys,
                          std::vector<std::string> array_keys = {});
// The latency report (--html): replaceable when it is an earlier report (its first bytes).
OutputOptions html_report_output(const std::string& option, std::vector<std::string> inputs);
OutputOptions lines_output(const std::string& option, std::vector<std::string> inputs);

// A float32 C-order .npy file of the given shape, written atomically.
Status write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape,
                 const OutputOptions& opt);

}  // namespace laya::cli
