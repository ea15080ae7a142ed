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
#include "sampling/sampler.h"

namespace laya::cli {

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Bytes of weights one decode step reads: every tensor of the architecture's
// table once, the embedding table only for one row (a tied output is visited
// as the output too, so it counts whole).
uint64_t bytes_per_token(const Model& m) {
  uint64_t b = 0;
  m.weights().for_each([&](const TensorSpec& s, const Tensor& t) {
    b += s.role == TensorRole::kEmbedding ? t.row_stride() : t.nbytes;
  });
  return b;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Measure prefill and decode speed and decode latency", "laya bench"};
  app.footer("Example: laya bench -m model.gguf -t 2 --prompt 512 --gen 128 --json");
  int n_prompt = 512, n_gen = 128, reps = 1, warmup = 8, depth = 0;
  int64_t n_batch = EngineOptions{}.n_batch;
  bool json = false, same_position = false;
  std::string steps_out;
  // Each bound keeps the sums below (depth + warmup + gen) far from int overflow;
  // the model's context is checked once the model is loaded.
  app.add_option("-p,--prompt", n_prompt, "prompt tokens to prefill (0 = skip)")->transform(int_in(0, 1 << 20));
  app.add_option("-n,--gen", n_gen, "tokens to decode")->transform(int_in(0, 1 << 20));
  app.add_option("-r,--reps", reps, "repetitions (the best prefill and all decode steps are reported)")->transform(int_in(1, 1000));
  app.add_option("--warmup", warmup, "decode steps run before measuring")->transform(int_in(0, 1 << 20));
  app.add_option("-d,--depth", depth, "tokens in the cache before the decode test (llama-bench -d)")->transform(int_in(0, 1 << 20));
  app.add_option("-b,--batch", n_batch, "tokens per forward pass of the prefill (the engine's default unless given)")
      ->transform(int_in(1, 1 << 16));
  app.add_flag("--same-position", same_position,
               "decode every step at position --depth (the cache is cut back after each step): "
               "the step's jitter without the context growing");
  app.add_option("--steps-out", steps_out, "write every measured step's milliseconds to this file, one per line");
  app.add_flag("--json", json, "print one JSON object");
  EngineFlags flags;
  flags.add_to(app, true);
  if (auto rc = parse_args(app, argc, argv, "bench")) return *rc;
  const OutputOptions steps_opt = lines_output("--steps-out", {flags.model_path});
  if (!steps_out.empty()) {
    if (Status st = check_output(steps_out, steps_opt); !st.ok()) return report_error("bench", st);  // before any work
  }
  auto m = flags.load_model();
  if (!m.ok()) return report_error("bench", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  // Past the trained context a bench would measure positions the model never
  // saw, and a 100,000-token prefill on a 1,024-token model runs for hours:
  // refused before any work.
  if (Status st = check_positions(*model, flags.model_path, n_prompt, fmt::format("-p {}", n_prompt)); !st.ok())
    return report_error("bench", st);
  const int decode_positions = same_position ? depth + 1 : depth + warmup + n_gen;
  if (Status st = check_positions(*model, flags.model_path, decode_positions,
                                  same_position ? fmt::format("-d {} (--same-position)", depth)
                                                : fmt::format("-d {} + --warmup {} + -n {}", depth, warmup, n_gen));
      !st.ok())
    return report_error("bench", st);
  EngineOptions eo;
  flags.apply(&eo);
  eo.n_ctx = std::max({n_prompt, depth + n_gen + warmup + 1, 64});
  if (model->hparams().n_ctx_train > 0) eo.n_ctx = std::min<int64_t>(eo.n_ctx, std::max<int64_t>(model->hparams().n_ctx_train, n_prompt));
  eo.n_batch = n_batch;
  auto e = Engine::create(model, eo);
  if (!e.ok()) return report_error("bench", e.status());
  Engine& eng = **e;
  const int64_t nv = eng.n_vocab();
  auto seq = eng.new_sequence();
  warn("bench", eng.memory_lock_note());
  Rng rng(1234);
  std::vector<int32_t> prompt(static_cast<size_t>(std::max({n_prompt, depth, 1})));
  for (auto& t : prompt) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(nv));
  using clock = std::chrono::steady_clock;
  double best_prefill = 0;
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<size_t>(n_gen) * static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    if (n_prompt > 0) {
      auto t0 = clock::now();
      if (Status st = eng.prefill(*seq, std::span<const int32_t>(prompt.data(), static_cast<size_t>(n_prompt)), 0);
          !st.ok()) {
        return report_error("bench", st);
      }
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      best_prefill = std::max(best_prefill, n_prompt / s);
    }
    if (Status st = eng.truncate(*seq, 0); !st.ok()) return report_error("bench", st);
    if (depth > 0) {
      if (Status st = eng.prefill(*seq, std::span<const int32_t>(prompt.data(), static_cast<size_t>(depth)), 0); !st.ok()) {
        return report_error("bench", st);
      }
    }
    int32_t tok = prompt[0];
    for (int i = 0; i < warmup + n_gen; ++i) {
      auto t0 = clock::now();
      if (Status st = eng.decode(*seq, tok); !st.ok()) return report_error("bench", st);
      tok = static_cast<int32_t>(std::max_element(seq->logits(), seq->logits() + nv) - seq->logits());
      const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (i >= warmup) step_ms.push_back(ms);
      if (same_position) {
        if (Status st = eng.truncate(*seq, depth); !st.ok()) return report_error("bench", st);
      }
    }
  }
  if (!steps_out.empty()) {
    std::string text;
    for (double v : step_ms) text += fmt::format("{:.4f}\n", v);
    if (Status st = write_file_atomic(steps_out, text, steps_opt); !st.ok()) return report_error("bench", st);
  }
  double total_ms = 0;
  for (double v : step_ms) total_ms += v;
  const double mean_ms = step_ms.empty() ? 0 : total_ms / static_cast<double>(step_ms.size());
  const double p50 = percentile(step_ms, 0.5), p99 = percentile(step_ms, 0.99), p999 = percentile(step_ms, 0.999);
  const double mx = step_ms.empty() ? 0 : *std::max_element(step_ms.begin(), step_ms.end());
  const double bpt = static_cast<double>(bytes_per_token(*model));
  const double gbs = mean_ms > 0 ? bpt / (mean_ms * 1e-3) / 1e9 : 0;
  const double decode_tok_s = mean_ms > 0 ? 1000.0 / mean_ms : 0;
  const double rss = peak_rss_mb();
  if (json) {
    // The path as a JSON string: a quote, a backslash or bytes that are not UTF-8 in it made the line invalid JSON.
    const std::string model_json =
        nlohmann::json(flags.model_path).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("{\"model\": %s, \"threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"depth\": %d, \"reps\": %d, "
                "\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"decode_ms_mean\": %.4f, \"decode_ms_p50\": %.4f, "
                "\"decode_ms_p99\": %.4f, \"decode_ms_p999\": %.4f, \"decode_ms_max\": %.4f, \"decode_gb_s\": %.3f, "
                "\"same_position\": %s, \"weight_bytes_per_token\": %.0f, \"peak_rss_mb\": %.1f}\n",
                model_json.c_str(), eng.options().n_threads, n_prompt, n_gen, depth, reps, best_prefill, decode_tok_s, mean_ms,
                p50, p99, p999, mx, gbs, same_position ? "true" : "false", bpt, rss);
  } else {
    std::printf("model          %s\nthreads        %d\n", flags.model_path.c_str(), eng.options().n_threads);
    if (n_prompt > 0) std::printf("prefill        %.1f tok/s (%d tokens)\n", best_prefill, n_prompt);
    std::printf("decode         %.1f tok/s over %zu steps\n", decode_tok_s, step_ms.size());
    std::printf("decode step    p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  max %.3f ms\n", p50, p99, p999, mx);
    std::printf("bandwidth      %.2f GB/s effective (%.1f MB of weights per token)\n", gbs, bpt / 1e6);
    std::printf("peak RSS       %.1f MB\n", rss);
  }
  return 0;
}

}  // namespace laya::cli
