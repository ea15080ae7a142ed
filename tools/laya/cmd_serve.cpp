// laya serve: the HTTP server (src/server/http_server.h) on one engine and its
// sessions. Loopback by default; prints "laya serve: listening on
// http://HOST:PORT" on stderr once it accepts connections; SIGINT/SIGTERM stop
// it cleanly.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli_parse.h"
#include "core/heap.h"
#include "cli_util.h"
#include "commands.h"
#include "format/gguf.h"
#include "server/http_server.h"
#include "server/server_sessions.h"
#include "session/model_slot.h"

namespace laya::cli {
namespace {

std::atomic<server::HttpServer*> g_server{nullptr};

void on_signal(int) {
  // stop() only sets flags and shuts the listening socket down: safe enough
  // here, and the process exits through run()'s return, not from the handler.
  if (server::HttpServer* s = g_server.load()) s->stop();
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The limits a hostile or careless client meets (docs/SERVING.md, "Limits").
void add_limit_options(CLI::App& app, server::HttpOptions* ho) {
  server::ConnectionLimits& c = ho->conn;
  server::RequestLimits& l = ho->limits;
  app.add_option("--max-connections,--http-threads", c.max_connections,
                 "connections served at once, each on its own thread while open; past it (and the /health reserve) "
                 "a new connection is answered 503 at once")
      ->transform(int_in(1, 4096));
  app.add_option("--max-connections-per-client", c.max_per_client,
                 "connections one client address may hold (0: no cap; set 0 behind a reverse proxy, where every "
                 "client has the proxy's address)")
      ->transform(int_in(0, 4096));
  app.add_option("--health-reserve", c.health_reserve,
                 "connections kept beyond --max-connections for GET /health (load balancers' probes)")
      ->transform(int_in(0, 256));
  app.add_option("--request-timeout", c.request_timeout_s,
                 "seconds for a whole request (request line, headers, body) to arrive, from its first byte; 408 "
                 "past it")
      ->transform(real_in(0.05, 3600));
  app.add_option("--keep-alive", c.keep_alive_s,
                 "seconds an idle keep-alive connection waits for its next request (one closes early when a new "
                 "connection needs its slot)")
      ->transform(real_in(0, 3600));
  app.add_option("--max-body-bytes", l.max_body_bytes,
                 "request body limit in bytes, chunked or not (413 past it)")
      ->transform(int_in(1024, int64_t{1} << 30));
  app.add_option("--max-header-bytes", c.max_header_bytes, "request line + headers limit in bytes (431 past it)")
      ->transform(int_in(1024, 16 << 20));
  app.add_option("--large-requests", c.large_requests,
                 "requests with a body of 1 MiB or more read and handled at once; the others wait (within "
                 "--request-timeout)")
      ->transform(int_in(1, 4096));
  app.add_option("--max-json-depth", l.json.max_depth, "nesting of arrays and objects in a request body (400 past it)")
      ->transform(int_in(2, 10000));
  app.add_option("--max-json-values", l.json.max_values,
                 "values (arrays, objects and their items) in a request body, counted before it is parsed (400 "
                 "past it)")
      ->transform(int_in(16, int64_t{1} << 26));
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  CLI::App app{"HTTP server: llama.cpp's /infill (llama.vim, llama.vscode), OpenAI /v1/completions, /metrics",
               "laya serve"};
  app.footer("Example: laya serve --port 8012   (then point llama.vim / llama.vscode at it: docs/EDITORS.md)");
  server::HttpOptions ho;
  int64_t max_sessions = 64;
  int64_t max_ctx = 2048;
  std::string fim = "psm";
  bool no_heal = false;
  app.add_option("--host", ho.host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", ho.port, "port (default 8012, llama.vim's and llama.vscode's; 0: any free port)")
      ->transform(int_in(0, 65535));
  app.add_option("--api-key", ho.api_keys,
                 "require \"Authorization: Bearer KEY\" on every endpoint but /health; give it once per user "
                 "(each key's documents are its own: docs/SERVING.md)");
  app.add_option("--max-sessions", max_sessions, "documents kept warm (each its own session and KV)")
      ->transform(int_in(1, 100000));
  app.add_option("--max-completions", ho.limits.max_completions,
                 "most completions one request may ask for (n_cmpl, n); each costs a generation")
      ->transform(int_in(1, 16));
  app.add_option("--n-predict", ho.default_predict, "tokens per suggestion when a request gives none")
      ->transform(int_in(1, 1024));
  app.add_option("--max-ctx", max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  app.add_option("--fim", fim, "fill-in-the-middle prompt order where the model has FIM tokens: psm, spm or off")
      ->check(CLI::IsMember({"psm", "spm", "off"}));
  app.add_flag("--no-heal", no_heal, "no token healing");
  app.add_flag("-v,--verbose", ho.log_requests,
               "a line per request on stderr: route, status, document, tokens reused / computed / generated, passes, "
               "ms, outcome");
  app.add_option("--log-json", ho.log_json, "append the same as one JSON object per request to this file");
  app.add_flag("--keep-repeated-lines", ho.keep_repeated_lines,
               "/infill: do not end a suggestion before a line that repeats one of its own or the line above the "
               "cursor, nor drop a multi-line suggestion's unfinished last line");
  add_limit_options(app, &ho);
  int draft = SessionOptions{}.draft_max_tokens;
  add_draft_option(app, &draft);
  EngineFlags flags;
  flags.add_to(app, true);
  if (auto rc = parse_args(app, argc, argv, "serve")) return *rc;
  heap_return_large_blocks();  // a large request's memory goes back when it ends (core/heap.h)
  if (ho.api_keys.empty() && ho.host != "127.0.0.1" && ho.host != "localhost" && ho.host != "::1")
    warn("serve", fmt::format("listening on {} without --api-key: anyone who can reach this address can use the model",
                              ho.host));
  // KV for every resident session to hold a full context, unless --kv-budget
  // says otherwise: sessions then never fail for want of a block, and what a
  // dropped session leaves behind stays cached until the room is needed. (The
  // model is opened here for its shapes only: mapping it again is cheap.)
  int64_t n_ctx = 0;
  {
    auto m = flags.load_model();
    if (!m.ok()) return report_error("serve", m.status());
    const HParams& hp = (*m)->hparams();
    n_ctx = std::min<int64_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 2048, max_ctx);
    const double per_token = 2.0 * static_cast<double>(hp.n_layer * hp.kv_dim()) *
                             (flags.kv == "f16" ? 2.0 : flags.kv == "q8_0" ? 34.0 / 32.0 : 4.0);
    if (flags.kv_budget_mb <= 0)
      flags.kv_budget_mb =
          std::max(16.0, static_cast<double>(max_sessions) * static_cast<double>(n_ctx) * per_token / 1e6);
  }
  // The model lives in a slot: POST /admin/model swaps it while serving.
  ModelSlotOptions mo;
  flags.apply(&mo.engine);
  mo.engine.n_ctx = max_ctx;  // a cap: min(max_ctx, each model's trained context)
  // A progress bar for the first load only: a swap loads on a server thread,
  // where a bar would run into what the server writes on stderr.
  auto first_load = std::make_shared<std::atomic<bool>>(true);
  if (auto bar = mo.engine.on_prepare_progress)
    mo.engine.on_prepare_progress = [bar, first_load](uint64_t done, uint64_t total) {
      if (first_load->load()) bar(done, total);
    };
  auto slot = ModelSlot::create(flags.model_path, mo);
  first_load->store(false);
  if (!slot.ok()) return report_error("serve", slot.status());
  warn("serve", (*slot)->current()->engine->memory_lock_note());
  server::ServerSessions::Options so;
  so.max_sessions = static_cast<size_t>(max_sessions);
  so.session.heal = !no_heal;
  so.session.draft_max_tokens = draft;
  so.session.fim = fim == "spm" ? FimOrder::kSpm : fim == "off" ? FimOrder::kOff : FimOrder::kPsm;
  server::ServerSessions sessions(**slot, so);
  server::HttpServer srv(sessions, ho);
  if (Status st = srv.bind(); !st.ok()) return report_error("serve", st);
  g_server.store(&srv);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::fprintf(stderr, "laya serve: %s, %lld sessions × %lld tokens (KV budget %.0f MB); listening on http://%s:%d\n",
               base_name(flags.model_path).c_str(), static_cast<long long>(max_sessions), static_cast<long long>(n_ctx),
               flags.kv_budget_mb, ho.host.c_str(), srv.port());
  std::fflush(stderr);
  Status st = srv.run();
  g_server.store(nullptr);
  if (!st.ok()) return report_error("serve", st);
  std::fprintf(stderr, "laya serve: stopped\n");
  return 0;
}

}  // namespace laya::cli
