/* laya — the plain C API (for Swift, Python, Rust, ... bindings).
 *
 * Opaque handles; every fallible call returns a laya_status and, when it is
 * not LAYA_OK, leaves a message for laya_last_error() on the calling thread.
 * No call exits or aborts the process: allocation failures and threads the OS
 * refuses are LAYA_OUT_OF_MEMORY. Handles are not thread-safe: use one engine
 * (and its sequences and sessions) from one thread at a time; several engines
 * may run in parallel.
 *
 * Handles carry their type and owner:
 *  - Each handle begins with a tag naming its type, checked by every call: a
 *    NULL, a handle of another type (a cast) or a pointer to memory that is no
 *    handle is LAYA_INVALID_ARGUMENT naming the argument. Calls that return a
 *    value instead of a status return 0 / NULL / "" and leave the message;
 *    the free functions ignore such a pointer. A free overwrites the tag, so a
 *    second free or a later use is usually reported too, but that reads freed
 *    memory: undefined behaviour in C, a best effort here, not a promise.
 *  - A sequence records the engine that made it (a reference that expires when
 *    laya_engine_free() runs, compared by identity, so an engine created later
 *    at the same address is not taken for it). Used with another engine, or
 *    after its engine was freed, it is LAYA_INVALID_ARGUMENT, with no access
 *    to freed memory.
 *  - Engines keep their model alive, sessions their engine and tokenizer: the
 *    handles may be freed in any order.
 *
 * Counts: every count and length is checked before a buffer is read or
 * written: negative, past the context (n and pos are compared without adding
 * them) or larger than any buffer can be (more than PTRDIFF_MAX bytes).
 *
 * Model files are memory-mapped. A file truncated while mapped raises SIGBUS
 * when a page past its new end is read, so laya_engine_create(),
 * laya_tokenizer_from_model() and every forward pass (prefill, decode,
 * suggest) first compare the file's size and modification time with those at
 * load (one fstat, ~0.6 us) and return LAYA_IO naming the file if they
 * changed. A file truncated during a forward pass cannot be caught: replace
 * model files by renaming a new file over them (the mapping keeps the old
 * one), never by writing into them.
 */
#ifndef LAYA_LAYA_H
#define LAYA_LAYA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum laya_status {
  LAYA_OK = 0,
  LAYA_INVALID_ARGUMENT = 1, /* a NULL / wrong-type handle, a sequence of another or a freed engine, a bad count, a token id out of range */
  LAYA_NOT_FOUND = 2,        /* file, key or tensor absent */
  LAYA_CORRUPT = 3,          /* the file violates its format (message names file, key/tensor, position) */
  LAYA_UNSUPPORTED = 4,      /* valid but not implemented: architecture, dtype, version */
  LAYA_OUT_OF_RANGE = 5,     /* a position past the cached tokens or the context length */
  LAYA_IO = 6,               /* the OS refused to open or map a file; a model file changed on disk while loaded */
  LAYA_OUT_OF_MEMORY = 7,    /* an allocation, a thread or a lock was refused */
  LAYA_INTERNAL = 8,         /* a bug in laya: please report the message */
  LAYA_CANCELLED = 9         /* stopped on request; the sequence holds what was completed */
} laya_status;

typedef struct laya_model laya_model;
typedef struct laya_engine laya_engine;
typedef struct laya_sequence laya_sequence;
typedef struct laya_tokenizer laya_tokenizer;
typedef struct laya_session laya_session;
typedef struct laya_slot laya_slot;

/* The message of the last failed call on this thread ("" if none). Valid
 * until the next laya call on this thread. */
const char* laya_last_error(void);

/* Loads a .gguf file or a Hugging Face / MLX folder (config.json +
 * safetensors). Weights are memory-mapped, not copied (see "Model files"
 * above: do not truncate or rewrite the files in place while loaded).
 * Returns LAYA_INVALID_ARGUMENT for a NULL path or out, LAYA_NOT_FOUND,
 * LAYA_CORRUPT, LAYA_UNSUPPORTED or LAYA_IO on failure; *out is set only on
 * LAYA_OK. A FIFO, device or other special file is LAYA_INVALID_ARGUMENT
 * (refused before it is opened: the call never blocks on it). */
laya_status laya_model_load(const char* path, laya_model** out);
/* Frees a model; engines created from it keep it alive until they are freed.
 * NULL, or a pointer that is no live model handle, is ignored. */
void laya_model_free(laya_model* model);

/* Creates an engine: thread pool, scratch, RoPE tables sized for n_ctx
 * tokens per sequence (0: min(training context, 4096)), and the KV block pool
 * every sequence takes its memory from (one full context of n_ctx positions).
 * n_threads: 0 = all cores, else 1 to 4 x the cores the OS reports, at most
 * 256 (more threads than cores only slow the forward pass down).
 * LAYA_INVALID_ARGUMENT for a model that is no model handle, a NULL out,
 * n_threads negative or past that bound, n_ctx negative or above 16M (the
 * message names the value and the bound); LAYA_OUT_OF_MEMORY when the pool,
 * the scratch or the threads cannot be made (the OS refused a thread);
 * LAYA_IO when the model file changed on disk since it was loaded. */
laya_status laya_engine_create(laya_model* model, int n_threads, int64_t n_ctx, laya_engine** out);
/* Frees the engine handle. Its sequences then return LAYA_INVALID_ARGUMENT
 * with any engine (they may still be read and freed); its sessions keep the
 * engine working until they are freed. NULL, or a pointer that is no live
 * engine handle, is ignored. */
void laya_engine_free(laya_engine* engine);
/* 0 (and a message) for an engine that is no live engine handle. */
int64_t laya_engine_n_vocab(const laya_engine* engine);
int64_t laya_engine_n_ctx(const laya_engine* engine);
/* The engine mlocks the weights, scratch and KV pool where the OS allows.
 * "" when all of it is locked; else why not and how to allow it (the
 * locked-memory limit). The engine works either way. Valid for the engine's
 * lifetime ("" and a message for a bad handle). */
const char* laya_engine_memory_lock_note(const laya_engine* engine);

/* Hot model swap: a slot serves one model at a time and replaces it while
 * sessions keep suggesting (src/session/model_slot.h). A slot loads a model
 * with its tokenizer and engine, validates it (it loads, its tensor shapes
 * agree with its metadata, the tokenizer gives a probe text back, a probe
 * prompt gives finite logits) and only then makes it current. Sessions made
 * on the slot (laya_session_new_on_slot) follow it: a suggestion in flight
 * finishes on the old model, the next one re-tokenizes the session's text for
 * the new model (its vocabulary may differ). The slot keeps the model it
 * replaced, so swapping back to that file is immediate; memory holds at most
 * two models plus one a session is still finishing a suggestion on.
 *
 * Unlike the other handles, a slot may be used from several threads at once:
 * laya_slot_swap_model on one thread while sessions on the slot suggest on
 * others (each session still from one thread at a time).
 *
 * laya_slot_create: loads and validates path as the first model. n_threads and
 * n_ctx as laya_engine_create (n_ctx 0: the model's default; else capped at
 * each model's trained context). LAYA_INVALID_ARGUMENT for a NULL path or out,
 * n_threads or n_ctx out of range; LAYA_NOT_FOUND, LAYA_CORRUPT (also: the
 * probe gave a NaN or infinite logit, or the tokenizer does not round-trip),
 * LAYA_UNSUPPORTED or LAYA_IO as laya_model_load; LAYA_OUT_OF_MEMORY as
 * laya_engine_create. *out is set only on LAYA_OK. */
laya_status laya_slot_create(const char* path, int n_threads, int64_t n_ctx, laya_slot** out);
/* Loads, prepares and validates the model at path on the calling thread and
 * then switches to it. On any failure the current model keeps serving, and
 * the message says "swap to <path>: <step>: <why>" (step: load, tokenizer,
 * prepare or probe). Swapping to the file already served is LAYA_OK and
 * changes nothing. LAYA_INVALID_ARGUMENT for a bad slot handle or a NULL path
 * (or a FIFO or device path); LAYA_NOT_FOUND for a missing file; LAYA_CORRUPT
 * for a file that is no model (a truncated one included) or fails the probe;
 * LAYA_UNSUPPORTED, LAYA_IO, LAYA_OUT_OF_MEMORY as laya_slot_create. Calls on
 * one slot are serialised (a second waits for the first). */
laya_status laya_slot_swap_model(laya_slot* slot, const char* path);
/* Successful swaps so far (0 and a message for a bad handle). */
int64_t laya_slot_swaps(const laya_slot* slot);
/* Frees the slot handle; sessions made on it keep it (and the model they
 * use) until they are freed. NULL, or a pointer that is no live slot handle,
 * is ignored. */
void laya_slot_free(laya_slot* slot);

/* A new empty sequence of up to n_ctx positions. It takes KV blocks from the
 * engine's pool as it grows (nothing until its first token) and gives them
 * back when cut or freed. It is used only with the engine that made it: with
 * another engine, or after its engine was freed, prefill / decode / truncate
 * return LAYA_INVALID_ARGUMENT and leave it unchanged. It may be freed before
 * or after its engine, and n_past / logits stay readable after. */
laya_status laya_sequence_new(laya_engine* engine, laya_sequence** out);
/* NULL, or a pointer that is no live sequence handle, is ignored. */
void laya_sequence_free(laya_sequence* seq);
/* Tokens whose keys/values are cached (0 and a message for a bad handle). */
int64_t laya_sequence_n_past(const laya_sequence* seq);

/* Feeds n tokens at positions pos, pos+1, ... after cutting the cache back to
 * pos (pos <= n_past). Afterwards laya_sequence_logits() holds the last
 * token's logits. Checked before tokens is read: LAYA_OUT_OF_RANGE if pos < 0,
 * pos > n_past or n > n_ctx - pos; LAYA_INVALID_ARGUMENT for a bad handle, a
 * sequence of another engine or of a freed one, n <= 0, tokens NULL, or an id
 * outside [0, n_vocab) (nothing is changed); LAYA_OUT_OF_MEMORY when the KV
 * pool has no free block (the sequence keeps the tokens before pos); LAYA_IO
 * when the model file changed on disk. Allocates nothing after the sequence's
 * first call. */
laya_status laya_prefill(laya_engine* engine, laya_sequence* seq, const int32_t* tokens, int64_t n, int64_t pos);
/* One decode step: token at position n_past. Errors as laya_prefill
 * (LAYA_OUT_OF_RANGE when the sequence already holds n_ctx tokens). */
laya_status laya_decode(laya_engine* engine, laya_sequence* seq, int32_t token);
/* Cuts the cache back to pos: LAYA_OUT_OF_RANGE if pos < 0 or pos > n_past;
 * LAYA_INVALID_ARGUMENT for handles as laya_prefill. */
laya_status laya_truncate(laya_engine* engine, laya_sequence* seq, int64_t pos);
/* n_vocab logits of the last token of this sequence's last prefill/decode
 * (NULL before the first, or for a bad handle); valid until the sequence's
 * next prefill/decode or until it is freed. Other sequences' calls do not
 * change them. */
const float* laya_sequence_logits(const laya_sequence* seq);

/* The tokenizer of a model (GGUF metadata, or tokenizer.json in the folder).
 * LAYA_INVALID_ARGUMENT for a bad model handle or a NULL out; LAYA_IO when
 * the model file changed on disk; the loader's errors otherwise. */
laya_status laya_tokenizer_from_model(const laya_model* model, laya_tokenizer** out);
/* NULL, or a pointer that is no live tokenizer handle, is ignored. Sessions
 * keep the tokenizer they use. */
void laya_tokenizer_free(laya_tokenizer* tok);
/* Encodes len bytes of UTF-8 text. parse_special != 0 splits special-token
 * text such as "<|endoftext|>"; add_bos: 1 yes, 0 no, -1 the tokenizer's
 * default. Writes at most cap ids and sets *n_out to the number of ids the
 * text has: if *n_out > cap the call returns LAYA_OUT_OF_RANGE and the caller
 * retries with a larger buffer (ids may be NULL with cap 0 to ask the count).
 * LAYA_INVALID_ARGUMENT for a bad handle, a NULL n_out, text NULL with
 * len > 0, len > PTRDIFF_MAX, cap < 0 or cap > PTRDIFF_MAX / 4, ids NULL with
 * cap > 0, or add_bos other than 1, 0, -1. */
laya_status laya_tokenize(const laya_tokenizer* tok, const char* text, size_t len, int parse_special, int add_bos,
                          int32_t* ids, int64_t cap, int64_t* n_out);
/* Decodes n ids into buf (cap bytes, NUL-terminated when it fits); *len_out is
 * the text's length without the NUL. LAYA_OUT_OF_RANGE when cap <= *len_out
 * (buf may be NULL with cap 0 to ask the length). LAYA_INVALID_ARGUMENT for a
 * bad handle, a NULL len_out, n < 0 or n > PTRDIFF_MAX / 4, ids NULL with
 * n > 0, cap > PTRDIFF_MAX, buf NULL with cap > 0, or an id outside
 * [0, n_vocab) (the message names it and its index). */
laya_status laya_detokenize(const laya_tokenizer* tok, const int32_t* ids, int64_t n, char* buf, size_t cap,
                            size_t* len_out);

/* A session: one document being typed, with suggestions at its cursor that
 * reuse the engine's cache from keystroke to keystroke (only the tokens after
 * the first changed one are computed). Offsets count Unicode code points.
 * The session keeps its engine and tokenizer: their handles may be freed
 * before it (they go with the last session that uses them). A session is used
 * from one thread at a time, except laya_session_cancel(), which any thread
 * may call while laya_session_suggest() runs elsewhere. Every session call
 * returns LAYA_INVALID_ARGUMENT for a NULL or wrong-type handle.
 * laya_session_new: LAYA_INVALID_ARGUMENT for a bad engine or tokenizer
 * handle or a NULL out; LAYA_OUT_OF_MEMORY when the session cannot be made. */
laya_status laya_session_new(laya_engine* engine, const laya_tokenizer* tok, laya_session** out);
/* How a session builds its prompts (see src/session/session.h). */
typedef enum {
  LAYA_FIM_PSM = 0, /* prefix, then the suffix: the order the default model learned */
  LAYA_FIM_SPM = 1, /* suffix first: typing at the cursor keeps the suffix cached */
  LAYA_FIM_OFF = 2  /* the text before the cursor only */
} laya_fim_order;
typedef struct laya_session_options {
  int heal;               /* token healing: the word cut by the cursor is re-generated (default 1) */
  laya_fim_order fim;     /* used where the model has FIM tokens and the suffix is not blank */
  int fim_suffix_tokens;  /* bound of the suffix (default 32, >= 1) */
  int fim_suffix_lines;   /* lines after the cursor looked at (default 4, >= 1) */
  int64_t context_tokens; /* prompt tokens (0: the engine's context) */
} laya_session_options;
/* Fills *opt with the defaults (what laya_session_new uses). */
void laya_session_options_default(laya_session_options* opt);
/* laya_session_new with options; LAYA_INVALID_ARGUMENT (naming the field) for
 * an out-of-range one (a fim that is none of the three values included), or
 * NULL options. */
laya_status laya_session_new_with_options(laya_engine* engine, const laya_tokenizer* tok,
                                          const laya_session_options* opt, laya_session** out);
/* A session on a slot's current model that follows the slot's swaps (see
 * laya_slot_create). opt NULL: the defaults. LAYA_INVALID_ARGUMENT for a bad
 * slot handle, a NULL out or an out-of-range option (as
 * laya_session_new_with_options). */
laya_status laya_session_new_on_slot(laya_slot* slot, const laya_session_options* opt, laya_session** out);
/* NULL, or a pointer that is no live session handle, is ignored. */
void laya_session_free(laya_session* session);
/* Replaces the whole text with len bytes of UTF-8; the cursor goes to its end.
 * LAYA_INVALID_ARGUMENT for text that is not valid UTF-8, text NULL with
 * len > 0, or len > PTRDIFF_MAX. */
laya_status laya_session_set_text(laya_session* session, const char* text, size_t len);
/* Replaces n_deleted code points at pos by len bytes of UTF-8 (a keystroke, a
 * paste, an input-method commit; n_deleted 0 inserts, len 0 deletes); the
 * cursor ends after the inserted text. Stops a suggestion in flight.
 * LAYA_OUT_OF_RANGE when pos or pos + n_deleted is past the text (compared
 * without overflow); LAYA_INVALID_ARGUMENT for text that is not valid UTF-8,
 * inserted NULL with len > 0, or len > PTRDIFF_MAX. */
laya_status laya_session_edit(laya_session* session, size_t pos, size_t n_deleted, const char* inserted, size_t len);
/* Moves the cursor to code point pos (LAYA_OUT_OF_RANGE past the text). */
laya_status laya_session_move(laya_session* session, size_t pos);
/* Inserts the first n_chars code points of the last suggestion at the cursor
 * (their tokens are already cached). LAYA_INVALID_ARGUMENT when there is no
 * suggestion (an edit or move drops it); LAYA_OUT_OF_RANGE when it is shorter. */
laya_status laya_session_accept(laya_session* session, size_t n_chars);
/* A greedy suggestion of up to max_tokens tokens at the cursor, into buf (cap bytes, NUL-terminated when it fits; *len_out is its
 * length without the NUL). single_line != 0 stops at the end of the line.
 * deadline_ms > 0 is a latency budget from the call: no decode step is started
 * that would overrun it, and what exists is returned with LAYA_OK (0,
 * negative or NaN: none; above 1e9 ms, i.e. 11.6 days, or infinite: 1e9 ms).
 * LAYA_CANCELLED when laya_session_cancel() or an edit stopped it (buf holds
 * what was made); LAYA_OUT_OF_RANGE when cap <= *len_out (buf may be NULL
 * with cap 0 to ask the length); LAYA_INVALID_ARGUMENT for max_tokens < 1 or
 * >= the context, a NULL len_out, buf NULL with cap > 0, or
 * cap > PTRDIFF_MAX; LAYA_IO when the model file changed on disk. */
laya_status laya_session_suggest(laya_session* session, int max_tokens, int single_line, double deadline_ms,
                                 char* buf, size_t cap, size_t* len_out);
/* Stops a laya_session_suggest() in flight within one decode step or one
 * prefill chunk. Any thread; never blocks; NULL, or a pointer that is no live
 * session handle, is ignored. */
void laya_session_cancel(laya_session* session);

/* Saves the session (text, cursor, window, options, cached tokens and the KV
 * bytes of its blocks) to path, through a temporary file, fsync and rename: a
 * crash mid-save leaves the old file or the new one, never a mix. An existing
 * file at path is replaced only when it is a laya session file. Not while a
 * suggest runs on the session. LAYA_INVALID_ARGUMENT for a bad handle, a NULL
 * path, or a path that may not be written (a folder, a file of another kind,
 * the model file); LAYA_IO when a write, the fsync or the rename fails (the old
 * file is intact). */
laya_status laya_session_save(const laya_session* session, const char* path);
/* A new session on engine and tok, read back from a file of one session
 * written by laya_session_save (memory-mapped; everything is checked before
 * the engine's KV memory is touched). It resumes warm: its next suggestion
 * computes nothing its saved self would not have. On error *out is NULL.
 * LAYA_INVALID_ARGUMENT for a bad handle, a NULL path or out, a file written
 * with another model or another KV type / block layout (the message says which:
 * make the session from its text instead), or a file of several sessions;
 * LAYA_NOT_FOUND / LAYA_IO when the file is absent or cannot be mapped;
 * LAYA_CORRUPT for a file that is not a session file, is truncated, or has a
 * changed byte (header or payload checksum); LAYA_UNSUPPORTED for a newer
 * format version. When the engine's KV memory is full the session comes back
 * from its text alone (LAYA_OK; it recomputes at its next suggestion). */
laya_status laya_session_load(laya_engine* engine, const laya_tokenizer* tok, const char* path, laya_session** out);

#ifdef __cplusplus
}
#endif

#endif /* LAYA_LAYA_H */
