// laya bench -m MODEL [-t THREADS] [--prompt 512] [--gen 128] [--reps N] [--depth D] [--same-position] [--json]
// Prefill and decode speed, per-token decode latency percentiles, effective
// bandwidth and peak RSS. Prompt tokens are seeded random ids (as llama-bench
// uses). As in llama-bench, the prefill and the decode are separate tests: the
// decode starts from an empty cache (or from --depth cached tokens) and feeds
// back the arg-max token.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "cli_util.h"
#include "engine/engine.h"
#include "outputs.h"
#include "player/latency_stats.h"
#include "sampling/sampler.h"

namespace laya::cli {

namespace {

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Bytes of weights one decode step reads: every tensor of the architecture's
// table once, the embedding table only for one row (a tied output is visited
// as the output too, so it counts whole; a fused matrix counts as its views).
uint64_t bytes_per_token(const Model& m) {
  uint64_t b = 0;
  m.weights().for_each([&](const TensorSpec& s, const Tensor& t) {
    if (s.role == TensorRole::kFused) return;
    b += s.role == TensorRole::kEmbedding ? (t.total_bytes() / static_cast<uint64_t>(t.rows())) : t.total_bytes();
  });
  return b;
}

struct BenchArgs {
  int n_prompt = 512, n_gen = 128, reps = 1, warmup = 8, depth = 0;
  int64_t n_batch = EngineOptions{}.n_batch;
  bool json = false, same_position = false;
  std::string steps_out;
  std::vector<int> pass_tokens;  // --pass-tokens: the k-token pass cost curve instead of the decode test
  EngineFlags flags;
};

void add_options(CLI::App& app, BenchArgs& a) {
  // Each bound keeps the sums below (depth + warmup + gen) far from int overflow;
  // the model's context is checked once the model is loaded.
  app.add_option("-p,--prompt", a.n_prompt, "prompt tokens to prefill (0 = skip)")->transform(int_in(0, 1 << 20));
  app.add_option("-n,--gen", a.n_gen, "tokens to decode")->transform(int_in(0, 1 << 20));
  app.add_option("-r,--reps", a.reps, "repetitions (the best prefill and all decode steps are reported)")->transform(int_in(1, 1000));
  app.add_option("--warmup", a.warmup, "decode steps run before measuring")->transform(int_in(0, 1 << 20));
  app.add_option("-d,--depth", a.depth, "tokens in the cache before the decode test (llama-bench -d)")->transform(int_in(0, 1 << 20));
  app.add_option("-b,--batch", a.n_batch, "tokens per forward pass of the prefill (the engine's default unless given)")
      ->transform(int_in(1, 1 << 16));
  app.add_flag("--same-position", a.same_position,
               "decode every step at position --depth (the cache is cut back after each step): "
               "the step's jitter without the context growing");
  app.add_option("--steps-out", a.steps_out, "write every measured step's milliseconds to this file, one per line");
  app.add_option("--pass-tokens", a.pass_tokens,
                 "the cost of one forward pass of k tokens at position --depth, all k rows' logits returned (what "
                 "verifying k-1 drafted tokens costs), for each k given (e.g. 1,2,4,8,16), --gen passes each, "
                 "instead of the decode test")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  app.add_flag("--json", a.json, "print one JSON object");
  a.flags.add_to(app, true);
}

// Past the trained context a bench would measure positions the model never
// saw, and a 100,000-token prefill on a 1,024-token model runs for hours:
// refused before any work.
Status check_context(const Model& model, const BenchArgs& a) {
  LAYA_TRY(check_positions(model, a.flags.model_path, a.n_prompt, fmt::format("-p {}", a.n_prompt)));
  int max_k = 1;
  for (int k : a.pass_tokens) max_k = std::max(max_k, k);
  const int decode_positions = a.same_position || !a.pass_tokens.empty() ? a.depth + max_k : a.depth + a.warmup + a.n_gen;
  return check_positions(model, a.flags.model_path, decode_positions,
                         a.same_position ? fmt::format("-d {} (--same-position)", a.depth)
                                         : fmt::format("-d {} + --warmup {} + -n {}", a.depth, a.warmup, a.n_gen));
}

struct Measured {
  double best_prefill = 0;  // tok/s, the best repetition
  std::vector<double> step_ms;
};

// The prefill and decode tests, --reps times, on seeded random prompt ids.
Status measure(Engine& eng, const BenchArgs& a, Measured* m) {
  const int64_t nv = eng.n_vocab();
  auto seq = eng.new_sequence();
  Rng rng(1234);
  std::vector<int32_t> prompt(static_cast<size_t>(std::max({a.n_prompt, a.depth, 1})));
  for (auto& t : prompt) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(nv));
  using clock = std::chrono::steady_clock;
  m->step_ms.reserve(static_cast<size_t>(a.n_gen) * static_cast<size_t>(a.reps));
  for (int r = 0; r < a.reps; ++r) {
    if (a.n_prompt > 0) {
      auto t0 = clock::now();
      LAYA_TRY(eng.prefill(*seq, std::span<const int32_t>(prompt.data(), static_cast<size_t>(a.n_prompt)), 0));
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      m->best_prefill = std::max(m->best_prefill, a.n_prompt / s);
    }
    LAYA_TRY(eng.truncate(*seq, 0));
    if (a.depth > 0) LAYA_TRY(eng.prefill(*seq, std::span<const int32_t>(prompt.data(), static_cast<size_t>(a.depth)), 0));
    int32_t tok = prompt[0];
    for (int i = 0; i < a.warmup + a.n_gen; ++i) {
      auto t0 = clock::now();
      LAYA_TRY(eng.decode(*seq, tok));
      tok = static_cast<int32_t>(std::max_element(seq->logits(), seq->logits() + nv) - seq->logits());
      const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (i >= a.warmup) m->step_ms.push_back(ms);
      if (a.same_position) LAYA_TRY(eng.truncate(*seq, a.depth));
    }
  }
  return Status::Ok();
}

// One forward pass of k tokens at position --depth with every row's logits
// (the verification pass of k-1 drafted tokens), cut back after each: the
// steps of each k interleaved, so a slow stretch of a shared VM hits them all.
Status measure_pass_curve(Engine& eng, const BenchArgs& a, std::vector<std::vector<double>>* per_k) {
  const int64_t nv = eng.n_vocab();
  auto seq = eng.new_sequence();
  Rng rng(1234);
  int max_k = 1;
  for (int k : a.pass_tokens) max_k = std::max(max_k, k);
  std::vector<int32_t> ids(static_cast<size_t>(a.depth + max_k));
  for (auto& t : ids) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(nv));
  std::vector<float> logits(static_cast<size_t>(max_k * nv));
  if (a.depth > 0) LAYA_TRY(eng.prefill(*seq, std::span<const int32_t>(ids.data(), static_cast<size_t>(a.depth)), 0));
  per_k->assign(a.pass_tokens.size(), {});
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < a.warmup + a.n_gen; ++i) {
    for (size_t j = 0; j < a.pass_tokens.size(); ++j) {
      const auto k = static_cast<size_t>(a.pass_tokens[j]);
      auto t0 = clock::now();
      LAYA_TRY(eng.prefill(*seq, std::span<const int32_t>(ids.data() + a.depth, k), a.depth, logits.data()));
      const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (i >= a.warmup) (*per_k)[j].push_back(ms);
      LAYA_TRY(eng.truncate(*seq, a.depth));
    }
  }
  return Status::Ok();
}

void print_pass_curve(const BenchArgs& a, const Engine& eng, const std::vector<std::vector<double>>& per_k) {
  double one = 0;  // the p50 of k = 1, when measured: what k passes of one token would cost
  for (size_t j = 0; j < per_k.size(); ++j)
    if (a.pass_tokens[j] == 1) one = player::interpolated_percentile(per_k[j], 0.5);
  nlohmann::json rows = nlohmann::json::array();
  if (!a.json)
    std::printf("model %s, %d threads, depth %d, %d passes each\n%4s %10s %10s %12s %14s\n", a.flags.model_path.c_str(),
                eng.options().n_threads, a.depth, a.n_gen, "k", "p50 ms", "p99 ms", "ms / token", "vs k x (k=1)");
  for (size_t j = 0; j < per_k.size(); ++j) {
    const int k = a.pass_tokens[j];
    const double p50 = player::interpolated_percentile(per_k[j], 0.5), p99 = player::interpolated_percentile(per_k[j], 0.99);
    const double vs = one > 0 ? p50 / (k * one) : 0;
    rows.push_back({{"k", k}, {"p50_ms", p50}, {"p99_ms", p99}, {"ms_per_token", p50 / k}, {"vs_k_single", vs}});
    if (!a.json) std::printf("%4d %10.3f %10.3f %12.3f %14.2f\n", k, p50, p99, p50 / k, vs);
  }
  if (a.json) {
    nlohmann::json j = {{"model", a.flags.model_path}, {"threads", eng.options().n_threads}, {"depth", a.depth},
                        {"passes", a.n_gen}, {"pass_tokens", rows}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
}

void print_results(const BenchArgs& a, const Engine& eng, const Model& model, const Measured& m) {
  const std::vector<double>& step_ms = m.step_ms;
  double total_ms = 0;
  for (double v : step_ms) total_ms += v;
  const double mean_ms = step_ms.empty() ? 0 : total_ms / static_cast<double>(step_ms.size());
  // Interpolated percentiles, as llama-bench's, unlike the per-event figures of replay.
  const double p50 = player::interpolated_percentile(step_ms, 0.5), p99 = player::interpolated_percentile(step_ms, 0.99),
               p999 = player::interpolated_percentile(step_ms, 0.999);
  const double mx = step_ms.empty() ? 0 : *std::max_element(step_ms.begin(), step_ms.end());
  const double bpt = static_cast<double>(bytes_per_token(model));
  const double gbs = mean_ms > 0 ? bpt / (mean_ms * 1e-3) / 1e9 : 0;
  const double decode_tok_s = mean_ms > 0 ? 1000.0 / mean_ms : 0;
  const double rss = peak_rss_mb();
  if (a.json) {
    // The path as a JSON string: a quote, a backslash or bytes that are not UTF-8 in it made the line invalid JSON.
    const std::string model_json =
        nlohmann::json(a.flags.model_path).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("{\"model\": %s, \"threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"depth\": %d, \"reps\": %d, "
                "\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"decode_ms_mean\": %.4f, \"decode_ms_p50\": %.4f, "
                "\"decode_ms_p99\": %.4f, \"decode_ms_p999\": %.4f, \"decode_ms_max\": %.4f, \"decode_gb_s\": %.3f, "
                "\"same_position\": %s, \"weight_bytes_per_token\": %.0f, \"peak_rss_mb\": %.1f, \"step\": %s}\n",
                model_json.c_str(), eng.options().n_threads, a.n_prompt, a.n_gen, a.depth, a.reps, m.best_prefill,
                decode_tok_s, mean_ms, p50, p99, p999, mx, gbs, a.same_position ? "true" : "false", bpt, rss,
                nlohmann::json(eng.backend().decode_step_note()).dump().c_str());
  } else {
    std::printf("model          %s\nthreads        %d\n", a.flags.model_path.c_str(), eng.options().n_threads);
    if (a.n_prompt > 0) std::printf("prefill        %.1f tok/s (%d tokens)\n", m.best_prefill, a.n_prompt);
    std::printf("decode         %.1f tok/s over %zu steps\n", decode_tok_s, step_ms.size());
    std::printf("decode step    p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  max %.3f ms\n", p50, p99, p999, mx);
    std::printf("bandwidth      %.2f GB/s effective (%.1f MB of weights per token)\n", gbs, bpt / 1e6);
    std::printf("peak RSS       %.1f MB\n", rss);
    if (const std::string note = eng.backend().decode_step_note(); !note.empty()) std::printf("decode steps   %s\n", note.c_str());
  }
  // LAYA_CUDA_PERSISTENT_PROFILE=1: where the steps' time went (stderr beside --json's one line).
  if (const std::string prof = eng.backend().decode_step_profile(); !prof.empty())
    std::fprintf(a.json ? stderr : stdout, "%s", prof.c_str());
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Measure prefill and decode speed and decode latency", "laya bench"};
  app.footer("Example: laya bench -m model.gguf -t 2 --prompt 512 --gen 128 --json");
  BenchArgs a;
  add_options(app, a);
  if (auto rc = parse_args(app, argc, argv, "bench")) return *rc;
  const OutputOptions steps_opt = lines_output("--steps-out", {a.flags.model_path});
  if (!a.steps_out.empty()) {
    if (Status st = check_output(a.steps_out, steps_opt); !st.ok()) return report_error("bench", st);  // before any work
  }
  auto m = a.flags.load_model();
  if (!m.ok()) return report_error("bench", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  if (Status st = check_context(*model, a); !st.ok()) return report_error("bench", st);
  EngineOptions eo;
  a.flags.apply(&eo);
  eo.n_ctx = std::max({a.n_prompt, a.depth + a.n_gen + a.warmup + 1, a.depth + 256, 64});
  if (model->hparams().n_ctx_train > 0)
    eo.n_ctx = std::min<int64_t>(eo.n_ctx, std::max<int64_t>(model->hparams().n_ctx_train, a.n_prompt));
  eo.n_batch = a.n_batch;
  auto e = Engine::create(model, eo);
  if (!e.ok()) return report_error("bench", e.status());
  Engine& eng = **e;
  warn("bench", eng.memory_lock_note());
  if (!a.pass_tokens.empty()) {
    std::vector<std::vector<double>> per_k;
    if (Status st = measure_pass_curve(eng, a, &per_k); !st.ok()) return report_error("bench", st);
    print_pass_curve(a, eng, per_k);
    return 0;
  }
  Measured measured;
  if (Status st = measure(eng, a, &measured); !st.ok()) return report_error("bench", st);
  if (!a.steps_out.empty()) {
    std::string text;
    for (double v : measured.step_ms) text += fmt::format("{:.4f}\n", v);
    if (Status st = write_file_atomic(a.steps_out, text, steps_opt); !st.ok()) return report_error("bench", st);
  }
  print_results(a, eng, *model, measured);
  return 0;
}

}  // namespace laya::cli
