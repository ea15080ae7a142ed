// laya lsp [-m MODEL] [-t N] [--kv-budget MB] [--max-tokens N] [--multi-line] [--max-ctx N] [--timings]
// A language server over stdio whose feature is LSP 3.18 inline completion
// (src/server/lsp_server.h says what it answers). stdout carries only the
// protocol: the process's fd 1 is pointed at stderr once the protocol has its
// own copy, so a stray print anywhere can never corrupt a frame. Logs go to
// stderr. Exit code: 0 after shutdown + exit, 1 after exit (or EOF) without
// shutdown, 2 for a bad command line.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

#include "cli_util.h"
#include "core/heap.h"
#include "session/model_slot.h"
#include "model/model.h"
#include "server/jsonrpc_stream.h"
#include "server/lsp_server.h"
#include "tokenizer/tokenizer.h"

namespace laya::cli {

int cmd_lsp(int argc, char** argv) {
  CLI::App app{"Language server (stdio): LSP 3.18 inline completions (ghost text) from a session per document",
               "laya lsp"};
  app.footer("Example: laya lsp -m model.gguf   (started by the editor; see docs/EDITORS.md)");
  lsp::LspOptions lo;
  int64_t max_ctx = 2048;
  app.add_option("--max-tokens", lo.max_tokens, "tokens per suggestion")->transform(int_in(1, 256));
  app.add_flag("--multi-line", lo.multi_line,
               "suggest several lines where the rest of the cursor's line is blank (default: one line)");
  app.add_flag("--timings", lo.log_timings, "log each completion's reply time and suggest time to stderr");
  app.add_option("--max-ctx", max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  EngineFlags flags;
  flags.add_to(app, false);
  if (auto rc = parse_args(app, argc, argv, "lsp")) return *rc;
  heap_return_large_blocks();  // a large request's memory goes back when it ends (core/heap.h)

  // The model lives in a slot, as for laya serve: sessions are bound through it.
  ModelSlotOptions mo;
  flags.apply(&mo.engine);
  mo.engine.n_ctx = max_ctx;  // a cap: min(max_ctx, the model's trained context)
  auto slot = ModelSlot::create(flags.model_path, mo);
  if (!slot.ok()) return report_error("lsp", slot.status());
  const std::shared_ptr<const ModelBundle> bundle = (*slot)->current();
  const int64_t n_ctx_train = bundle->model->hparams().n_ctx_train;
  if (app.count("--max-ctx") > 0 && n_ctx_train > 0 && max_ctx > n_ctx_train)
    warn("lsp", fmt::format("--max-ctx {} is past the trained context of {} ({} tokens): using {}", max_ctx,
                            flags.model_path, n_ctx_train, n_ctx_train));
  warn("lsp", bundle->engine->memory_lock_note());

  // The protocol gets its own descriptor; fd 1 becomes stderr.
  std::fflush(stdout);
  const int proto_fd = ::dup(STDOUT_FILENO);
  if (proto_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
    return report_error("lsp", Status(StatusCode::kIo, "cannot set up stdout for the protocol (dup failed)"));
  // A client that goes away must end the server through a failed write
  // (EPIPE), not kill it with SIGPIPE mid-reply.
  std::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr, "laya lsp: ready: %s, %d threads\n", flags.model_path.c_str(), bundle->engine->options().n_threads);

  lsp::FdSource in_fd(STDIN_FILENO);
  lsp::FdSink out_fd(proto_fd);
  lsp::FrameReader reader(in_fd);
  lsp::FrameWriter writer(out_fd);
  int rc = 1;
  {
    lsp::LspServer server(**slot, lo, writer);
    rc = server.run(reader);
  }  // the server's replies are all written before its model goes
  ::close(proto_fd);
  return rc;
}

}  // namespace laya::cli
