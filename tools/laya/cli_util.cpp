#include "cli_util.h"

#include "cli_parse.h"
#include "progress.h"

#include <CLI/CLI.hpp>

#include "core/shown.h"
#include "core/thread_pool.h"
#include "core/utf8.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>

namespace laya::cli {

std::string default_model_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("LAYA_MODEL"); env && *env) return env;
  // Next to the binary: ../models (build tree) or ../share/laya/models.
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      fs::path cand = dir / "models" / "laya-default-q8_0.gguf";
      if (fs::exists(cand, ec)) return cand.string();
    }
  }
  return "";
}

void add_draft_option(CLI::App& app, int* draft_max_tokens) {
  app.add_option("--draft", *draft_max_tokens,
                 "most tokens drafted from the text and checked in one forward pass (0: off; the suggestions are the "
                 "same either way, only the passes differ)")
      ->transform(int_in(0, 15));
}

CLI::Validator int_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        auto r = parse_int("", s, lo, hi);
        if (!r.ok()) return r.status().message();
        s = std::to_string(r.value());
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator real_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        auto r = parse_real("", s, lo, hi);
        if (!r.ok()) return r.status().message();
        s = fmt::format("{}", r.value());  // shortest round-trip form
        return {};
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const char* cmd) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::fprintf(stderr, "laya %s: error: %s\nRun 'laya %s --help' for the options.\n", cmd, e.what(), cmd);
    return 2;
  }
}

Status check_utf8_arg(const char* option, const std::string& text) {
  size_t bad = 0;
  if (!utf8::count(text, nullptr, &bad))
    return Status(StatusCode::kInvalidArgument, fmt::format("{}: the text is not valid UTF-8 (byte {} of {}: {})", option, bad,
                                                            text.size(), shown(std::string_view(text).substr(bad, 4))));
  return Status::Ok();
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

int report_error(const char* cmd, const Status& st) {
  std::fprintf(stderr, "laya %s: error: %s\n", cmd, st.message().c_str());
  return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

void EngineFlags::add_to(CLI::App& app, bool with_kv) {
  kv_offered = with_kv;
  app.add_option("-m,--model", model_path, "a .gguf file or a Hugging Face / MLX folder");
  // The bound is the engine's (ThreadPool::check_count, which Engine::create
  // applies too): checked here as well so the message names the option.
  app.add_option("-t,--threads", threads,
                 fmt::format("threads (default: all cores; at most {}, 4 x the cores, <= 256)", ThreadPool::max_threads()))
      ->transform(int_in(0, ThreadPool::max_threads()));
  app.add_option("--awake-ms", awake_ms,
                 fmt::format("ms the worker threads keep spinning after a forward pass before they sleep: a sleeping "
                             "core of a VM takes 1-3 ms to wake, so a window longer than the pause between keys keeps "
                             "a typist's cores awake, at the cost of that CPU time (default {})",
                             kDefaultAwakeMs))
      ->transform(int_in(0, 60000));
  if (with_kv) app.add_option("--kv", kv, "KV cache type: f32, f16 or q8_0")->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  app.add_flag("--no-mlock", no_mlock, "do not lock the weights and caches in RAM");
  std::string names;
  for (const auto& n : backend_names()) names += (names.empty() ? "" : ", ") + n;
  app.add_option("--backend", backend, "compute backend (" + names + ")")->check(CLI::IsMember(backend_names()));
  app.add_option("--kv-budget", kv_budget_mb, "MB of KV memory shared by all sequences (default: one full context, at least 16 MiB)")
      ->transform(real_in(1.0, 1.0e8));
  app.add_flag("-q,--quiet", quiet, "no progress bar on stderr (there is none unless stderr is a terminal)");
}

void EngineFlags::apply(EngineOptions* eo) const {
  eo->n_threads = threads;
  eo->awake_ms = awake_ms;
  eo->lock_memory = !no_mlock;
  eo->backend = backend;
  if (kv_budget_mb > 0) eo->kv_budget_bytes = static_cast<size_t>(kv_budget_mb * 1e6);
  if (kv_offered) eo->kv_type = kv == "f16" ? DType::F16 : kv == "q8_0" ? DType::Q8_0 : DType::F32;
  std::filesystem::path name = std::filesystem::path(model_path).filename();
  if (name.empty()) name = std::filesystem::path(model_path).parent_path().filename();  // "folder/"
  eo->on_prepare_progress = byte_progress("loading " + name.string(), quiet, kLoadProgressMinBytes);
}

Result<std::shared_ptr<const Model>> EngineFlags::load_model() const {
  if (model_path.empty()) return Status(StatusCode::kInvalidArgument, "no model: pass -m MODEL");
  LAYA_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, Model::load(model_path));
  return std::shared_ptr<const Model>(std::move(m));
}

Result<std::unique_ptr<tok::Tokenizer>> EngineFlags::load_tokenizer(const Model& model) const {
  LAYA_ASSIGN_OR_RETURN(std::unique_ptr<tok::Tokenizer> t, model.gguf_file() ? tok::Tokenizer::from_gguf(*model.gguf_file())
                                                                            : tok::Tokenizer::from_path(model_path));
  LAYA_TRY(model.check_tokenizer_size(t->n_vocab(), model.gguf_file() ? model_path : model_path + "/tokenizer.json"));
  return t;
}

Result<std::unique_ptr<Engine>> EngineFlags::make_typing_engine(std::shared_ptr<const Model> model, int64_t max_ctx,
                                                                const char* cmd, bool max_ctx_given) const {
  EngineOptions eo;
  apply(&eo);
  const int64_t n_ctx_train = model->hparams().n_ctx_train > 0 ? model->hparams().n_ctx_train : 2048;
  if (max_ctx_given && max_ctx > n_ctx_train)
    warn(cmd, fmt::format("--max-ctx {} is past the trained context of {} ({} tokens): using {}", max_ctx, model_path,
                          n_ctx_train, n_ctx_train));
  eo.n_ctx = std::min<int64_t>(n_ctx_train, max_ctx);
  return Engine::create(std::move(model), eo);
}

Status check_positions(const Model& model, const std::string& model_path, int64_t needed, const std::string& what) {
  const int64_t n_ctx = model.hparams().n_ctx_train;
  if (n_ctx > 0 && needed > n_ctx)
    return Status(StatusCode::kInvalidArgument, fmt::format("{} needs {} positions, past the trained context of {} ({} tokens)",
                                                            what, needed, model_path, n_ctx));
  return Status::Ok();
}

void warn(const char* cmd, const std::string& note) {
  if (!note.empty()) std::fprintf(stderr, "laya %s: warning: %s\n", cmd, note.c_str());
}

}  // namespace laya::cli
