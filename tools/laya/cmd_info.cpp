// laya info -m MODEL: architecture, parameters, tensor types, context, memory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <map>

#include "cli_util.h"
#include "model/model.h"

namespace laya::cli {

namespace {

// What of its family the model uses: the architecture's block, and the
// optional parts and multipliers this file has.
std::string family_use(const Model& m) {
  const HParams& h = m.hparams();
  const TensorFlags& f = m.flags();
  std::string s = m.arch().block;
  if (f.qkv_bias && !m.arch().qkv_bias) s += "; biases present";
  if (f.qk_norm && !m.arch().qk_norm) s += "; q/k norms present";
  if (h.embd_scale != 1.0f) s += fmt::format("; embeddings ×{:g}", h.embd_scale);
  if (h.attn_scale > 0.0f) s += fmt::format("; attention scale {:g}", h.attn_scale);
  if (h.residual_scale != 1.0f) s += fmt::format("; residual ×{:g}", h.residual_scale);
  if (h.logit_scale != 1.0f) s += fmt::format("; logits ÷{:g}", h.logit_scale);
  if (h.sliding_window > 0) {
    int64_t local = 0;
    for (int64_t il = 0; il < h.n_layer; ++il) local += h.window(il) > 0;
    s += fmt::format("; sliding window {} on {} of {} layers", h.sliding_window, local, h.n_layer);
    if (h.rope_theta_local > 0) s += fmt::format(" (their RoPE base {:g})", h.rope_theta_local);
  }
  if (h.attn_softcap > 0) s += fmt::format("; attention scores soft-capped at {:g}", h.attn_softcap);
  if (h.final_softcap > 0) s += fmt::format("; logits soft-capped at {:g}", h.final_softcap);
  return s;
}

}  // namespace

int cmd_info(int argc, char** argv) {
  CLI::App app{"Show what a model file holds and what running it needs", "laya info"};
  app.footer("Example: laya info -m model.gguf");
  std::string model_path = default_model_path();
  int64_t n_ctx = 0;
  bool tensors = false;
  app.add_option("-m,--model", model_path, "a .gguf file or a Hugging Face / MLX folder");
  app.add_option("-c,--ctx", n_ctx, "context length for the memory estimate (default: min(training, 4096))")
      ->transform(int_in(1, int64_t{1} << 24));  // the engine's own bound (Engine::create)
  app.add_flag("--tensors", tensors, "list every tensor");
  if (auto rc = parse_args(app, argc, argv, "info")) return *rc;
  if (model_path.empty()) return report_error("info", Status(StatusCode::kInvalidArgument, "no model: pass -m MODEL"));
  auto m = Model::load(model_path);
  if (!m.ok()) return report_error("info", m.status());
  const Model& model = **m;
  const HParams& h = model.hparams();
  if (n_ctx <= 0) n_ctx = std::min<int64_t>(h.n_ctx_train, 4096);
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  for (const auto& t : model.all_tensors()) {
    auto& e = by_type[dtype_name(t.type)];
    e.first++;
    e.second += t.total_bytes();
  }
  const double kv_mb_f32 = 2.0 * h.n_layer * n_ctx * h.kv_dim() * 4 / 1048576.0;
  std::printf("model:         %s (%s)\n", model.path().c_str(), model.format() == ModelFormat::kGguf ? "GGUF" : "Hugging Face folder");
  std::printf("architecture:  %s\n", h.arch.c_str());
  std::printf("block:         %s\n", family_use(model).c_str());
  std::printf("parameters:    %llu (%.2f M)\n", static_cast<unsigned long long>(model.n_params()), model.n_params() / 1e6);
  std::printf("layers:        %lld, hidden %lld, ffn %lld, heads %lld (kv %lld, head_dim %lld)\n",
              static_cast<long long>(h.n_layer), static_cast<long long>(h.n_embd), static_cast<long long>(h.n_ff),
              static_cast<long long>(h.n_head), static_cast<long long>(h.n_head_kv), static_cast<long long>(h.head_dim));
  std::printf("vocabulary:    %lld (bos %d, eos %d)%s\n", static_cast<long long>(h.n_vocab), h.bos_id, h.eos_id,
              h.tied_embeddings ? ", tied embeddings" : "");
  std::printf("context:       %lld trained; rope theta %g%s, eps %g\n", static_cast<long long>(h.n_ctx_train), h.rope_theta,
              h.rope_freq_factors.empty() ? "" : " (scaled)", static_cast<double>(h.rms_eps));
  if (model.mlx_quant().present) std::printf("quantization:  %s\n", model.mlx_quant().describe().c_str());
  std::printf("tensor types: ");
  for (auto& [name, e] : by_type) std::printf(" %s×%d (%.2f MB)", name.c_str(), e.first, e.second / 1048576.0);
  std::printf("\n");
  std::printf("memory:        weights %.2f MB (mapped), KV cache %.2f MB at %lld tokens (F32; F16 halves it)%s\n",
              model.weight_bytes() / 1048576.0, kv_mb_f32, static_cast<long long>(n_ctx),
              h.n_ctx_train > 0 && n_ctx > h.n_ctx_train ? " (past the trained context)" : "");
  if (h.n_ctx_train > 0 && n_ctx > h.n_ctx_train)
    warn("info", fmt::format("-c {} is past the trained context of {} ({} tokens); the estimate is for {} tokens", n_ctx,
                             model_path, h.n_ctx_train, n_ctx));
  if (tensors) {
    for (const auto& t : model.all_tensors())
      std::printf("  %-32s %-5s %s%s\n", t.name.c_str(), dtype_name(t.type), t.shape_string().c_str(),
                  t.groups.size ? fmt::format(" group {}, scales {}", t.groups.size, dtype_name(t.groups.type)).c_str()
                                : "");
  }
  return 0;
}

}  // namespace laya::cli
