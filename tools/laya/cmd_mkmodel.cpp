// laya mkmodel --preset NAME --type TYPE -o FILE: a random-weight GGUF with
// the exact shapes, tensor types and tokenizer of a real model (benchmarks
// without downloads; llama.cpp reads the same file).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "cli_util.h"
#include "core/thread_pool.h"
#include "modelgen/presets.h"
#include "progress.h"

namespace laya::cli {

int cmd_mkmodel(int argc, char** argv) {
  std::string names;
  for (const auto& p : model_presets()) {
    if (p.hidden) continue;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  CLI::App app{"Write a random-weight GGUF with the shapes of a real model (presets: " + names + ")", "laya mkmodel"};
  app.footer("Example: laya mkmodel --preset qwen2.5-0.5b --type Q8_0 -o qwen.gguf");
  std::string preset, type_s = "Q8_0", out, tokenizer;
  uint64_t seed = 1;
  int threads = 0;
  bool list = false, quiet = false, plan_only = false, force = false;
  app.add_option("--preset", preset, "model shape: " + names);
  app.add_option("--type", type_s,
                 "Q8_0, Q4_K_M (llama.cpp's mix), Q4_0 (every matrix), F16, BF16, F32 (default Q8_0), or MLX4 / MLX8: "
                 "an MLX-quantized Hugging Face folder (-o names the folder)");
  app.add_option("-o,--output", out, "the .gguf file to write (written whole or not at all)");
  app.add_flag("--force", force, "replace -o when it exists (never an input)");
  app.add_option("--seed", seed, "random seed (default 1)")->transform(int_in(0, INT64_MAX));
  app.add_option("--tokenizer", tokenizer,
                 "a tokenizer.json (default: ../shared/fixtures/tokenizer/hf/{llama3,qwen3}, else a synthetic byte vocabulary)");
  app.add_option("-t,--threads", threads, "threads (default: all cores)")
      ->transform(int_in(0, ThreadPool::max_threads()));  // thread creation past the bound aborted
  app.add_flag("--list", list, "list the presets and exit");
  app.add_flag("--plan", plan_only, "print each tensor's type and shape, write nothing");
  app.add_flag("-q,--quiet", quiet, "no progress bar (there is none unless stderr is a terminal)");
  if (auto rc = parse_args(app, argc, argv, "mkmodel")) return *rc;
  if (list) {
    for (const auto& p : model_presets()) {
      if (p.hidden) continue;
      std::printf("%-14s %-6s hidden %lld, layers %lld, heads %lld/%lld (head_dim %lld), ffn %lld, vocab %lld, ctx %lld\n",
                  p.name.c_str(), p.arch.c_str(), (long long)p.n_embd, (long long)p.n_layer, (long long)p.n_head,
                  (long long)p.n_head_kv, (long long)p.head_dim, (long long)p.n_ff, (long long)p.n_vocab, (long long)p.n_ctx);
    }
    return 0;
  }
  const ModelPreset* p = find_preset(preset);
  if (!p)
    return report_error("mkmodel", Status(StatusCode::kInvalidArgument,
                                          fmt::format("unknown preset '{}' (presets: {})", preset, names)));
  MkModelOptions opt;
  if (!parse_mk_type(type_s, &opt.type))
    return report_error("mkmodel", Status(StatusCode::kInvalidArgument,
                                          fmt::format("unknown --type '{}' (Q8_0, Q4_K_M, Q4_0, F16, BF16, F32, "
                                                      "MLX4, MLX8)", type_s)));
  if (plan_only) {
    std::map<std::string, std::pair<int, uint64_t>> by;
    for (const auto& t : plan_tensors(*p, opt.type)) {
      std::string shape;
      int64_t n = 1;
      for (int64_t d : t.ne) shape += (shape.empty() ? "" : ", ") + std::to_string(d), n *= d;
      std::printf("%-28s %-5s [%s]\n", t.name.c_str(), dtype_name(t.type), shape.c_str());
      auto& e = by[dtype_name(t.type)];
      e.first++;
      e.second += row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(n / t.ne[0]);
    }
    for (auto& [k, e] : by) std::printf("%s: %d tensors, %.2f MB\n", k.c_str(), e.first, e.second / 1048576.0);
    return 0;
  }
  if (out.empty()) return report_error("mkmodel", Status(StatusCode::kInvalidArgument, "no output: pass -o FILE.gguf"));
  opt.seed = seed;
  opt.tokenizer_json = tokenizer;
  opt.n_threads = threads;
  opt.progress = byte_progress("writing " + out, quiet, 0);
  opt.output.overwrite = force;
  opt.output.option = "-o";
  opt.output.force_flag = "--force";
  auto r = make_random_model(*p, opt, out);
  opt.progress = nullptr;  // wipes the bar (if still drawn: a failure) before the result line
  if (!r.ok()) return report_error("mkmodel", r.status());
  std::printf("%s: %s %s, %.2f M parameters, %.2f MB, tokenizer %s (%lld tokens), %.1f s\n", out.c_str(), p->name.c_str(),
              mk_type_name(opt.type), r->n_params / 1e6, r->file_bytes / 1048576.0, r->tokenizer_source.c_str(),
              (long long)r->n_tokens_real, r->seconds);
  return 0;
}

}  // namespace laya::cli
