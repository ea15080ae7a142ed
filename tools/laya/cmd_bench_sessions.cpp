// laya bench-sessions [-m MODEL] [--docs 100] [--tokens 2000] [--switches N] [--kv-budget MB] [--kv f32|f16|q8_0]
//                     [--seed N] [--shared-head TOKENS] [--save DIR] [--load DIR] [--check FILE] [--json out.json]
// Many documents on one engine, switched between in a random order (issue 12,
// scopes 1 and 4).
//
// Documents: --docs texts of about --tokens tokens each, cut at line starts
// from the public typing traces' final texts (the fixtures' traces/*.jsonl,
// or --traces FILES; generated code-like text when there are none), each from
// another offset, so no two are alike; the first half of them (two at
// least) start with one common head of --shared-head tokens (a licence header, a system
// prompt), so sharing is visible. The cursor is at the end of each document:
// the prompt is the window before it (all of it when it fits the model's
// context; else the window holds the last part, e.g. ~500-980 tokens of a
// 2,000-token document with the default model's 1,024-token context).
//
// The harness (documents, sessions, least-recently-used release, the
// switches) is player/session_switches.h; this file holds the options, the
// store, the check file and the output.
//
// One Session per document on one Engine. Each is asked for a suggestion
// once (warm-up), then --switches times a document other than the current
// one is picked at random (seeded) and:
//   switch    = focus change -> suggestion ready: suggest() at the document's
//               cursor, timed from the call to its return. A document whose
//               KV is resident resumes with nothing to compute; one whose
//               blocks were evicted (see below) recomputes what is missing.
//   keystroke = then the user types --keys characters, each followed by a
//               suggestion (the ordinary keystroke path, reported as key_ms),
//               so documents change between their switches.
//   recompute = the same switch without the store, for the first --recompute
//               switches: a fresh session on a second engine whose cache is
//               emptied each time, given the text, cursor and window, until
//               its suggestion is ready. Its suggestion must equal the switch's
//               (a mismatch is counted and fails the run).
// Residency: when the KV pool (--kv-budget) cannot take the largest document,
// the least recently used documents release their KV (Session::release_kv):
// their full blocks stay cached, evictable, and come back at their next
// switch if still there. resident_docs = documents whose KV was resident
// whenever it was needed: every switch to it computed no prompt token (all
// its blocks were there), or, never switched to, it still holds its KV at the end.
// Without --kv-budget the pool holds every document's window (default_budget;
// capped at half of MemAvailable and 8 GB), so all stay resident.
// kv_mb = KV blocks in use at the end; shared_mb = memory the shared blocks
// save (blocks held by the sessions, counted per session, minus distinct).
//
// --save DIR writes every session to DIR/sessions.laya after the run (save_ms);
// --load DIR starts from such a store instead of building documents (load_ms);
// --check FILE writes, per document, after everything else: a hash of the
// next suggestion (after typing "q") and of its prompt's logits: two runs
// (save, kill -9, load: bench/sessions_restart_check.sh) must write the same file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <xxhash.h>

#include "cli_util.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "engine/engine.h"
#include "model/model.h"
#include "outputs.h"
#include "player/latency_stats.h"
#include "player/session_switches.h"
#include "progress.h"
#include "session/session.h"
#include "session/session_store.h"
#include "tokenizer/tokenizer.h"

namespace laya::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using player::count_json;
using player::ms_json;
using player::ms_line;
using player::percentile;
using player::SessionSet;
using player::SwitchResults;

// --check replaces only an earlier check file.
OutputOptions check_output_options(const std::vector<std::string>& inputs) {
  OutputOptions o;
  o.option = "--check";
  o.inputs = inputs;
  o.kind = "a bench-sessions check file";
  o.replaceable = [](const std::string& p) { return file_starts_with(p, "doc 0 tokens "); };
  return o;
}

// Per document: the next suggestion after typing "q" and its prompt's logits, hashed.
Status write_check(SessionSet& run, const std::string& path, const std::vector<std::string>& inputs) {
  std::string out;
  for (size_t d = 0; d < run.docs.size(); ++d) {
    Session& s = *run.docs[d];
    LAYA_TRY(s.edit(s.cursor(), 0, "q"));
    LAYA_ASSIGN_OR_RETURN(Suggestion sg, run.suggest(d));
    const float* lg = s.prompt_logits();
    const uint64_t hl = lg ? XXH3_64bits(lg, static_cast<size_t>(run.eng.n_vocab()) * sizeof(float)) : 0;
    out += fmt::format("doc {} tokens {:016x} logits {:016x} text {}\n", d,
                       XXH3_64bits(sg.tokens.data(), sg.tokens.size() * sizeof(int32_t)), hl, json(sg.text).dump());
  }
  return write_file_atomic(path, out, check_output_options(inputs));
}

// Half of MemAvailable, capped at 8 GB: what bench-sessions takes when no
// --kv-budget is given and the documents need more than the engine's default.
size_t memory_cap() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return std::min<size_t>(kb * 1024 / 2, size_t{8} << 30);
    std::getline(f, key);
  }
  return size_t{1} << 30;
}

struct Args {
  player::DocSpec spec;
  int switches = 300, keys = 1, n_recompute = 30, max_tokens = 8;
  int64_t max_ctx = 4096;
  std::vector<std::string> traces;
  std::string save_dir, load_dir, check_path, json_path;
  bool hold = false;
};

// The KV budget when none is given: with --load, what the saved blocks take,
// a quarter more, and two contexts of room; else a full window for every
// document and one more block each. Capped by memory_cap(). (The shared
// --kv-budget default of the other commands stays one context: their pool is
// allocated and locked up front, so a large default would cost them memory.)
size_t default_budget(const Model& m, const std::string& kv_name, const Args& a) {
  const HParams& hp = m.hparams();
  const DType kv = kv_name == "f16" ? DType::F16 : kv_name == "q8_0" ? DType::Q8_0 : DType::F32;
  const int64_t n_ctx = std::min<int64_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 2048, a.max_ctx);
  const size_t bb = KvLayout{hp.n_layer, hp.n_head_kv, hp.head_dim, kv, 64}.block_bytes();
  size_t want = 0;
  if (!a.load_dir.empty()) {
    std::error_code ec;
    const auto bytes = fs::file_size(fs::path(a.load_dir) / kSessionFileName, ec);
    want = (ec ? 0 : bytes + bytes / 4) + 2 * bb * static_cast<size_t>((n_ctx + 63) / 64);
  } else {
    const int64_t per_doc = (std::min<int64_t>(n_ctx, a.spec.tokens * 3 / 2 + 64) + 63) / 64 + 1;
    want = static_cast<size_t>(per_doc) * static_cast<size_t>(a.spec.docs + 1) * bb;
  }
  return std::min(want, memory_cap());
}

void print_summary(const SessionSet& run, const SwitchResults& r, const Args& a, double kv_mb, double shared_mb) {
  fmt::print("documents {} ({}), KV budget {:.0f} MB, {} blocks of {:.2f} MB\n", run.docs.size(),
             a.load_dir.empty() ? fmt::format("{} tokens each asked", a.spec.tokens) : "loaded", static_cast<double>(run.eng.kv_pool().bytes()) / 1e6, run.eng.kv_pool().n_blocks(),
             static_cast<double>(run.eng.kv_pool().layout().block_bytes()) / 1e6);
  fmt::print("KV in use {:.1f} MB, saved by shared blocks {:.1f} MB, releases (LRU) {}\n", kv_mb, shared_mb, run.released);
  if (!r.switch_ms.empty()) {
    fmt::print("switch (focus -> suggestion) ms: {}\n", ms_line(r.switch_ms));
    fmt::print("  documents switched to {} (every switch resident: {}), resident documents {}; prompt tokens computed "
               "p50 {} max {}\n", r.switched.size(), r.switched.size() - r.not_resident.size(), player::resident_docs(run, r),
               percentile(r.switch_computed, 0.5),
               percentile(r.switch_computed, 1.0));
  }
  if (!r.recompute_ms.empty())
    fmt::print("recompute (no store) ms: {} ({} samples, {} mismatches)\n", ms_line(r.recompute_ms), r.recompute_ms.size(),
               r.mismatches);
  if (!r.key_ms.empty()) fmt::print("keystroke after a switch ms: {}\n", ms_line(r.key_ms));
  if (r.warmup_ms > 0) fmt::print("warm-up (first suggestion of every document) {:.0f} ms\n", r.warmup_ms);
  if (r.save_ms >= 0) fmt::print("save {:.1f} ms\n", r.save_ms);
  if (r.load_ms >= 0) fmt::print("load {:.1f} ms ({} blocks shared instead of copied)\n", r.load_ms, r.load_shared_blocks);
}

json results_json(const SessionSet& run, const SwitchResults& r, const Args& a, double kv_mb, double shared_mb,
                  const EngineFlags& flags) {
  auto opt_ms = [](double v) { return v >= 0 ? json(v) : json(nullptr); };
  std::vector<int64_t> prompt;
  for (const auto& s : run.docs) prompt.push_back(static_cast<int64_t>(s->cached_tokens().size()));
  json j = {{"docs", run.docs.size()},
            {"tokens_per_doc", a.load_dir.empty() ? json(a.spec.tokens) : json(nullptr)},
            {"resident_docs", player::resident_docs(run, r)},
            {"kv_mb", kv_mb},
            {"shared_mb", shared_mb},
            {"switch_ms", {{"p50", percentile(r.switch_ms, 0.5)}, {"p99", percentile(r.switch_ms, 0.99)},
                           {"max", percentile(r.switch_ms, 1.0)}}},
            {"recompute_ms", {{"p50", percentile(r.recompute_ms, 0.5)}, {"p99", percentile(r.recompute_ms, 0.99)}}},
            {"save_ms", opt_ms(r.save_ms)},
            {"load_ms", opt_ms(r.load_ms)}};
  // Beyond the keys: what the run was, and what a reader needs to trust it.
  j["model"] = flags.model_path;
  j["kv_type"] = flags.kv;
  j["threads"] = run.eng.options().n_threads;
  j["n_ctx"] = run.eng.options().n_ctx;
  j["kv_budget_mb"] = static_cast<double>(run.eng.kv_pool().bytes()) / 1e6;
  j["switches"] = r.switch_ms.size();
  j["switched_docs"] = r.switched.size();
  j["switch_tokens_computed"] = count_json(r.switch_computed);
  j["recompute_samples"] = r.recompute_ms.size();
  j["mismatches"] = r.mismatches;
  j["key_ms"] = ms_json(r.key_ms);
  j["releases"] = run.released;
  j["prompt_tokens"] = count_json(prompt);
  j["shared_head_tokens"] = a.spec.head_tokens;
  j["seed"] = a.spec.seed;
  j["warmup_ms"] = r.warmup_ms;
  j["load_blocks_shared"] = r.load_shared_blocks;
  return j;
}

// The bar's phases and the switches' mismatches, for the harness.
player::SwitchHooks switch_hooks(Progress& bar) {
  player::SwitchHooks h;
  h.start_phase = [&bar](const std::string& label, uint64_t total) { bar.restart(label, total); };
  h.progress = [&bar](uint64_t done) { bar.update(done); };
  h.on_mismatch = [&bar](const std::string& message) {
    bar.clear();
    fmt::print(stderr, "laya bench-sessions: {}\n", message);
  };
  return h;
}

// Builds the documents and their sessions, one warm-up suggestion each.
Status build(SessionSet& run, const Args& a, const player::SwitchHooks& hooks, SwitchResults* r) {
  const std::vector<std::string> traces = a.traces.empty() ? player::default_traces() : a.traces;
  LAYA_ASSIGN_OR_RETURN(std::vector<std::string> texts, player::build_doc_texts(traces, run.tk, a.spec));
  LAYA_ASSIGN_OR_RETURN(r->warmup_ms, run.build(texts, hooks));
  return Status::Ok();
}

Status load(SessionSet& run, const Args& a, SwitchResults* r) {
  const auto t0 = Clock::now();
  LAYA_ASSIGN_OR_RETURN(LoadedSessions ls, load_session_dir(run.eng, run.tk, a.load_dir));
  r->load_ms = ms_since(t0);
  r->load_shared_blocks = ls.blocks_shared;
  if (!ls.warm) warn("bench-sessions", ls.note);
  run.adopt(std::move(ls.sessions));
  return Status::Ok();
}

void add_options(CLI::App& app, Args& a, EngineFlags& flags) {
  app.add_option("--docs", a.spec.docs, "documents")->transform(int_in(1, 100000));
  app.add_option("--tokens", a.spec.tokens, "tokens per document (about)")->transform(int_in(16, 1 << 20));
  app.add_option("--shared-head", a.spec.head_tokens, "tokens of a head common to the first half of the documents")
      ->transform(int_in(0, 1 << 20));
  app.add_option("--seed", a.spec.seed, "seed of the documents and of the switch order")->transform(int_in(0, INT64_MAX));
  app.add_option("--switches", a.switches, "focus changes after the warm-up")->transform(int_in(0, 10000000));
  app.add_option("--keys", a.keys, "characters typed after each switch (each followed by a suggestion)")
      ->transform(int_in(0, 1000));
  app.add_option("--recompute", a.n_recompute, "switches also timed without the store (the first N)")
      ->transform(int_in(0, 10000000));
  app.add_option("--max-tokens", a.max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  app.add_option("--max-ctx", a.max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  app.add_option("--traces", a.traces, "trace files the documents are cut from (default: the fixtures' traces)");
  app.add_option("--save", a.save_dir, "save every session to DIR/sessions.laya after the run");
  app.add_option("--load", a.load_dir, "start from the sessions saved in DIR instead of building documents");
  app.add_option("--check", a.check_path, "write per-document hashes of the next suggestion and its logits");
  app.add_option("--json", a.json_path, "write the results as JSON to this file");
  app.add_flag("--hold", a.hold, "when done, print 'holding' and wait to be killed (the restart check's kill -9)");
  flags.add_to(app, true);
}

// --save: every session to DIR/sessions.laya, timed.
Status save(const SessionSet& run, const std::string& dir, SwitchResults* r) {
  std::vector<const Session*> all;
  for (const auto& s : run.docs) all.push_back(s.get());
  const auto t0 = Clock::now();
  LAYA_TRY(save_session_dir(all, dir));
  r->save_ms = ms_since(t0);
  return Status::Ok();
}

// --json, --check and --save are checked before any work.
Status check_outputs(const Args& a, const std::vector<std::string>& inputs, const OutputOptions& json_opt) {
  if (!a.json_path.empty()) LAYA_TRY(check_output(a.json_path, json_opt));
  if (!a.check_path.empty()) LAYA_TRY(check_output(a.check_path, check_output_options(inputs)));
  // --save names a folder: one that cannot be is refused now, not after the run.
  if (std::error_code ec; !a.save_dir.empty() && fs::exists(a.save_dir, ec) && !fs::is_directory(a.save_dir, ec))
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("--save {}: not a folder (the store is DIR/{})", a.save_dir, kSessionFileName));
  return Status::Ok();
}

}  // namespace

int cmd_bench_sessions(int argc, char** argv) {
  CLI::App app{"Many documents on one engine: switch latency, shared and resident KV, save and load",
               "laya bench-sessions"};
  app.footer("Example: laya bench-sessions --docs 100 --tokens 2000 --json sessions.json");
  Args a;
  EngineFlags flags;
  add_options(app, a, flags);
  if (auto rc = parse_args(app, argc, argv, "bench-sessions")) return *rc;
  std::vector<std::string> inputs = a.traces;
  inputs.push_back(flags.model_path);
  const OutputOptions json_opt = json_output("--json", inputs, {"docs", "switch_ms"});
  if (Status st = check_outputs(a, inputs, json_opt); !st.ok()) return report_error("bench-sessions", st);
  auto m = flags.load_model();
  if (!m.ok()) return report_error("bench-sessions", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  auto tr = flags.load_tokenizer(*model);
  if (!tr.ok()) return report_error("bench-sessions", tr.status());
  std::unique_ptr<tok::Tokenizer> tk = std::move(tr).value();
  EngineFlags rc_flags = flags;  // the recompute engine: the default budget (one context)
  if (flags.kv_budget_mb <= 0) flags.kv_budget_mb = static_cast<double>(default_budget(*model, flags.kv, a)) / 1e6;
  auto e = flags.make_typing_engine(model, a.max_ctx, "bench-sessions", app.count("--max-ctx") > 0);
  if (!e.ok()) return report_error("bench-sessions", e.status());
  warn("bench-sessions", (*e)->memory_lock_note());
  std::unique_ptr<Engine> rc_eng;
  if (a.n_recompute > 0 && a.switches > 0) {
    auto r2 = rc_flags.make_typing_engine(model, a.max_ctx, "bench-sessions", false);
    if (!r2.ok()) return report_error("bench-sessions", r2.status());
    rc_eng = std::move(r2).value();
  }
  SessionSet run(**e, *tk);
  run.opt.max_tokens = a.max_tokens;
  SwitchResults r;
  Status st;
  {
    Progress bar("bench-sessions", 0, progress_allowed(flags.quiet));
    const player::SwitchHooks hooks = switch_hooks(bar);
    st = a.load_dir.empty() ? build(run, a, hooks, &r) : load(run, a, &r);
    if (st.ok()) st = player::run_switches(run, rc_eng.get(), {a.switches, a.keys, a.n_recompute, a.spec.seed}, hooks, &r);
  }  // the bar is wiped here, before any result line
  if (!st.ok()) return report_error("bench-sessions", st);
  const auto [kv_mb, shared_mb] = run.kv_memory();
  if (!a.save_dir.empty())
    if (Status s2 = save(run, a.save_dir, &r); !s2.ok()) return report_error("bench-sessions", s2);
  print_summary(run, r, a, kv_mb, shared_mb);
  if (!a.check_path.empty())
    if (Status s2 = write_check(run, a.check_path, inputs); !s2.ok()) return report_error("bench-sessions", s2);
  if (!a.json_path.empty())
    if (Status s2 = write_file_atomic(a.json_path, dump_json(results_json(run, r, a, kv_mb, shared_mb, flags)), json_opt);
        !s2.ok())
      return report_error("bench-sessions", s2);
  std::fflush(stdout);
  if (a.hold) {
    std::printf("holding\n");
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  return r.mismatches > 0 ? 1 : 0;
}

}  // namespace laya::cli
