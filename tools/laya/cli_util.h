// Helpers shared by the CLI subcommands.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace CLI {
class App;
class Validator;
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
// --kv-budget, --no-mlock, -q.
// How long the CPU workers stay awake after a forward pass, unless
// --awake-ms says otherwise (EngineOptions::awake_ms).
constexpr int kDefaultAwakeMs = 300;

struct EngineFlags {
  std::string model_path = default_model_path();
  int threads = 0;  // 0: all cores; checked by Engine::create (ThreadPool::check_count)
  std::string kv = "f32";
  std::string backend = "cpu";
  double kv_budget_mb = 0;  // 0: the engine's default
  bool no_mlock = false;
  bool kv_offered = false;
  bool quiet = false;  // -q: no progress bar (progress.h)
  int awake_ms = kDefaultAwakeMs;  // EngineOptions::awake_ms
  void add_to(CLI::App& app, bool with_kv);
  // threads, backend, lock_memory, KV budget, kv_type when --kv is offered,
  // and the progress bar of a model over kLoadProgressMinBytes (unless -q).
  void apply(EngineOptions* eo) const;
  // The model of -m (or the default), or an error naming what is missing.
  Result<std::shared_ptr<const Model>> load_model() const;
  // The model's tokenizer: its GGUF metadata, or the folder's tokenizer.json.
  Result<std::unique_ptr<tok::Tokenizer>> load_tokenizer(const Model& model) const;
  // An engine for the typing commands (bench-typing, replay): these flags and
  // a context of the model's trained length (2,048 when the file gives none)
  // capped at max_ctx. A --max-ctx the user gave past the trained length is
  // said on stderr (the trained length is used), never silently cut.
  Result<std::unique_ptr<Engine>> make_typing_engine(std::shared_ptr<const Model> model, int64_t max_ctx,
                                                     const char* cmd, bool max_ctx_given) const;
};


// CLI11 glue for cli_parse.h: a transforming validator (use with
// Option::transform, not check) that runs parse_int / parse_real on the
// option's text and rewrites it in plain decimal, so CLI11's own conversion
// (which reads "010" as octal, "0x10" as hex and lets "nan" through a
// CLI::Range) only ever sees values the one parser accepted. CLI11 prefixes
// the message with the option's name: "--threads: '100000' is out of range [0, 8]".
CLI::Validator int_in(int64_t lo, int64_t hi);
CLI::Validator real_in(double lo, double hi);

// --draft N (the sessions' SessionOptions::draft_max_tokens; 0: off): one
// option, one text, for every command whose sessions draft.
void add_draft_option(CLI::App& app, int* draft_max_tokens);

// Scope 3 of issue 11: work that needs more positions than the model was
// trained for is refused before any work. `what` says what asked for them
// ("-p 100000", "--tokens (5000 ids)"); the message names it, the positions
// and the model's context: "-p 100000 needs 100000 positions, past the
// trained context of models/x.gguf (1024 tokens)".
Status check_positions(const Model& model, const std::string& model_path, int64_t needed, const std::string& what);

// Parses the command line. std::nullopt: go on; else the exit code to return
// now: 0 after --help, 2 after a usage error, printed as one line like every
// other error ("laya complete: error: --threads: '100000' is out of range
// [0, 8]") rather than CLI11's own format and exit codes (105, 106, ...).
std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const char* cmd);

// Text typed on the command line (-p, tokenize TEXT) must be UTF-8: a byte-
// level tokenizer would take any bytes and the model continue nonsense, while
// sessions refuse them. kInvalidArgument naming the option and the byte.
Status check_utf8_arg(const char* option, const std::string& text);

// A result document as written to --json: indented, and with bytes that are
// not UTF-8 (a model path or a file name from the command line) replaced by
// U+FFFD rather than thrown as nlohmann's type_error.316 (an abort).
std::string dump_json(const nlohmann::json& j);

// Prints "laya <cmd>: <message>" to stderr and returns the exit code for it.
int report_error(const char* cmd, const Status& st);

// Prints "laya <cmd>: warning: <note>" to stderr when the note is not empty
// (e.g. Engine::memory_lock_note()).
void warn(const char* cmd, const std::string& note);

}  // namespace laya::cli
