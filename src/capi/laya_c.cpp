// The C API (include/laya/laya.h) over the C++ engine. No exception or
// error escapes: every entry point runs inside guarded(), and every failure
// becomes a laya_status plus a thread-local message.
//
// Handles: each starts with a 64-bit tag naming its type, checked on every
// call (a NULL, a handle of another type or a pointer that is no handle is
// LAYA_INVALID_ARGUMENT); free() overwrites it with its complement. A
// sequence records its engine through a weak reference to a token only the
// engine handle owns: the owner is compared by identity (never reused while
// the sequence lives) and the token expires when laya_engine_free() runs, so
// "another engine" and "its engine was freed" are told apart without touching
// freed memory. A session owns references to its engine and tokenizer.
#include "laya/laya.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "engine/engine.h"
#include "session/model_slot.h"
#include "session/session.h"
#include "session/session_store.h"
#include "tokenizer/tokenizer.h"

namespace {

// "laya.mdl", "laya.eng", ... as little-endian bytes; a freed handle holds ~tag.
constexpr uint64_t kTagModel = 0x6c646d2e6179616cULL;
constexpr uint64_t kTagEngine = 0x676e652e6179616cULL;
constexpr uint64_t kTagSequence = 0x7165732e6179616cULL;
constexpr uint64_t kTagTokenizer = 0x6b6f742e6179616cULL;
constexpr uint64_t kTagSession = 0x7373732e6179616cULL;
constexpr uint64_t kTagSlot = 0x746c732e6179616cULL;

// No buffer is larger than PTRDIFF_MAX bytes: a larger count cannot describe
// the caller's memory (and would overflow the byte arithmetic).
constexpr size_t kMaxBytes = static_cast<size_t>(PTRDIFF_MAX);
constexpr int64_t kMaxIds = static_cast<int64_t>(kMaxBytes / sizeof(int32_t));
// A suggest deadline past this (~11.6 days) is the same as none; clamping
// keeps the nanosecond clock arithmetic far from overflow (and +inf finite).
constexpr double kMaxDeadlineMs = 1e9;

}  // namespace

struct laya_model {
  uint64_t tag = kTagModel;
  std::shared_ptr<const laya::Model> m;
};
struct laya_engine {
  uint64_t tag = kTagEngine;
  std::shared_ptr<laya::Engine> e;             // shared with the engine's sessions
  std::shared_ptr<const char> life = std::make_shared<const char>('e');  // only this handle owns it
};
struct laya_sequence {
  uint64_t tag = kTagSequence;
  std::weak_ptr<const char> engine;  // the life token of the engine that made it
  std::unique_ptr<laya::Sequence> s;
};
struct laya_tokenizer {
  uint64_t tag = kTagTokenizer;
  std::shared_ptr<const laya::tok::Tokenizer> t;
};
struct laya_slot {
  uint64_t tag = kTagSlot;
  std::shared_ptr<laya::ModelSlot> slot;  // shared with the sessions made on it
};
struct laya_session {
  uint64_t tag = kTagSession;
  std::shared_ptr<laya::ModelSlot> slot;  // slot sessions: outlives the session (declared first)
  std::shared_ptr<laya::Engine> engine;  // kept alive while the session lives (declared first: destroyed last)
  std::shared_ptr<const laya::tok::Tokenizer> tok;
  std::unique_ptr<laya::Session> s;
  laya::Suggestion last;  // reused by every suggest (no allocation once warm)
};

namespace {

thread_local std::string g_error;

// Never throws: when the message cannot be stored, it is left empty.
void set_error(std::string_view msg) noexcept {
  try {
    g_error.assign(msg.data(), msg.size());
  } catch (...) {
    g_error.clear();
  }
}

laya_status set(const laya::Status& st) {
  if (st.ok()) {
    g_error.clear();
    return LAYA_OK;
  }
  set_error(st.message());
  return static_cast<laya_status>(static_cast<int>(st.code()));
}

laya_status fail(laya_status code, std::string_view msg) {
  set_error(msg);
  return code;
}
laya_status invalid(std::string_view msg) { return fail(LAYA_INVALID_ARGUMENT, msg); }

// Runs f (which returns a laya_status) so that no exception crosses the C
// boundary: an allocation failure, or a resource the OS refused (a thread, a
// lock: std::system_error), becomes LAYA_OUT_OF_MEMORY; anything else
// LAYA_INTERNAL. `fn` names the call in the message.
template <typename F>
laya_status guarded(const char* fn, F&& f, const char* oom_hint = "") noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    set_error(fn);
    try {
      g_error += ": out of memory";
      g_error += oom_hint;
    } catch (...) {
    }
    return LAYA_OUT_OF_MEMORY;
  } catch (const std::system_error& ex) {
    try {
      set_error(fmt::format("{}: the system refused a resource: {}", fn, ex.what()));
    } catch (...) {
      set_error(fn);
    }
    return LAYA_OUT_OF_MEMORY;
  } catch (const std::exception& ex) {
    try {
      set_error(fmt::format("{}: internal error: {}", fn, ex.what()));
    } catch (...) {
      set_error(fn);
    }
    return LAYA_INTERNAL;
  } catch (...) {
    set_error(fn);
    return LAYA_INTERNAL;
  }
}

uint64_t tag_of(const void* p) {
  uint64_t t;
  std::memcpy(&t, p, sizeof t);  // every handle starts with its tag
  return t;
}

const char* type_of_tag(uint64_t tag) {
  switch (tag) {
    case kTagModel: return "laya_model";
    case kTagEngine: return "laya_engine";
    case kTagSequence: return "laya_sequence";
    case kTagTokenizer: return "laya_tokenizer";
    case kTagSession: return "laya_session";
    case kTagSlot: return "laya_slot";
    default: return nullptr;
  }
}

// LAYA_OK when p is a live handle of the type `want`; else
// LAYA_INVALID_ARGUMENT naming the call, the argument and what it is.
laya_status check_handle(const void* p, uint64_t want, const char* fn, const char* arg) {
  const char* want_name = type_of_tag(want);
  if (!p) return invalid(fmt::format("{}: {} is NULL", fn, arg));
  const uint64_t t = tag_of(p);
  if (t == want) return LAYA_OK;
  if (t == ~want) return invalid(fmt::format("{}: {} is a {} that was already freed", fn, arg, want_name));
  if (const char* other = type_of_tag(t)) {
    return invalid(fmt::format("{}: {} is a {}, not a {}", fn, arg, other, want_name));
  }
  return invalid(fmt::format("{}: {} is not a {} (an uninitialized, foreign or freed pointer)", fn, arg, want_name));
}

#define LAYA_C_TRY(expr)                         \
  do {                                           \
    if (const laya_status _s = (expr); _s != LAYA_OK) return _s; \
  } while (0)

// The engine and the sequence are live handles and the sequence was made by
// this engine.
laya_status check_pair(const laya_engine* engine, const laya_sequence* seq, const char* fn) {
  LAYA_C_TRY(check_handle(engine, kTagEngine, fn, "engine"));
  LAYA_C_TRY(check_handle(seq, kTagSequence, fn, "seq"));
  const auto& a = seq->engine;
  const auto& b = engine->life;
  if (!a.owner_before(b) && !b.owner_before(a)) return LAYA_OK;
  if (a.expired()) {
    return invalid(fmt::format("{}: the sequence's engine was freed (a sequence is used only with the engine that "
                               "made it; free it and make a new one)",
                               fn));
  }
  return invalid(fmt::format("{}: the sequence belongs to another engine (a sequence is used only with the engine "
                             "that made it)",
                             fn));
}

// For the calls that return a value, not a status: true for a live handle of
// type `want` (else the message is set).
bool live(const void* p, uint64_t want, const char* fn, const char* arg) {
  try {
    return check_handle(p, want, fn, arg) == LAYA_OK;
  } catch (...) {  // the message's formatting ran out of memory
    set_error(fn);
    return false;
  }
}

}  // namespace

extern "C" {

const char* laya_last_error(void) { return g_error.c_str(); }

laya_status laya_model_load(const char* path, laya_model** out) {
  return guarded("laya_model_load", [&] {
    if (!path || !out) return invalid("laya_model_load: path and out must not be NULL");
    auto r = laya::Model::load(path);
    if (!r.ok()) return set(r.status());
    auto h = std::make_unique<laya_model>();
    h->m = std::shared_ptr<const laya::Model>(std::move(r).value());
    *out = h.release();
    return set(laya::Status::Ok());
  });
}

void laya_model_free(laya_model* model) {
  if (!model || !live(model, kTagModel, "laya_model_free", "model")) return;
  model->tag = ~kTagModel;
  delete model;
}

laya_status laya_engine_create(laya_model* model, int n_threads, int64_t n_ctx, laya_engine** out) {
  return guarded("laya_engine_create", [&] {
    LAYA_C_TRY(check_handle(model, kTagModel, "laya_engine_create", "model"));
    if (!out) return invalid("laya_engine_create: out is NULL");
    if (n_ctx < 0) {
      return invalid(fmt::format("laya_engine_create: n_ctx = {}: must be 0 (the model's default) or positive", n_ctx));
    }
    laya::EngineOptions o;
    o.n_threads = n_threads;
    o.n_ctx = n_ctx;
    auto r = laya::Engine::create(model->m, o);
    if (!r.ok()) return set(r.status());
    auto h = std::make_unique<laya_engine>();
    h->e = std::shared_ptr<laya::Engine>(std::move(r).value());
    *out = h.release();
    return set(laya::Status::Ok());
  }, " (a smaller n_ctx or fewer threads need less)");
}

void laya_engine_free(laya_engine* engine) {
  if (!engine || !live(engine, kTagEngine, "laya_engine_free", "engine")) return;
  engine->tag = ~kTagEngine;
  delete engine;  // expires its sequences' references; its sessions keep the engine itself
}

int64_t laya_engine_n_vocab(const laya_engine* engine) {
  return live(engine, kTagEngine, "laya_engine_n_vocab", "engine") ? engine->e->n_vocab() : 0;
}

int64_t laya_engine_n_ctx(const laya_engine* engine) {
  return live(engine, kTagEngine, "laya_engine_n_ctx", "engine") ? engine->e->options().n_ctx : 0;
}

const char* laya_engine_memory_lock_note(const laya_engine* engine) {
  return live(engine, kTagEngine, "laya_engine_memory_lock_note", "engine") ? engine->e->memory_lock_note().c_str()
                                                                            : "";
}

laya_status laya_slot_create(const char* path, int n_threads, int64_t n_ctx, laya_slot** out) {
  return guarded("laya_slot_create", [&] {
    if (!path) return invalid("laya_slot_create: path is NULL");
    if (!out) return invalid("laya_slot_create: out is NULL");
    if (n_ctx < 0) {
      return invalid(fmt::format("laya_slot_create: n_ctx = {}: must be 0 (the model's default) or positive", n_ctx));
    }
    laya::ModelSlotOptions o;
    o.engine.n_threads = n_threads;
    o.engine.n_ctx = n_ctx;
    auto r = laya::ModelSlot::create(path, o);
    if (!r.ok()) return set(r.status());
    auto h = std::make_unique<laya_slot>();
    h->slot = std::shared_ptr<laya::ModelSlot>(std::move(r).value());
    *out = h.release();
    return set(laya::Status::Ok());
  }, " (a smaller n_ctx or fewer threads need less)");
}

laya_status laya_slot_swap_model(laya_slot* slot, const char* path) {
  return guarded("laya_slot_swap_model", [&] {
    LAYA_C_TRY(check_handle(slot, kTagSlot, "laya_slot_swap_model", "slot"));
    if (!path) return invalid("laya_slot_swap_model: path is NULL (the current model keeps serving)");
    return set(slot->slot->swap_model(path));
  });
}

int64_t laya_slot_swaps(const laya_slot* slot) {
  return live(slot, kTagSlot, "laya_slot_swaps", "slot") ? slot->slot->swaps() : 0;
}

void laya_slot_free(laya_slot* slot) {
  if (!slot || !live(slot, kTagSlot, "laya_slot_free", "slot")) return;
  slot->tag = ~kTagSlot;
  delete slot;  // its sessions keep the ModelSlot itself
}

laya_status laya_sequence_new(laya_engine* engine, laya_sequence** out) {
  return guarded("laya_sequence_new", [&] {
    LAYA_C_TRY(check_handle(engine, kTagEngine, "laya_sequence_new", "engine"));
    if (!out) return invalid("laya_sequence_new: out is NULL");
    auto h = std::make_unique<laya_sequence>();
    h->engine = engine->life;
    h->s = engine->e->new_sequence();
    *out = h.release();
    return set(laya::Status::Ok());
  });
}

void laya_sequence_free(laya_sequence* seq) {
  if (!seq || !live(seq, kTagSequence, "laya_sequence_free", "seq")) return;
  seq->tag = ~kTagSequence;
  delete seq;  // its KV blocks go back to the pool, which it keeps alive
}

int64_t laya_sequence_n_past(const laya_sequence* seq) {
  return live(seq, kTagSequence, "laya_sequence_n_past", "seq") ? seq->s->n_past() : 0;
}

laya_status laya_prefill(laya_engine* engine, laya_sequence* seq, const int32_t* tokens, int64_t n, int64_t pos) {
  return guarded("laya_prefill", [&] {
    LAYA_C_TRY(check_pair(engine, seq, "laya_prefill"));
    if (n <= 0) return invalid(fmt::format("laya_prefill: n = {}: at least one token is needed", n));
    if (!tokens) return invalid("laya_prefill: tokens is NULL");
    const laya::Sequence& s = *seq->s;
    if (pos < 0 || pos > s.n_past()) {
      return fail(LAYA_OUT_OF_RANGE, fmt::format("laya_prefill: pos = {}: must be in [0, {}] (the tokens cached)", pos,
                                                 s.n_past()));
    }
    // pos is in [0, n_ctx]: n_ctx - pos cannot overflow, n is never added to it,
    // and the caller's buffer is not read before n is known to fit.
    if (n > s.n_ctx() - pos) {
      return fail(LAYA_OUT_OF_RANGE,
                  fmt::format("laya_prefill: {} tokens at position {} end past the context of {} tokens", n, pos,
                              s.n_ctx()));
    }
    return set(engine->e->prefill(*seq->s, std::span<const int32_t>(tokens, static_cast<size_t>(n)), pos));
  });
}

laya_status laya_decode(laya_engine* engine, laya_sequence* seq, int32_t token) {
  return guarded("laya_decode", [&] {
    LAYA_C_TRY(check_pair(engine, seq, "laya_decode"));
    return set(engine->e->decode(*seq->s, token));
  });
}

laya_status laya_truncate(laya_engine* engine, laya_sequence* seq, int64_t pos) {
  return guarded("laya_truncate", [&] {
    LAYA_C_TRY(check_pair(engine, seq, "laya_truncate"));
    return set(engine->e->truncate(*seq->s, pos));
  });
}

const float* laya_sequence_logits(const laya_sequence* seq) {
  return live(seq, kTagSequence, "laya_sequence_logits", "seq") ? seq->s->logits() : nullptr;
}

laya_status laya_tokenizer_from_model(const laya_model* model, laya_tokenizer** out) {
  return guarded("laya_tokenizer_from_model", [&] {
    LAYA_C_TRY(check_handle(model, kTagModel, "laya_tokenizer_from_model", "model"));
    if (!out) return invalid("laya_tokenizer_from_model: out is NULL");
    if (laya::Status st = model->m->check_files_unchanged(); !st.ok()) return set(st);  // GGUF metadata is mapped
    auto r = model->m->gguf_file() ? laya::tok::Tokenizer::from_gguf(*model->m->gguf_file())
                                   : laya::tok::Tokenizer::from_path(model->m->path());
    if (!r.ok()) return set(r.status());
    const std::string& path = model->m->path();
    const laya::Status fits =
        model->m->check_tokenizer_size(r.value()->n_vocab(), model->m->gguf_file() ? path : path + "/tokenizer.json");
    if (!fits.ok()) return set(fits);
    auto h = std::make_unique<laya_tokenizer>();
    h->t = std::shared_ptr<const laya::tok::Tokenizer>(std::move(r).value());
    *out = h.release();
    return set(laya::Status::Ok());
  });
}

void laya_tokenizer_free(laya_tokenizer* tok) {
  if (!tok || !live(tok, kTagTokenizer, "laya_tokenizer_free", "tok")) return;
  tok->tag = ~kTagTokenizer;
  delete tok;
}

laya_status laya_tokenize(const laya_tokenizer* tok, const char* text, size_t len, int parse_special, int add_bos,
                          int32_t* ids, int64_t cap, int64_t* n_out) {
  return guarded("laya_tokenize", [&] {
    LAYA_C_TRY(check_handle(tok, kTagTokenizer, "laya_tokenize", "tok"));
    if (!n_out) return invalid("laya_tokenize: n_out is NULL");
    if (len > kMaxBytes) return invalid(fmt::format("laya_tokenize: len = {} is larger than any buffer", len));
    if (!text && len > 0) return invalid(fmt::format("laya_tokenize: text is NULL and len = {}", len));
    if (cap < 0 || cap > kMaxIds) {
      return invalid(fmt::format("laya_tokenize: cap = {}: must be in [0, {}]", cap, kMaxIds));
    }
    if (!ids && cap > 0) return invalid(fmt::format("laya_tokenize: ids is NULL and cap = {}", cap));
    if (add_bos < -1 || add_bos > 1) {
      return invalid(fmt::format("laya_tokenize: add_bos = {}: must be 1, 0 or -1 (the tokenizer's default)", add_bos));
    }
    laya::tok::EncodeOptions o;
    o.parse_special = parse_special != 0;
    if (add_bos >= 0) o.add_bos = add_bos != 0;
    auto r = tok->t->encode(std::string_view(text ? text : "", len), o);
    if (!r.ok()) return set(r.status());
    const auto& v = r.value();
    *n_out = static_cast<int64_t>(v.size());
    if (*n_out > cap) {
      return fail(LAYA_OUT_OF_RANGE,
                  fmt::format("laya_tokenize: the text has {} ids, the buffer holds {}", v.size(), cap));
    }
    if (!v.empty()) std::memcpy(ids, v.data(), v.size() * sizeof(int32_t));
    return set(laya::Status::Ok());
  });
}

laya_status laya_detokenize(const laya_tokenizer* tok, const int32_t* ids, int64_t n, char* buf, size_t cap,
                            size_t* len_out) {
  return guarded("laya_detokenize", [&] {
    LAYA_C_TRY(check_handle(tok, kTagTokenizer, "laya_detokenize", "tok"));
    if (!len_out) return invalid("laya_detokenize: len_out is NULL");
    if (n < 0 || n > kMaxIds) return invalid(fmt::format("laya_detokenize: n = {}: must be in [0, {}]", n, kMaxIds));
    if (!ids && n > 0) return invalid(fmt::format("laya_detokenize: ids is NULL and n = {}", n));
    if (cap > kMaxBytes) return invalid(fmt::format("laya_detokenize: cap = {} is larger than any buffer", cap));
    if (!buf && cap > 0) return invalid(fmt::format("laya_detokenize: buf is NULL and cap = {}", cap));
    const int64_t nv = tok->t->n_vocab();
    for (int64_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] >= nv) {
        return invalid(
            fmt::format("laya_detokenize: id {} at index {} is out of range [0, {})", ids[i], i, nv));
      }
    }
    const std::string s = tok->t->decode(std::span<const int32_t>(ids, static_cast<size_t>(n)));
    *len_out = s.size();
    if (cap <= s.size()) {
      return fail(LAYA_OUT_OF_RANGE,
                  fmt::format("laya_detokenize: the text has {} bytes, the buffer holds {}", s.size(), cap));
    }
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = '\0';
    return set(laya::Status::Ok());
  });
}

laya_status laya_session_new(laya_engine* engine, const laya_tokenizer* tok, laya_session** out) {
  laya_session_options o;
  laya_session_options_default(&o);
  return laya_session_new_with_options(engine, tok, &o, out);
}

void laya_session_options_default(laya_session_options* opt) {
  if (!opt) return;
  const laya::SessionOptions d;
  opt->heal = d.heal ? 1 : 0;
  opt->fim = d.fim == laya::FimOrder::kSpm ? LAYA_FIM_SPM : d.fim == laya::FimOrder::kOff ? LAYA_FIM_OFF : LAYA_FIM_PSM;
  opt->fim_suffix_tokens = d.fim_suffix_tokens;
  opt->fim_suffix_lines = d.fim_suffix_lines;
  opt->context_tokens = d.context_tokens;
}

namespace {

// The C options into so, each checked (LAYA_INVALID_ARGUMENT naming the field).
laya_status session_options(const laya_session_options* opt, laya::SessionOptions* out) {
  laya::SessionOptions& so = *out;
  so.heal = opt->heal != 0;
  // Read as an integer: C may store any int in the enum, which C++ must not
  // load as a laya_fim_order outside its values.
  std::underlying_type_t<laya_fim_order> fim;
  std::memcpy(&fim, &opt->fim, sizeof fim);
  switch (fim) {
    case LAYA_FIM_PSM: so.fim = laya::FimOrder::kPsm; break;
    case LAYA_FIM_SPM: so.fim = laya::FimOrder::kSpm; break;
    case LAYA_FIM_OFF: so.fim = laya::FimOrder::kOff; break;
    default:
      return invalid(fmt::format(
          "laya_session_new: options.fim = {}: must be LAYA_FIM_PSM (0), LAYA_FIM_SPM (1) or LAYA_FIM_OFF (2)", fim));
  }
  if (opt->fim_suffix_tokens < 1 || opt->fim_suffix_tokens > 4096)
    return invalid("laya_session_new: options.fim_suffix_tokens must be in [1, 4096]");
  if (opt->fim_suffix_lines < 1) return invalid("laya_session_new: options.fim_suffix_lines must be >= 1");
  if (opt->context_tokens < 0) return invalid("laya_session_new: options.context_tokens must be >= 0");
  so.fim_suffix_tokens = opt->fim_suffix_tokens;
  so.fim_suffix_lines = opt->fim_suffix_lines;
  so.context_tokens = opt->context_tokens;
  return LAYA_OK;
}

}  // namespace

laya_status laya_session_new_with_options(laya_engine* engine, const laya_tokenizer* tok,
                                          const laya_session_options* opt, laya_session** out) {
  return guarded("laya_session_new", [&] {
    LAYA_C_TRY(check_handle(engine, kTagEngine, "laya_session_new", "engine"));
    LAYA_C_TRY(check_handle(tok, kTagTokenizer, "laya_session_new", "tok"));
    if (!opt || !out) return invalid("laya_session_new: options and out must not be NULL");
    laya::SessionOptions so;
    LAYA_C_TRY(session_options(opt, &so));
    auto h = std::make_unique<laya_session>();
    h->engine = engine->e;
    h->tok = tok->t;
    h->s = std::make_unique<laya::Session>(*h->engine, *h->tok, so);
    *out = h.release();
    return set(laya::Status::Ok());
  });
}

laya_status laya_session_new_on_slot(laya_slot* slot, const laya_session_options* opt, laya_session** out) {
  return guarded("laya_session_new_on_slot", [&] {
    LAYA_C_TRY(check_handle(slot, kTagSlot, "laya_session_new_on_slot", "slot"));
    if (!out) return invalid("laya_session_new_on_slot: out is NULL");
    laya::SessionOptions so;
    if (opt) LAYA_C_TRY(session_options(opt, &so));
    auto h = std::make_unique<laya_session>();
    h->slot = slot->slot;
    h->s = std::make_unique<laya::Session>(*h->slot, so);
    *out = h.release();
    return set(laya::Status::Ok());
  });
}

void laya_session_free(laya_session* session) {
  if (!session || !live(session, kTagSession, "laya_session_free", "session")) return;
  session->tag = ~kTagSession;
  delete session;
}

laya_status laya_session_set_text(laya_session* session, const char* text, size_t len) {
  return guarded("laya_session_set_text", [&] {
    LAYA_C_TRY(check_handle(session, kTagSession, "laya_session_set_text", "session"));
    if (len > kMaxBytes) return invalid(fmt::format("laya_session_set_text: len = {} is larger than any buffer", len));
    if (!text && len > 0) return invalid(fmt::format("laya_session_set_text: text is NULL and len = {}", len));
    return set(session->s->set_text(std::string_view(text ? text : "", len)));
  });
}

laya_status laya_session_edit(laya_session* session, size_t pos, size_t n_deleted, const char* inserted, size_t len) {
  return guarded("laya_session_edit", [&] {
    LAYA_C_TRY(check_handle(session, kTagSession, "laya_session_edit", "session"));
    if (len > kMaxBytes) return invalid(fmt::format("laya_session_edit: len = {} is larger than any buffer", len));
    if (!inserted && len > 0) return invalid(fmt::format("laya_session_edit: inserted is NULL and len = {}", len));
    return set(session->s->edit(pos, n_deleted, std::string_view(inserted ? inserted : "", len)));
  });
}

laya_status laya_session_move(laya_session* session, size_t pos) {
  return guarded("laya_session_move", [&] {
    LAYA_C_TRY(check_handle(session, kTagSession, "laya_session_move", "session"));
    return set(session->s->move(pos));
  });
}

laya_status laya_session_accept(laya_session* session, size_t n_chars) {
  return guarded("laya_session_accept", [&] {
    LAYA_C_TRY(check_handle(session, kTagSession, "laya_session_accept", "session"));
    return set(session->s->accept(n_chars));
  });
}

laya_status laya_session_suggest(laya_session* session, int max_tokens, int single_line, double deadline_ms,
                                 char* buf, size_t cap, size_t* len_out) {
  return guarded("laya_session_suggest", [&] {
    LAYA_C_TRY(check_handle(session, kTagSession, "laya_session_suggest", "session"));
    if (!len_out) return invalid("laya_session_suggest: len_out is NULL");
    if (cap > kMaxBytes) return invalid(fmt::format("laya_session_suggest: cap = {} is larger than any buffer", cap));
    if (!buf && cap > 0) return invalid(fmt::format("laya_session_suggest: buf is NULL and cap = {}", cap));
    laya::SuggestOptions o;
    o.max_tokens = max_tokens;
    o.single_line = single_line != 0;
    if (deadline_ms > 0) o.deadline = std::chrono::duration<double, std::milli>(std::min(deadline_ms, kMaxDeadlineMs));
    laya::Suggestion* r = &session->last;
    if (laya::Status st = session->s->suggest_into(o, r); !st.ok()) return set(st);
    const std::string& text = r->text;
    *len_out = text.size();
    if (cap <= text.size()) {
      return fail(LAYA_OUT_OF_RANGE, fmt::format("laya_session_suggest: the suggestion has {} bytes, the buffer holds {}",
                                                 text.size(), cap));
    }
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    if (r->cancelled) return fail(LAYA_CANCELLED, "laya_session_suggest: cancelled (the buffer holds what was made)");
    return set(laya::Status::Ok());
  });
}

void laya_session_cancel(laya_session* session) {
  if (!session || !live(session, kTagSession, "laya_session_cancel", "session")) return;
  session->s->cancel();
}

laya_status laya_session_save(const laya_session* session, const char* path) {
  return guarded("laya_session_save", [&] {
    LAYA_C_TRY(check_handle(session, kTagSession, "laya_session_save", "session"));
    if (!path) return invalid("laya_session_save: path is NULL");
    return set(laya::save_session(*session->s, path));
  });
}

laya_status laya_session_load(laya_engine* engine, const laya_tokenizer* tok, const char* path, laya_session** out) {
  return guarded("laya_session_load", [&] {
    if (out) *out = nullptr;
    LAYA_C_TRY(check_handle(engine, kTagEngine, "laya_session_load", "engine"));
    LAYA_C_TRY(check_handle(tok, kTagTokenizer, "laya_session_load", "tok"));
    if (!path || !out) return invalid("laya_session_load: path and out must not be NULL");
    laya::LoadOptions lo;
    lo.text_fallback = false;  // the C caller gets the reason and makes the session from its text itself
    auto r = laya::load_sessions(*engine->e, *tok->t, path, lo);
    if (!r.ok()) return set(r.status());
    if (r->sessions.size() != 1) {
      return invalid(fmt::format("laya_session_load: {} holds {} sessions; this call reads a file of one", path,
                                 r->sessions.size()));
    }
    auto h = std::make_unique<laya_session>();
    h->engine = engine->e;
    h->tok = tok->t;
    h->s = std::move(r->sessions[0]);
    *out = h.release();
    return set(laya::Status::Ok());
  });
}

}  // extern "C"
