// laya logits -m MODEL --tokens 1,2,3 [--all-positions] [--incremental] -o out.npy
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "cli_parse.h"
#include "cli_util.h"
#include "engine/engine.h"
#include "outputs.h"

namespace laya::cli {

int cmd_logits(int argc, char** argv) {
  CLI::App app{"Write the logits of a token sequence to a float32 .npy file", "laya logits"};
  app.footer("Example: laya logits -m model.gguf --tokens 1,2,3 -o logits.npy");
  std::string tokens_s, out_path;
  bool all = false, incremental = false, precise = false;
  app.add_option("--tokens", tokens_s, "comma-separated token ids")->required();
  app.add_option("-o,--output", out_path, "output .npy path")->required();
  app.add_flag("--all-positions", all, "write [n_tokens, n_vocab] instead of the last position's [n_vocab]");
  app.add_flag("--incremental", incremental, "feed the tokens one at a time through the KV cache");
  app.add_flag("--precise", precise, "reference mode: float32 KV cache and activations");
  EngineFlags flags;
  flags.add_to(app, false);
  if (auto rc = parse_args(app, argc, argv, "logits")) return *rc;
  // Refused before any work: -o naming the model, or a file that is not a .npy.
  const OutputOptions out_opt = npy_output("-o", {flags.model_path});
  if (Status st = check_output(out_path, out_opt); !st.ok()) return report_error("logits", st);
  // Ids against the vocabulary are checked by the engine (it names the index).
  auto ids = parse_id_list("--tokens", tokens_s);
  if (!ids.ok()) return report_error("logits", ids.status());
  auto m = flags.load_model();
  if (!m.ok()) return report_error("logits", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  if (Status st = check_positions(*model, flags.model_path, static_cast<int64_t>(ids->size()),
                                  fmt::format("--tokens ({} ids)", ids->size()));
      !st.ok())
    return report_error("logits", st);
  EngineOptions eo;
  flags.apply(&eo);
  eo.n_ctx = std::max<int64_t>(static_cast<int64_t>(ids->size()), std::min<int64_t>(model->hparams().n_ctx_train, 4096));
  eo.kv_type = precise ? DType::F32 : EngineOptions{}.kv_type;
  if (precise) eo.pack_weights = false;  // float32 activations in every product
  auto e = Engine::create(model, eo);
  if (!e.ok()) return report_error("logits", e.status());
  Engine& eng = **e;
  auto seq = eng.new_sequence();
  warn("logits", eng.memory_lock_note());
  const int64_t n = static_cast<int64_t>(ids->size()), nv = eng.n_vocab();
  std::vector<float> out(static_cast<size_t>(all ? n * nv : nv));
  if (incremental) {
    for (int64_t i = 0; i < n; ++i) {
      Status st = eng.prefill(*seq, std::span<const int32_t>(ids->data() + i, 1), i);
      if (!st.ok()) return report_error("logits", st);
      if (all) std::copy(seq->logits(), seq->logits() + nv, out.begin() + i * nv);
    }
    if (!all) std::copy(seq->logits(), seq->logits() + nv, out.begin());
  } else {
    Status st = eng.prefill(*seq, *ids, 0, all ? out.data() : nullptr);
    if (!st.ok()) return report_error("logits", st);
    if (!all) std::copy(seq->logits(), seq->logits() + nv, out.begin());
  }
  std::vector<int64_t> shape = all ? std::vector<int64_t>{n, nv} : std::vector<int64_t>{nv};
  Status st = write_npy(out_path, out.data(), shape, out_opt);
  if (!st.ok()) return report_error("logits", st);
  return 0;
}

}  // namespace laya::cli
