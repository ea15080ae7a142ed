// Helpers shared by the CLI subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace CLI {
class App;
}
namespace laya {
struct EngineOptions;
}

namespace laya::cli {

// Engine flags shared by the commands that run a model: --no-mlock, and
// --kv f32|f16|q8_0 where the command offers a choice of cache.
struct EngineFlags {
  std::string kv = "f32";
  std::string backend = "cpu";
  double kv_budget_mb = 0;  // 0: the engine's default
  bool no_mlock = false;
  bool kv_offered = false;
  void add_to(CLI::App& app, bool with_kv);
  void apply(EngineOptions* eo) const;  // backend, lock_memory, KV budget, and kv_type when --kv is offered
};

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
