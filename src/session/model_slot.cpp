#include "session/model_slot.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <utility>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "session/session.h"

namespace laya {

namespace {

// Ids of bundles: unique in the process, so a session never takes a new
// bundle for its old one (an address could be reused after a free).
std::atomic<uint64_t> g_next_bundle_id{1};

// What the probe encodes, decodes and runs. ASCII only: every vocabulary of
// a supported tokenizer (byte-level, or SentencePiece with byte fallback)
// represents it, and a tiny test vocabulary without byte fallback still
// round-trips it; code and prose, as the engine serves.
constexpr std::string_view kProbeText = "def probe(x):\n    return x + 1  # The quick brown fox.\n";

std::string canonical_of(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

Status step_error(const char* step, const Status& st) {
  return Status(st.code(), fmt::format("{}: {}", step, st.message()));
}

}  // namespace

Result<std::shared_ptr<const ModelBundle>> ModelSlot::load(const std::string& path, const ModelSlotOptions& opt,
                                                           bool background) {
  const auto t0 = std::chrono::steady_clock::now();
  auto b = std::make_shared<ModelBundle>();
  b->path = path;
  b->canonical = canonical_of(path);
  auto m = Model::load(path);  // shapes against the metadata: model/validate.h
  if (!m.ok()) return step_error("load", m.status());
  b->model = std::shared_ptr<const Model>(std::move(m).value());
  const Model& model = *b->model;
  auto t = model.gguf_file() ? tok::Tokenizer::from_gguf(*model.gguf_file()) : tok::Tokenizer::from_path(path);
  if (!t.ok()) return step_error("tokenizer", t.status());
  if (Status st = model.check_tokenizer_size(t.value()->n_vocab(), model.gguf_file() ? path : path + "/tokenizer.json");
      !st.ok())
    return step_error("tokenizer", st);
  b->tokenizer = std::shared_ptr<const tok::Tokenizer>(std::move(t).value());
  // The file must still be what was parsed: a truncation during the load
  // read zeros (MappedFile::check_unchanged), and so checks after each step
  // that reads it; Engine::create checks after packing.
  if (Status st = model.check_files_unchanged(); !st.ok()) return step_error("load", st);
  EngineOptions eo = opt.engine;
  eo.background = background;
  const int64_t train = model.hparams().n_ctx_train;
  if (eo.n_ctx > 0 && train > 0) eo.n_ctx = std::min(eo.n_ctx, train);
  auto e = Engine::create(b->model, eo);
  if (!e.ok()) return step_error("prepare", e.status());
  b->engine = std::shared_ptr<Engine>(std::move(e).value());
  (void)b->tokenizer->prefix_index();  // built here, not by the first session's first keystroke
  if (Status st = probe(*b); !st.ok()) return step_error("probe", st);
  if (Status st = model.check_files_unchanged(); !st.ok()) return step_error("probe", st);
  b->id = g_next_bundle_id.fetch_add(1);
  b->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return std::shared_ptr<const ModelBundle>(std::move(b));
}

Status ModelSlot::probe(const ModelBundle& b) {
  tok::EncodeOptions eo;
  eo.add_bos = false;
  LAYA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, b.tokenizer->encode(kProbeText, eo));
  const std::string back = b.tokenizer->decode(ids);
  if (back != kProbeText) {
    return Status(StatusCode::kCorrupt,
                  fmt::format("{}: the tokenizer does not round-trip the probe text: {} ids decode to {} bytes "
                              "(expected the {} bytes encoded)",
                              b.path, ids.size(), back.size(), kProbeText.size()));
  }
  if (b.tokenizer->add_bos_default() && b.tokenizer->bos_id() >= 0) ids.insert(ids.begin(), b.tokenizer->bos_id());
  Engine& eng = *b.engine;
  if (static_cast<int64_t>(ids.size()) > eng.options().n_ctx) ids.resize(static_cast<size_t>(eng.options().n_ctx));
  std::unique_ptr<Sequence> seq = eng.new_sequence();
  LAYA_TRY(eng.prefill(*seq, ids, 0));
  const float* lg = seq->logits();
  for (int64_t i = 0; i < eng.n_vocab(); ++i) {
    if (!std::isfinite(lg[i])) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: the probe prompt ({} tokens) gives a logit of {} for token {} (expected finite "
                                "values: a weight is NaN or infinite, or the file is damaged)",
                                b.path, ids.size(), lg[i], i));
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<ModelSlot>> ModelSlot::create(const std::string& path, const ModelSlotOptions& opt) {
  auto b = load(path, opt);
  if (!b.ok()) return Status(b.status().code(), fmt::format("{}: {}", path, b.status().message()));
  std::unique_ptr<ModelSlot> s(new ModelSlot(opt));
  s->current_ = std::move(b).value();
  s->current_id_.store(s->current_->id, std::memory_order_release);
  return s;
}

std::shared_ptr<const ModelBundle> ModelSlot::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

bool ModelSlot::keeps(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return (current_ && current_->id == id) || (previous_ && previous_->id == id);
}

void ModelSlot::publish(std::shared_ptr<const ModelBundle> next) {
  std::shared_ptr<const ModelBundle> dropped;  // freed after the lock, on this (the swapping) thread
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped = std::move(previous_);
    previous_ = std::move(current_);
    current_ = std::move(next);
    if (!opt_.keep_previous) dropped = std::move(previous_);
    current_id_.store(current_->id, std::memory_order_release);
  }
  swaps_.fetch_add(1, std::memory_order_relaxed);
}

Status ModelSlot::swap_model(const std::string& path) {
  std::lock_guard<std::mutex> swap_lock(swap_mu_);
  const Status st = swap_locked(path);
  // A failed load (its packed weights, KV pool, scratch) or the bundle the
  // switch dropped was freed above; glibc keeps such large freed blocks in
  // its heaps (its mmap threshold grows after the first large free), so
  // without this each swap could leave a model's worth of resident memory
  // behind (ModelSwap.RepeatedSwapsAndFailuresDoNotGrowMemory: 112 -> 132 MB
  // over ten swaps and ten failed ones without it, within 5 % with it).
  // Given back here, on the swapping thread, never on a keystroke's.
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  return st;
}

Status ModelSlot::swap_locked(const std::string& path) {
  const std::string canon = canonical_of(path);
  std::shared_ptr<const ModelBundle> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_->canonical == canon && current_->model->check_files_unchanged().ok()) return Status::Ok();
    if (previous_ && previous_->canonical == canon) back = previous_;
  }
  // The kept bundle is taken back only when its file is the one on disk now
  // (a model rewritten under the same name is loaded again).
  if (back && back->model->check_files_unchanged().ok()) {
    // No session computes on the kept bundle now (each rebinds to the
    // current one at its next suggest), so its width can be lent to this thread.
    if (opt_.background) back->engine->set_background(true);
    prewarm(back);
    back->engine->set_background(false);
    publish(std::move(back));
    return Status::Ok();
  }
  back.reset();
  auto b = load(path, opt_, opt_.background);
  if (!b.ok()) {
    return Status(b.status().code(), fmt::format("swap to {}: {} (the current model, {}, keeps serving)", path,
                                                 b.status().message(), current()->path));
  }
  prewarm(b.value());
  // Last look before the switch: a file shrunk or rewritten during the
  // prewarm would otherwise become the serving model and fail every request.
  if (Status st = b.value()->model->check_files_unchanged(); !st.ok())
    return Status(st.code(), fmt::format("swap to {}: {} (the current model, {}, keeps serving)", path, st.message(),
                                         current()->path));
  // Full width from the first keystroke on: its workers start then, on that
  // keystroke's thread, at its priority (ThreadPool's solo start).
  b.value()->engine->set_background(false);
  publish(std::move(b).value());
  return Status::Ok();
}

void ModelSlot::attach(SlotClient* s) {
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.push_back(s);
}

void ModelSlot::detach(SlotClient* s) {
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.erase(std::remove(sessions_.begin(), sessions_.end(), s), sessions_.end());
}

// The sessions used last, most recent first; each computes its prompt on
// `next` (SlotClient::prewarm_for). sessions_mu_ is held throughout so none is
// destroyed meanwhile.
void ModelSlot::prewarm(const std::shared_ptr<const ModelBundle>& next) {
  if (opt_.prewarm_sessions <= 0) return;
  std::lock_guard<std::mutex> lock(sessions_mu_);
  std::vector<std::pair<int64_t, SlotClient*>> used;
  for (SlotClient* s : sessions_) {
    const int64_t t = s->last_used_ns();
    if (t > 0) used.emplace_back(t, s);
  }
  std::sort(used.begin(), used.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const size_t n = std::min(used.size(), static_cast<size_t>(opt_.prewarm_sessions));
  for (size_t i = 0; i < n; ++i) used[i].second->prewarm_for(next);
}

int64_t kv_contexts(const ModelBundle& b) {
  const Engine& e = *b.engine;
  const int64_t trained = e.hparams().n_ctx_train > 0 ? e.hparams().n_ctx_train : 4096;
  const int64_t n_ctx = e.options().n_ctx > 0 ? e.options().n_ctx : std::min<int64_t>(trained, 4096);  // EngineOptions::n_ctx's default
  const int64_t positions = e.kv_pool().n_blocks() * e.kv_pool().layout().block_pos;
  return std::clamp<int64_t>(positions / n_ctx, 1, 1024);
}

}  // namespace laya
