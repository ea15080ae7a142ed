// laya complete -m MODEL (-p TEXT | --tokens 1,2,3) [-n N] [--temp T] [--seed S] ...
// Streams the continuation to stdout as it is generated.
#include <CLI/CLI.hpp>
#include <chrono>
#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

#include "cli_parse.h"
#include "cli_util.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "session/generator.h"
#include "tokenizer/tokenizer.h"

namespace laya::cli {

namespace {

struct CompleteArgs {
  std::string prompt, tokens_s;
  int n_predict = 32;
  SamplerParams sp;
  bool show_stats = false, special = false, ids_out = false;
  EngineFlags flags;
};

void add_options(CLI::App& app, CompleteArgs& a) {
  auto* p_opt = app.add_option("-p,--prompt", a.prompt, "prompt text");
  auto* t_opt = app.add_option("--tokens", a.tokens_s, "prompt as comma-separated token ids (instead of -p)");
  p_opt->excludes(t_opt);
  // Generation stops at the model's context (said on stderr) or at -n.
  app.add_option("-n,--n-predict", a.n_predict, "tokens to generate (at most; generation also stops at the context)")
      ->transform(int_in(0, 1 << 20));
  // Bounds that a float holds exactly enough; Sampler::validate checks the
  // open ends (top-p > 0, repeat-penalty > 0) and top-k against the vocabulary.
  SamplerParams& sp = a.sp;
  app.add_option("--temp", sp.temperature, "temperature (0 = greedy)")->transform(real_in(0, 1e4));
  app.add_option("--top-k", sp.top_k, "top-k (0 = off)")->transform(int_in(0, INT32_MAX));
  app.add_option("--top-p", sp.top_p, "top-p (1 = off)")->transform(real_in(0, 1));
  app.add_option("--min-p", sp.min_p, "min-p (0 = off)")->transform(real_in(0, 1));
  app.add_option("--repeat-penalty", sp.repeat_penalty, "repetition penalty (1 = off)")->transform(real_in(0, 1e4));
  app.add_option("--repeat-last-n", sp.repeat_last_n, "tokens the penalty looks back on (-1 = all)")
      ->transform(int_in(-1, INT32_MAX));
  app.add_option("--seed", sp.seed, "RNG seed (a run is reproducible)")->transform(int_in(0, INT64_MAX));
  app.add_flag("--special", a.special, "parse special-token text in the prompt");
  app.add_flag("--ids", a.ids_out, "print token ids instead of text");
  app.add_flag("--stats", a.show_stats, "print timing to stderr");
  a.flags.add_to(app, true);
}

// The prompt's ids: --tokens, or -p encoded; the tokenizer is loaded into
// *tk unless only ids go in and out.
Result<std::vector<int32_t>> prompt_ids(const CompleteArgs& a, const Model& model, std::unique_ptr<tok::Tokenizer>* tk) {
  std::vector<int32_t> ids;
  if (!a.tokens_s.empty()) {
    LAYA_ASSIGN_OR_RETURN(ids, parse_id_list("--tokens", a.tokens_s, 0, model.hparams().n_vocab - 1));
  }
  if (!a.prompt.empty() || !a.ids_out) {
    LAYA_ASSIGN_OR_RETURN(*tk, a.flags.load_tokenizer(model));
  }
  if (!a.prompt.empty()) {
    tok::EncodeOptions eo;
    eo.parse_special = a.special;
    LAYA_ASSIGN_OR_RETURN(ids, (*tk)->encode(a.prompt, eo));
  }
  if (ids.empty()) return Status(StatusCode::kInvalidArgument, "the prompt has no tokens");
  return ids;
}

struct Streamed {
  int tokens = 0;
  bool at_context = false;  // stopped at the context before -n
};

// Generates up to -n tokens after the prefilled prompt (the Generator: the
// decode loop suggestions and chat run) and streams them to stdout (text, or
// ids with --ids or no tokenizer), then a newline.
Result<Streamed> stream(Engine& eng, Sequence& seq, const Model& model, const tok::Tokenizer* tk,
                        const std::vector<int32_t>& ids, const CompleteArgs& a) {
  // Control tokens other than end-of-generation (fill-in-the-middle markers,
  // BOS, ...) are never part of a continuation: the sampler masks them out.
  const int32_t eos_id = model.hparams().eos_id;
  const int n_vocab = static_cast<int>(eng.n_vocab());
  ContinuationMasks masks{TokenMask(n_vocab), TokenMask(n_vocab)};
  if (tk) {
    masks = continuation_masks(*tk, n_vocab, eos_id);
  } else if (eos_id >= 0 && eos_id < n_vocab) {
    masks.eog.add(eos_id);
  }
  Sampler sampler(a.sp, n_vocab);
  sampler.set_mask(masks.control);
  Generator gen(a.ids_out ? nullptr : tk, n_vocab, masks);
  GenerateOptions g;
  g.max_tokens = a.n_predict;
  g.never_empty = true;  // an empty continuation is no suggestion: the first token is never the end
  const StopStream::Sink print{[](void*, std::string_view text) {
                                 std::fwrite(text.data(), 1, text.size(), stdout);
                                 std::fflush(stdout);
                                 return true;
                               },
                               nullptr};
  PlainSequence target(eng, seq);
  Generated out;
  LAYA_TRY(gen.run(target, ids, sampler, g, print, &out));
  if (a.ids_out || !tk) {
    for (size_t i = 0; i < out.tokens.size(); ++i) std::printf(i ? ",%d" : "%d", out.tokens[i]);
  } else {
    std::fwrite(out.tail.data(), 1, out.tail.size(), stdout);  // an incomplete character at the end, as it is
  }
  std::printf("\n");
  std::fflush(stdout);  // the text before the timing line on a shared terminal
  return Streamed{static_cast<int>(out.tokens.size()), out.stop == StopReason::kContext};
}

}  // namespace

int cmd_complete(int argc, char** argv) {
  CLI::App app{"Continue a prompt, streaming the text to stdout", "laya complete"};
  app.footer("Example: laya complete -p \"def fibonacci(n):\" -n 32");
  CompleteArgs a;
  add_options(app, a);
  if (auto rc = parse_args(app, argc, argv, "complete")) return *rc;
  if (a.prompt.empty() && a.tokens_s.empty()) {
    return report_error("complete", Status(StatusCode::kInvalidArgument, "pass -p TEXT or --tokens IDS"));
  }
  if (Status st = check_utf8_arg("--prompt", a.prompt); !st.ok()) return report_error("complete", st);
  auto m = a.flags.load_model();
  if (!m.ok()) return report_error("complete", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  std::unique_ptr<tok::Tokenizer> tk;
  auto r = prompt_ids(a, *model, &tk);
  if (!r.ok()) return report_error("complete", r.status());
  const std::vector<int32_t> ids = std::move(r).value();
  // A prompt past the context is refused up front; generation that reaches
  // the context stops there and says so (below).
  if (Status st = check_positions(*model, a.flags.model_path, static_cast<int64_t>(ids.size()),
                                  fmt::format("the prompt ({} tokens)", ids.size()));
      !st.ok())
    return report_error("complete", st);
  if (Status st = Sampler::validate(a.sp, static_cast<int>(model->hparams().n_vocab)); !st.ok()) {
    return report_error("complete", st);
  }
  EngineOptions eo;
  a.flags.apply(&eo);
  eo.n_ctx = std::min<int64_t>(model->hparams().n_ctx_train, static_cast<int64_t>(ids.size()) + a.n_predict + 1);
  auto e = Engine::create(model, eo);
  if (!e.ok()) return report_error("complete", e.status());
  Engine& eng = **e;
  auto seq = eng.new_sequence();
  warn("complete", eng.memory_lock_note());
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  if (Status st = eng.prefill(*seq, ids, 0); !st.ok()) return report_error("complete", st);
  auto t1 = clock::now();
  auto g = stream(eng, *seq, *model, tk.get(), ids, a);
  if (!g.ok()) return report_error("complete", g.status());
  if (g->at_context)
    warn("complete", fmt::format("generation stopped at the context of {} tokens ({} prompt + {} generated; -n {} asked for more)",
                                 seq->n_ctx(), ids.size(), g->tokens, a.n_predict));
  auto t2 = clock::now();
  if (a.show_stats) {
    const double pre = std::chrono::duration<double>(t1 - t0).count();
    const double gen_s = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr, "prompt: %zu tokens in %.1f ms (%.1f tok/s); generated %d tokens in %.1f ms (%.1f tok/s)\n",
                 ids.size(), pre * 1e3, ids.size() / pre, g->tokens, gen_s * 1e3, g->tokens / gen_s);
  }
  return 0;
}

}  // namespace laya::cli
