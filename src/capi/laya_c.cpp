// The C API (include/laya/laya.h) over the C++ engine. No exception or
// error escapes: every failure becomes a laya_status plus a thread-local
// message.
#include "laya/laya.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "engine/engine.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

struct laya_model {
  std::shared_ptr<const laya::Model> m;
};
struct laya_engine {
  std::unique_ptr<laya::Engine> e;
};
struct laya_sequence {
  std::unique_ptr<laya::Sequence> s;
};
struct laya_tokenizer {
  std::unique_ptr<laya::tok::Tokenizer> t;
};
struct laya_session {
  std::unique_ptr<laya::Session> s;
  laya::Suggestion last;  // reused by every suggest (no allocation once warm)
};

namespace {

thread_local std::string g_error;

laya_status set(const laya::Status& st) {
  if (st.ok()) {
    g_error.clear();
    return LAYA_OK;
  }
  g_error = st.message();
  return static_cast<laya_status>(static_cast<int>(st.code()));
}

laya_status invalid(const char* what) {
  g_error = what;
  return LAYA_INVALID_ARGUMENT;
}

// Runs f (which returns a laya_status) so that no exception crosses the C
// boundary: an allocation failure becomes LAYA_OUT_OF_MEMORY with `oom` as the
// message, anything else LAYA_INTERNAL.
template <typename F>
laya_status guarded(const char* oom, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    g_error = oom;
    return LAYA_OUT_OF_MEMORY;
  } catch (const std::exception& ex) {
    g_error = std::string("internal error: ") + ex.what();
    return LAYA_INTERNAL;
  }
}

}  // namespace

extern "C" {

const char* laya_last_error(void) { return g_error.c_str(); }

laya_status laya_model_load(const char* path, laya_model** out) {
  if (!path || !out) return invalid("laya_model_load: path and out must not be NULL");
  return guarded("laya_model_load: out of memory", [&] {
    auto r = laya::Model::load(path);
    if (!r.ok()) return set(r.status());
    *out = new laya_model{std::shared_ptr<const laya::Model>(std::move(r).value())};
    return set(laya::Status::Ok());
  });
}

void laya_model_free(laya_model* model) { delete model; }

laya_status laya_engine_create(laya_model* model, int n_threads, int64_t n_ctx, laya_engine** out) {
  if (!model || !out) return invalid("laya_engine_create: model and out must not be NULL");
  return guarded("laya_engine_create: out of memory (lower n_ctx?)", [&] {
    laya::EngineOptions o;
    o.n_threads = n_threads;
    o.n_ctx = n_ctx;
    auto r = laya::Engine::create(model->m, o);
    if (!r.ok()) return set(r.status());
    *out = new laya_engine{std::move(r).value()};
    return set(laya::Status::Ok());
  });
}

void laya_engine_free(laya_engine* engine) { delete engine; }
int64_t laya_engine_n_vocab(const laya_engine* engine) { return engine ? engine->e->n_vocab() : 0; }
int64_t laya_engine_n_ctx(const laya_engine* engine) { return engine ? engine->e->options().n_ctx : 0; }

const char* laya_engine_memory_lock_note(const laya_engine* engine) {
  return engine ? engine->e->memory_lock_note().c_str() : "";
}

laya_status laya_sequence_new(laya_engine* engine, laya_sequence** out) {
  if (!engine || !out) return invalid("laya_sequence_new: engine and out must not be NULL");
  return guarded("laya_sequence_new: out of memory", [&] {
    *out = new laya_sequence{engine->e->new_sequence()};
    return set(laya::Status::Ok());
  });
}

void laya_sequence_free(laya_sequence* seq) { delete seq; }
int64_t laya_sequence_n_past(const laya_sequence* seq) { return seq ? seq->s->n_past() : 0; }

laya_status laya_prefill(laya_engine* engine, laya_sequence* seq, const int32_t* tokens, int64_t n, int64_t pos) {
  if (!engine || !seq || (!tokens && n > 0) || n < 0) return invalid("laya_prefill: NULL handle or negative count");
  return set(engine->e->prefill(*seq->s, std::span<const int32_t>(tokens, static_cast<size_t>(n)), pos));
}

laya_status laya_decode(laya_engine* engine, laya_sequence* seq, int32_t token) {
  if (!engine || !seq) return invalid("laya_decode: NULL handle");
  return set(engine->e->decode(*seq->s, token));
}

laya_status laya_truncate(laya_engine* engine, laya_sequence* seq, int64_t pos) {
  if (!engine || !seq) return invalid("laya_truncate: NULL handle");
  return set(engine->e->truncate(*seq->s, pos));
}

const float* laya_sequence_logits(const laya_sequence* seq) { return seq ? seq->s->logits() : nullptr; }

laya_status laya_tokenizer_from_model(const laya_model* model, laya_tokenizer** out) {
  if (!model || !out) return invalid("laya_tokenizer_from_model: model and out must not be NULL");
  return guarded("laya_tokenizer_from_model: out of memory", [&] {
    auto r = model->m->gguf_file() ? laya::tok::Tokenizer::from_gguf(*model->m->gguf_file())
                                   : laya::tok::Tokenizer::from_path(model->m->path());
    if (!r.ok()) return set(r.status());
    const std::string& path = model->m->path();
    const laya::Status fits =
        model->m->check_tokenizer_size(r.value()->n_vocab(), model->m->gguf_file() ? path : path + "/tokenizer.json");
    if (!fits.ok()) return set(fits);
    *out = new laya_tokenizer{std::move(r).value()};
    return set(laya::Status::Ok());
  });
}

void laya_tokenizer_free(laya_tokenizer* tok) { delete tok; }

laya_status laya_tokenize(const laya_tokenizer* tok, const char* text, size_t len, int parse_special, int add_bos,
                          int32_t* ids, int64_t cap, int64_t* n_out) {
  if (!tok || (!text && len > 0) || !n_out || (!ids && cap > 0) || cap < 0) return invalid("laya_tokenize: bad argument");
  return guarded("laya_tokenize: out of memory", [&] {
    laya::tok::EncodeOptions o;
    o.parse_special = parse_special != 0;
    if (add_bos >= 0) o.add_bos = add_bos != 0;
    auto r = tok->t->encode(std::string_view(text ? text : "", len), o);
    if (!r.ok()) return set(r.status());
    const auto& v = r.value();
    *n_out = static_cast<int64_t>(v.size());
    if (*n_out > cap) {
      g_error = "laya_tokenize: the text has " + std::to_string(v.size()) + " ids, the buffer holds " + std::to_string(cap);
      return LAYA_OUT_OF_RANGE;
    }
    if (!v.empty()) std::memcpy(ids, v.data(), v.size() * sizeof(int32_t));
    return set(laya::Status::Ok());
  });
}

laya_status laya_detokenize(const laya_tokenizer* tok, const int32_t* ids, int64_t n, char* buf, size_t cap,
                            size_t* len_out) {
  if (!tok || (!ids && n > 0) || n < 0 || !len_out || (!buf && cap > 0)) return invalid("laya_detokenize: bad argument");
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= tok->t->n_vocab()) {
      g_error = "laya_detokenize: id " + std::to_string(ids[i]) + " at index " + std::to_string(i) + " is out of range [0, " +
                std::to_string(tok->t->n_vocab()) + ")";
      return LAYA_INVALID_ARGUMENT;
    }
  }
  return guarded("laya_detokenize: out of memory", [&] {
    const std::string s = tok->t->decode(std::span<const int32_t>(ids, static_cast<size_t>(n)));
    *len_out = s.size();
    if (cap <= s.size()) {
      g_error = "laya_detokenize: the text has " + std::to_string(s.size()) + " bytes, the buffer holds " + std::to_string(cap);
      return LAYA_OUT_OF_RANGE;
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

laya_status laya_session_new_with_options(laya_engine* engine, const laya_tokenizer* tok,
                                          const laya_session_options* opt, laya_session** out) {
  if (!engine || !tok || !opt || !out) return invalid("laya_session_new: engine, tok, options and out must not be NULL");
  laya::SessionOptions so;
  so.heal = opt->heal != 0;
  // Read as an int: a caller's out-of-range value in an enum object must not
  // be loaded as the enum type (undefined behaviour; UBSan's -fsanitize=enum).
  static_assert(sizeof(laya_fim_order) == sizeof(int));
  int fim_raw = 0;
  std::memcpy(&fim_raw, &opt->fim, sizeof fim_raw);
  switch (fim_raw) {
    case LAYA_FIM_PSM: so.fim = laya::FimOrder::kPsm; break;
    case LAYA_FIM_SPM: so.fim = laya::FimOrder::kSpm; break;
    case LAYA_FIM_OFF: so.fim = laya::FimOrder::kOff; break;
    default: return invalid("laya_session_new: options.fim must be LAYA_FIM_PSM, LAYA_FIM_SPM or LAYA_FIM_OFF");
  }
  if (opt->fim_suffix_tokens < 1 || opt->fim_suffix_tokens > 4096)
    return invalid("laya_session_new: options.fim_suffix_tokens must be in [1, 4096]");
  if (opt->fim_suffix_lines < 1) return invalid("laya_session_new: options.fim_suffix_lines must be >= 1");
  if (opt->context_tokens < 0) return invalid("laya_session_new: options.context_tokens must be >= 0");
  so.fim_suffix_tokens = opt->fim_suffix_tokens;
  so.fim_suffix_lines = opt->fim_suffix_lines;
  so.context_tokens = opt->context_tokens;
  return guarded("laya_session_new: out of memory", [&] {
    *out = new laya_session{std::make_unique<laya::Session>(*engine->e, *tok->t, so), {}};
    return set(laya::Status::Ok());
  });
}

void laya_session_free(laya_session* session) { delete session; }

laya_status laya_session_set_text(laya_session* session, const char* text, size_t len) {
  if (!session || (!text && len > 0)) return invalid("laya_session_set_text: NULL session or text");
  return guarded("laya_session_set_text: out of memory",
                 [&] { return set(session->s->set_text(std::string_view(text ? text : "", len))); });
}

laya_status laya_session_edit(laya_session* session, size_t pos, size_t n_deleted, const char* inserted, size_t len) {
  if (!session || (!inserted && len > 0)) return invalid("laya_session_edit: NULL session or text");
  return guarded("laya_session_edit: out of memory", [&] {
    return set(session->s->edit(pos, n_deleted, std::string_view(inserted ? inserted : "", len)));
  });
}

laya_status laya_session_move(laya_session* session, size_t pos) {
  if (!session) return invalid("laya_session_move: NULL session");
  return guarded("laya_session_move: out of memory", [&] { return set(session->s->move(pos)); });
}

laya_status laya_session_accept(laya_session* session, size_t n_chars) {
  if (!session) return invalid("laya_session_accept: NULL session");
  return guarded("laya_session_accept: out of memory", [&] { return set(session->s->accept(n_chars)); });
}

laya_status laya_session_suggest(laya_session* session, int max_tokens, int single_line, double deadline_ms,
                                 char* buf, size_t cap, size_t* len_out) {
  if (!session || !len_out || (!buf && cap > 0)) return invalid("laya_session_suggest: NULL session, buf or len_out");
  return guarded("laya_session_suggest: out of memory", [&] {
    laya::SuggestOptions o;
    o.max_tokens = max_tokens;
    o.single_line = single_line != 0;
    if (deadline_ms > 0) o.deadline = std::chrono::duration<double, std::milli>(deadline_ms);
    laya::Suggestion* r = &session->last;
    if (laya::Status st = session->s->suggest_into(o, r); !st.ok()) return set(st);
    const std::string& text = r->text;
    *len_out = text.size();
    if (cap <= text.size()) {
      g_error = "laya_session_suggest: the suggestion has " + std::to_string(text.size()) +
                " bytes, the buffer holds " + std::to_string(cap);
      return LAYA_OUT_OF_RANGE;
    }
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    if (r->cancelled) {
      g_error = "laya_session_suggest: cancelled (the buffer holds what was made)";
      return LAYA_CANCELLED;
    }
    return set(laya::Status::Ok());
  });
}

void laya_session_cancel(laya_session* session) {
  if (session) session->s->cancel();
}

}  // extern "C"
