// Helpers shared by the CLI subcommands.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace CLI {
class App;
}
namespace laya {
struct EngineOptions;
class Engine;
class Model;
namespace tok {
class Tokenizer;
}
}

namespace laya::cli {

// The model used when -m is not given (shipped default, else empty).
std::string default_model_path();

// The flags of every command that runs a model: -m, -t, --backend, --kv,
// --kv-budget, --no-mlock.
struct EngineFlags {
  std::string model_path = default_model_path();
  int threads = 0;  // 0: all cores; checked by Engine::create (ThreadPool::check_count)
  std::string kv = "f32";
  std::string backend = "cpu";
  double kv_budget_mb = 0;  // 0: the engine's default
  bool no_mlock = false;
  bool kv_offered = false;
  void add_to(CLI::App& app, bool with_kv);
  void apply(EngineOptions* eo) const;  // threads, backend, lock_memory, KV budget, and kv_type when --kv is offered
  // The model of -m (or the default), or an error naming what is missing.
  Result<std::shared_ptr<const Model>> load_model() const;
  // The model's tokenizer: its GGUF metadata, or the folder's tokenizer.json.
  Result<std::unique_ptr<tok::Tokenizer>> load_tokenizer(const Model& model) const;
  // An engine for the typing commands (bench-typing, replay): these flags and
  // a context of the model's trained length (2,048 when the file gives none)
  // capped at max_ctx.
  Result<std::unique_ptr<Engine>> make_typing_engine(std::shared_ptr<const Model> model, int64_t max_ctx) const;
};


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
