// The C API under misuse: every call given NULL handles, handles of another
// type, foreign pointers, a sequence of another engine or of a freed engine,
// negative / huge / overflowing counts, buffers too small, too many threads,
// threads or memory the OS refuses, and a model file truncated while in use.
// Each returns a status with a message naming the call and the value; none
// aborts, reads past a buffer or touches freed memory (run under ASan+UBSan:
// tools/ci/sanitize.sh).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "core/thread_pool.h"
#include "laya/laya.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define LAYA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LAYA_TEST_ASAN 1
#endif
#endif

namespace {

namespace fs = std::filesystem;

const char* kModel = LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf";

std::string err() { return laya_last_error(); }

// The last error contains every fragment.
::testing::AssertionResult ErrorHas(std::initializer_list<const char*> fragments) {
  const std::string e = err();
  for (const char* f : fragments) {
    if (e.find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "the message \"" << e << "\" does not contain \"" << f << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// One model, two engines of 64 positions, a tokenizer: loaded once.
struct Shared {
  laya_model* model = nullptr;
  laya_engine* e1 = nullptr;
  laya_engine* e2 = nullptr;
  laya_tokenizer* tok = nullptr;
};

Shared& shared() {
  static Shared* s = [] {
    auto* r = new Shared;
    if (laya_model_load(kModel, &r->model) != LAYA_OK) return r;
    if (laya_engine_create(r->model, 2, 64, &r->e1) != LAYA_OK) return r;
    if (laya_engine_create(r->model, 1, 64, &r->e2) != LAYA_OK) return r;
    if (laya_tokenizer_from_model(r->model, &r->tok) != LAYA_OK) return r;
    return r;
  }();
  return *s;
}

class CApiMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel)) GTEST_SKIP() << "no " << kModel;
    s_ = &shared();
    ASSERT_TRUE(s_->model && s_->e1 && s_->e2 && s_->tok) << err();
  }
  Shared* s_ = nullptr;
};

TEST_F(CApiMisuse, NullHandlesEverywhere) {
  laya_model* m = nullptr;
  laya_engine* e = nullptr;
  laya_sequence* q = nullptr;
  laya_tokenizer* t = nullptr;
  laya_session* ss = nullptr;
  int32_t ids[4] = {1, 2, 3, 4};
  char buf[16];
  size_t len = 0;
  int64_t n = 0;

  EXPECT_EQ(laya_model_load(nullptr, &m), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_model_load(kModel, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_engine_create(nullptr, 1, 0, &e), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_engine_create", "model is NULL"}));
  EXPECT_EQ(laya_engine_create(s_->model, 1, 0, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"out is NULL"}));
  EXPECT_EQ(laya_engine_n_vocab(nullptr), 0);
  EXPECT_TRUE(ErrorHas({"laya_engine_n_vocab", "engine is NULL"}));
  EXPECT_EQ(laya_engine_n_ctx(nullptr), 0);
  EXPECT_STREQ(laya_engine_memory_lock_note(nullptr), "");
  EXPECT_EQ(laya_sequence_new(nullptr, &q), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_sequence_new(s_->e1, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_sequence_n_past(nullptr), 0);
  EXPECT_EQ(laya_sequence_logits(nullptr), nullptr);
  EXPECT_EQ(laya_prefill(nullptr, nullptr, ids, 4, 0), LAYA_INVALID_ARGUMENT);
  ASSERT_EQ(laya_sequence_new(s_->e1, &q), LAYA_OK);
  EXPECT_EQ(laya_prefill(nullptr, q, ids, 4, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_prefill", "engine is NULL"}));
  EXPECT_EQ(laya_prefill(s_->e1, nullptr, ids, 4, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_prefill", "seq is NULL"}));
  EXPECT_EQ(laya_prefill(s_->e1, q, nullptr, 4, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_prefill", "tokens is NULL"}));
  EXPECT_EQ(laya_decode(nullptr, q, 1), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_decode(s_->e1, nullptr, 1), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_truncate(nullptr, q, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_truncate(s_->e1, nullptr, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_sequence_n_past(q), 0);  // nothing changed
  laya_sequence_free(q);

  EXPECT_EQ(laya_tokenizer_from_model(nullptr, &t), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_tokenizer_from_model(s_->model, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_tokenize(nullptr, "a", 1, 0, 0, ids, 4, &n), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_tokenize(s_->tok, "a", 1, 0, 0, ids, 4, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_tokenize(s_->tok, nullptr, 1, 0, 0, ids, 4, &n), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_tokenize(s_->tok, "a", 1, 0, 0, nullptr, 4, &n), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_tokenize(s_->tok, nullptr, 0, 0, 0, nullptr, 0, &n), LAYA_OK);  // empty text, no buffer: fine
  EXPECT_EQ(n, 0);
  EXPECT_EQ(laya_detokenize(nullptr, ids, 1, buf, sizeof buf, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_detokenize(s_->tok, nullptr, 1, buf, sizeof buf, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_detokenize(s_->tok, ids, 1, nullptr, sizeof buf, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_detokenize(s_->tok, ids, 1, buf, sizeof buf, nullptr), LAYA_INVALID_ARGUMENT);

  laya_session_options o;
  laya_session_options_default(&o);
  laya_session_options_default(nullptr);  // ignored
  EXPECT_EQ(laya_session_new(nullptr, s_->tok, &ss), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_new(s_->e1, nullptr, &ss), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_new(s_->e1, s_->tok, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_new_with_options(s_->e1, s_->tok, nullptr, &ss), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_set_text(nullptr, "a", 1), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_edit(nullptr, 0, 0, "a", 1), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_move(nullptr, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_accept(nullptr, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_suggest(nullptr, 4, 0, 0, buf, sizeof buf, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_session_suggest", "session is NULL"}));
  laya_session_cancel(nullptr);

  // Freeing NULL is a no-op.
  laya_model_free(nullptr);
  laya_engine_free(nullptr);
  laya_sequence_free(nullptr);
  laya_tokenizer_free(nullptr);
  laya_session_free(nullptr);
}

TEST_F(CApiMisuse, WrongHandleTypesAndForeignPointers) {
  // A handle of one type cast to another: the tag says which it is. (Reading
  // the first 8 bytes of a live handle of any type is defined.)
  auto* model_as_engine = reinterpret_cast<laya_engine*>(s_->model);
  auto* engine_as_seq = reinterpret_cast<laya_sequence*>(s_->e1);
  auto* tok_as_session = reinterpret_cast<laya_session*>(s_->tok);
  auto* engine_as_model = reinterpret_cast<laya_model*>(s_->e1);
  auto* engine_as_tok = reinterpret_cast<const laya_tokenizer*>(s_->e1);
  int32_t ids[2] = {1, 2};
  char buf[16];
  size_t len = 0;
  int64_t n = 0;
  laya_sequence* q = nullptr;
  laya_engine* e = nullptr;

  EXPECT_EQ(laya_engine_n_vocab(model_as_engine), 0);
  EXPECT_TRUE(ErrorHas({"laya_engine_n_vocab", "engine is a laya_model, not a laya_engine"}));
  EXPECT_EQ(laya_sequence_new(model_as_engine, &q), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(laya_engine_create(engine_as_model, 1, 64, &e), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"model is a laya_engine, not a laya_model"}));
  EXPECT_EQ(laya_prefill(s_->e1, engine_as_seq, ids, 2, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_prefill", "seq is a laya_engine, not a laya_sequence"}));
  EXPECT_EQ(laya_sequence_n_past(engine_as_seq), 0);
  EXPECT_EQ(laya_sequence_logits(engine_as_seq), nullptr);
  EXPECT_EQ(laya_tokenize(engine_as_tok, "a", 1, 0, 0, ids, 2, &n), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"tok is a laya_engine, not a laya_tokenizer"}));
  EXPECT_EQ(laya_session_suggest(tok_as_session, 4, 0, 0, buf, sizeof buf, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"session is a laya_tokenizer, not a laya_session"}));
  EXPECT_EQ(laya_session_new(model_as_engine, s_->tok, nullptr), LAYA_INVALID_ARGUMENT);
  // A free of the wrong type frees nothing (the handles are used below).
  laya_engine_free(model_as_engine);
  EXPECT_TRUE(ErrorHas({"laya_engine_free", "not a laya_engine"}));
  laya_sequence_free(engine_as_seq);
  laya_session_cancel(tok_as_session);
  EXPECT_GT(laya_engine_n_vocab(s_->e1), 0);
  EXPECT_GT(laya_engine_n_vocab(s_->e2), 0);

  // Memory that is no handle at all (zeros, text), and one whose tag says it
  // was freed (the complement of a live tag: what free() leaves behind).
  alignas(16) unsigned char zeros[64] = {};
  alignas(16) char text[64] = "this is not a laya handle, only some text...";
  alignas(16) unsigned char freed[64] = {};
  uint64_t tag;
  std::memcpy(&tag, s_->e1, sizeof tag);
  tag = ~tag;
  std::memcpy(freed, &tag, sizeof tag);
  for (void* p : {static_cast<void*>(zeros), static_cast<void*>(text)}) {
    EXPECT_EQ(laya_engine_n_ctx(static_cast<laya_engine*>(p)), 0);
    EXPECT_TRUE(ErrorHas({"engine is not a laya_engine"}));
    EXPECT_EQ(laya_decode(static_cast<laya_engine*>(p), static_cast<laya_sequence*>(p), 1), LAYA_INVALID_ARGUMENT);
    EXPECT_EQ(laya_tokenizer_from_model(static_cast<laya_model*>(p), nullptr), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"model is not a laya_model"}));
    laya_engine_free(static_cast<laya_engine*>(p));  // ignored
  }
  EXPECT_EQ(laya_sequence_new(reinterpret_cast<laya_engine*>(freed), &q), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"engine is a laya_engine that was already freed"}));
  laya_engine_free(reinterpret_cast<laya_engine*>(freed));  // a double free is ignored when the tag says so
}

TEST_F(CApiMisuse, SequenceOfAnotherEngine) {
  laya_sequence* q = nullptr;
  ASSERT_EQ(laya_sequence_new(s_->e1, &q), LAYA_OK);
  const int32_t ids[3] = {10, 11, 12};
  ASSERT_EQ(laya_prefill(s_->e1, q, ids, 3, 0), LAYA_OK) << err();
  EXPECT_EQ(laya_prefill(s_->e2, q, ids, 3, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_prefill", "belongs to another engine"}));
  EXPECT_EQ(laya_decode(s_->e2, q, 5), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_decode", "belongs to another engine"}));
  EXPECT_EQ(laya_truncate(s_->e2, q, 0), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_truncate", "belongs to another engine"}));
  EXPECT_EQ(laya_sequence_n_past(q), 3);  // untouched
  EXPECT_EQ(laya_decode(s_->e1, q, 5), LAYA_OK) << err();
  EXPECT_EQ(laya_sequence_n_past(q), 4);
  laya_sequence_free(q);
}

TEST_F(CApiMisuse, SequenceAfterItsEngineWasFreed) {
  laya_engine* e = nullptr;
  ASSERT_EQ(laya_engine_create(s_->model, 1, 64, &e), LAYA_OK) << err();
  laya_sequence* q = nullptr;
  ASSERT_EQ(laya_sequence_new(e, &q), LAYA_OK);
  const int32_t ids[3] = {10, 11, 12};
  ASSERT_EQ(laya_prefill(e, q, ids, 3, 0), LAYA_OK) << err();
  std::vector<float> before(laya_sequence_logits(q), laya_sequence_logits(q) + laya_engine_n_vocab(e));
  laya_engine_free(e);
  // A new engine may well get the freed one's address: the sequence still knows
  // its engine is gone.
  laya_engine* e2 = nullptr;
  ASSERT_EQ(laya_engine_create(s_->model, 1, 64, &e2), LAYA_OK) << err();
  for (laya_engine* other : {e2, s_->e1}) {
    EXPECT_EQ(laya_prefill(other, q, ids, 3, 0), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"laya_prefill", "the sequence's engine was freed"}));
    EXPECT_EQ(laya_decode(other, q, 1), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"laya_decode", "engine was freed"}));
    EXPECT_EQ(laya_truncate(other, q, 1), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"laya_truncate", "engine was freed"}));
  }
  // What the sequence holds stays readable, and it is freed after its engine.
  EXPECT_EQ(laya_sequence_n_past(q), 3);
  ASSERT_NE(laya_sequence_logits(q), nullptr);
  EXPECT_EQ(std::memcmp(before.data(), laya_sequence_logits(q), before.size() * sizeof(float)), 0);
  laya_sequence_free(q);
  laya_engine_free(e2);
}

TEST_F(CApiMisuse, PrefillCountsAndPositions) {
  laya_engine* e = s_->e1;
  const int64_t n_ctx = laya_engine_n_ctx(e);
  ASSERT_EQ(n_ctx, 64);
  laya_sequence* q = nullptr;
  ASSERT_EQ(laya_sequence_new(e, &q), LAYA_OK);
  // The buffer holds 4 tokens: any count past that which were "accepted" would
  // read past it (ASan).
  const int32_t buf[4] = {1, 2, 3, 4};

  // The case: INT64_MAX tokens at position 1 of an empty sequence.
  EXPECT_EQ(laya_prefill(e, q, buf, INT64_MAX, 1), LAYA_OUT_OF_RANGE);
  EXPECT_TRUE(ErrorHas({"laya_prefill", "pos = 1", "[0, 0]"}));
  ASSERT_EQ(laya_prefill(e, q, buf, 1, 0), LAYA_OK) << err();
  // The same at a valid position: pos + n would overflow; the context check holds.
  EXPECT_EQ(laya_prefill(e, q, buf, INT64_MAX, 1), LAYA_OUT_OF_RANGE);
  EXPECT_TRUE(ErrorHas({"9223372036854775807 tokens at position 1", "context of 64"}));
  EXPECT_EQ(laya_prefill(e, q, buf, INT64_MAX - 1, 1), LAYA_OUT_OF_RANGE);
  EXPECT_EQ(laya_prefill(e, q, buf, INT64_MAX, 0), LAYA_OUT_OF_RANGE);
  EXPECT_EQ(laya_prefill(e, q, buf, n_ctx, 1), LAYA_OUT_OF_RANGE);  // one past the end
  EXPECT_EQ(laya_prefill(e, q, buf, n_ctx + 1, 0), LAYA_OUT_OF_RANGE);
  for (int64_t n : {int64_t{0}, int64_t{-1}, int64_t{-4}, INT64_MIN}) {
    EXPECT_EQ(laya_prefill(e, q, buf, n, 0), LAYA_INVALID_ARGUMENT) << n;
    EXPECT_TRUE(ErrorHas({"laya_prefill: n = ", "at least one token"}));
  }
  for (int64_t pos : {int64_t{-1}, INT64_MIN, int64_t{2}, INT64_MAX}) {
    EXPECT_EQ(laya_prefill(e, q, buf, 1, pos), LAYA_OUT_OF_RANGE) << pos;
    EXPECT_TRUE(ErrorHas({"laya_prefill: pos = "}));
  }
  EXPECT_EQ(laya_sequence_n_past(q), 1);  // none of that touched the sequence
  // Token ids: negative, n_vocab, INT32_MIN/MAX.
  const int32_t nv = static_cast<int32_t>(laya_engine_n_vocab(e));
  for (int32_t id : {-1, nv, INT32_MIN, INT32_MAX}) {
    const int32_t bad[2] = {1, id};
    EXPECT_EQ(laya_prefill(e, q, bad, 2, 1), LAYA_INVALID_ARGUMENT) << id;
    EXPECT_TRUE(ErrorHas({"at index 1 is out of range"}));
    EXPECT_EQ(laya_decode(e, q, id), LAYA_INVALID_ARGUMENT) << id;
  }
  EXPECT_EQ(laya_sequence_n_past(q), 1);
  // Truncate: outside [0, n_past].
  for (int64_t pos : {int64_t{-1}, INT64_MIN, int64_t{2}, INT64_MAX}) {
    EXPECT_EQ(laya_truncate(e, q, pos), LAYA_OUT_OF_RANGE) << pos;
  }
  // Exactly the context fits; one more decode does not.
  std::vector<int32_t> full(static_cast<size_t>(n_ctx), 7);
  ASSERT_EQ(laya_prefill(e, q, full.data(), n_ctx, 0), LAYA_OK) << err();
  EXPECT_EQ(laya_decode(e, q, 7), LAYA_OUT_OF_RANGE);
  EXPECT_TRUE(ErrorHas({"exceeds the context"}));
  EXPECT_EQ(laya_sequence_n_past(q), n_ctx);
  EXPECT_EQ(laya_truncate(e, q, n_ctx - 1), LAYA_OK);
  EXPECT_EQ(laya_decode(e, q, 7), LAYA_OK) << err();
  laya_sequence_free(q);
}

TEST_F(CApiMisuse, TokenizeAndDetokenizeBuffers) {
  const std::string text = "def square(x):\n    return x * x\n";
  int64_t n = -1;
  // cap smaller than needed: the count comes back, nothing is written past cap.
  int32_t small[3] = {-7, -7, -7};
  EXPECT_EQ(laya_tokenize(s_->tok, text.data(), text.size(), 0, 0, small, 2, &n), LAYA_OUT_OF_RANGE);
  EXPECT_GT(n, 2);
  EXPECT_TRUE(ErrorHas({"laya_tokenize: the text has", "the buffer holds 2"}));
  EXPECT_EQ(small[2], -7);
  EXPECT_EQ(laya_tokenize(s_->tok, text.data(), text.size(), 0, 0, nullptr, 0, &n), LAYA_OUT_OF_RANGE);  // size query
  std::vector<int32_t> ids(static_cast<size_t>(n));
  ASSERT_EQ(laya_tokenize(s_->tok, text.data(), text.size(), 0, 0, ids.data(), n, &n), LAYA_OK) << err();
  // Counts no buffer can have.
  for (int64_t cap : {int64_t{-1}, INT64_MIN, INT64_MAX, INT64_MAX / 4 + 1}) {
    EXPECT_EQ(laya_tokenize(s_->tok, text.data(), text.size(), 0, 0, ids.data(), cap, &n), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"laya_tokenize: cap = "}));
  }
  for (size_t len : {SIZE_MAX, SIZE_MAX / 2 + 1}) {
    EXPECT_EQ(laya_tokenize(s_->tok, text.data(), len, 0, 0, ids.data(), n, &n), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"laya_tokenize: len = ", "larger than any buffer"}));
  }
  for (int add_bos : {2, -2, INT_MIN, INT_MAX}) {
    EXPECT_EQ(laya_tokenize(s_->tok, "a", 1, 0, add_bos, ids.data(), n, &n), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"add_bos = "}));
  }

  const int64_t m = static_cast<int64_t>(ids.size());
  size_t len = 0;
  char tiny[4] = {'#', '#', '#', '#'};
  EXPECT_EQ(laya_detokenize(s_->tok, ids.data(), m, tiny, 3, &len), LAYA_OUT_OF_RANGE);
  EXPECT_EQ(len, text.size());
  EXPECT_EQ(tiny[3], '#');
  EXPECT_EQ(laya_detokenize(s_->tok, ids.data(), m, nullptr, 0, &len), LAYA_OUT_OF_RANGE);  // size query
  std::vector<char> out(len);  // no room for the NUL
  EXPECT_EQ(laya_detokenize(s_->tok, ids.data(), m, out.data(), out.size(), &len), LAYA_OUT_OF_RANGE);
  out.resize(len + 1);
  ASSERT_EQ(laya_detokenize(s_->tok, ids.data(), m, out.data(), out.size(), &len), LAYA_OK) << err();
  EXPECT_EQ(std::string(out.data()), text);
  for (int64_t bad_n : {int64_t{-1}, INT64_MIN, INT64_MAX, INT64_MAX / 4 + 1}) {
    EXPECT_EQ(laya_detokenize(s_->tok, ids.data(), bad_n, out.data(), out.size(), &len), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"laya_detokenize: n = "}));
  }
  EXPECT_EQ(laya_detokenize(s_->tok, ids.data(), m, out.data(), SIZE_MAX, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_detokenize: cap = ", "larger than any buffer"}));
  const int32_t bad_ids[3] = {1, -5, 2};
  EXPECT_EQ(laya_detokenize(s_->tok, bad_ids, 3, out.data(), out.size(), &len), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"id -5 at index 1"}));
}

TEST_F(CApiMisuse, SessionCountsAndLifetimes) {
  // The session keeps its engine and tokenizer: their handles may go first.
  laya_engine* e = nullptr;
  ASSERT_EQ(laya_engine_create(s_->model, 1, 128, &e), LAYA_OK) << err();
  laya_tokenizer* t = nullptr;
  ASSERT_EQ(laya_tokenizer_from_model(s_->model, &t), LAYA_OK) << err();
  laya_session_options o;
  laya_session_options_default(&o);
  laya_session* ss = nullptr;
  for (int fim : {3, -1, 7, INT_MAX}) {
    int raw = fim;
    std::memcpy(&o.fim, &raw, sizeof raw);  // what a C caller can store
    EXPECT_EQ(laya_session_new_with_options(e, t, &o, &ss), LAYA_INVALID_ARGUMENT);
    EXPECT_TRUE(ErrorHas({"options.fim = "}));
  }
  laya_session_options_default(&o);
  o.context_tokens = -1;
  EXPECT_EQ(laya_session_new_with_options(e, t, &o, &ss), LAYA_INVALID_ARGUMENT);
  o.context_tokens = INT64_MAX;  // "at most this many": the engine's context bounds it
  ASSERT_EQ(laya_session_new_with_options(e, t, &o, &ss), LAYA_OK) << err();
  laya_engine_free(e);
  laya_tokenizer_free(t);

  const std::string text = "def f(x):\n    return";
  EXPECT_EQ(laya_session_set_text(ss, text.data(), SIZE_MAX), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_session_set_text: len = "}));
  EXPECT_EQ(laya_session_set_text(ss, nullptr, 3), LAYA_INVALID_ARGUMENT);
  ASSERT_EQ(laya_session_set_text(ss, text.data(), text.size()), LAYA_OK) << err();
  EXPECT_EQ(laya_session_edit(ss, SIZE_MAX, 0, "x", 1), LAYA_OUT_OF_RANGE);
  EXPECT_EQ(laya_session_edit(ss, 1, SIZE_MAX, "x", 1), LAYA_OUT_OF_RANGE);  // pos + n_deleted overflows
  EXPECT_EQ(laya_session_edit(ss, SIZE_MAX, SIZE_MAX, "", 0), LAYA_OUT_OF_RANGE);
  EXPECT_EQ(laya_session_edit(ss, 0, 0, "x", SIZE_MAX), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_edit(ss, 0, 0, "\xff", 1), LAYA_INVALID_ARGUMENT);  // not UTF-8
  EXPECT_EQ(laya_session_move(ss, SIZE_MAX), LAYA_OUT_OF_RANGE);
  EXPECT_EQ(laya_session_accept(ss, SIZE_MAX), LAYA_INVALID_ARGUMENT);  // no suggestion yet
  char buf[64];
  size_t len = 0;
  for (int max_tokens : {0, -1, INT_MIN, INT_MAX, 128}) {
    EXPECT_EQ(laya_session_suggest(ss, max_tokens, 0, 0, buf, sizeof buf, &len), LAYA_INVALID_ARGUMENT) << max_tokens;
  }
  EXPECT_EQ(laya_session_suggest(ss, 4, 0, 0, buf, SIZE_MAX, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_suggest(ss, 4, 0, 0, nullptr, 8, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_suggest(ss, 4, 0, 0, buf, sizeof buf, nullptr), LAYA_INVALID_ARGUMENT);
  // Deadlines: none (NaN, <= 0), huge or infinite (clamped: no clock overflow).
  const double inf = std::numeric_limits<double>::infinity();
  for (double d : {std::nan(""), -inf, -1.0, 0.0, 1e300, inf, std::numeric_limits<double>::max()}) {
    EXPECT_EQ(laya_session_suggest(ss, 2, 0, d, buf, sizeof buf, &len), LAYA_OK) << d << ": " << err();
  }
  // A buffer too small: the length comes back.
  ASSERT_EQ(laya_session_suggest(ss, 4, 0, 0, buf, sizeof buf, &len), LAYA_OK) << err();
  if (len > 0) {
    EXPECT_EQ(laya_session_suggest(ss, 4, 0, 0, nullptr, 0, &len), LAYA_OUT_OF_RANGE);
    EXPECT_GT(len, 0u);
  }
  EXPECT_EQ(laya_session_accept(ss, SIZE_MAX), LAYA_OUT_OF_RANGE);
  laya_session_free(ss);  // the engine and tokenizer go with it
}

TEST_F(CApiMisuse, ThreadsAndContextOutOfBounds) {
  const int bound = laya::ThreadPool::max_threads();
  EXPECT_GE(bound, 4);
  EXPECT_LE(bound, 256);
  const std::string b = std::to_string(bound);
  for (int t : {100000, 1000, bound + 1, INT_MAX, -1, INT_MIN}) {
    laya_engine* e = nullptr;
    EXPECT_EQ(laya_engine_create(s_->model, t, 64, &e), LAYA_INVALID_ARGUMENT) << t;
    EXPECT_EQ(e, nullptr);
    EXPECT_TRUE(ErrorHas({("n_threads = " + std::to_string(t)).c_str(), ("or 1 to " + b).c_str()}));
  }
  laya_engine* e = nullptr;
  for (int64_t n_ctx : {int64_t{-1}, INT64_MIN}) {
    EXPECT_EQ(laya_engine_create(s_->model, 1, n_ctx, &e), LAYA_INVALID_ARGUMENT) << n_ctx;
    EXPECT_TRUE(ErrorHas({"n_ctx = "}));
  }
  for (int64_t n_ctx : {(int64_t{1} << 24) + 1, INT64_MAX}) {
    EXPECT_EQ(laya_engine_create(s_->model, 1, n_ctx, &e), LAYA_INVALID_ARGUMENT) << n_ctx;
    EXPECT_TRUE(ErrorHas({"too large"}));
  }
  EXPECT_EQ(e, nullptr);
}

TEST(ThreadLimits, CliRefusesTooManyThreads) {
  LAYA_REQUIRE_CLI();
  if (!fs::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  for (const char* t : {"100000", "1000", "-3"}) {
    const std::string cmd =
        std::string(LAYA_CLI_PATH) + " complete -m " + kModel + " -t " + t + " -p hi -n 1 --no-mlock 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int st = pclose(p);
    ASSERT_TRUE(WIFEXITED(st)) << "signal " << WTERMSIG(st) << ": " << out;
    EXPECT_EQ(WEXITSTATUS(st), 2) << out;
    // The CLI's one number parser refuses it first, naming the option (the
    // engine's own check, ThreadPool::check_count, has the same bound).
    EXPECT_NE(out.find(std::string("--threads: '") + t + "' is out of range [0, " +
                       std::to_string(laya::ThreadPool::max_threads()) + "]"),
              std::string::npos)
        << out;
  }
}

#ifndef LAYA_TEST_ASAN
// In a child process (ASan's allocator does not run under an address-space
// limit): an address-space limit a little above what the process uses makes
// the OS refuse thread stacks and allocations. Exits 0 when `f` returned the
// status expected.
size_t vm_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0;
  f >> pages;
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
void limit_address_space(size_t headroom) {
  struct rlimit rl;
  getrlimit(RLIMIT_AS, &rl);
  rl.rlim_cur = vm_bytes() + headroom;
  setrlimit(RLIMIT_AS, &rl);
}

TEST(ThreadLimits, PoolReportsARefusedThreadInsteadOfTerminating) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        limit_address_space(size_t{20} << 20);  // two or three 8 MiB stacks
        try {
          laya::ThreadPool pool(16);
          std::_Exit(3);  // all 15 workers started: the limit did not bite
        } catch (const std::system_error& ex) {
          std::fprintf(stderr, "refused: %s\n", ex.what());
          std::_Exit(0);
        }
      },
      ::testing::ExitedWithCode(0), "refused");
}

TEST(ThreadLimits, EngineCreateReportsRefusedThreadsAndMemory) {
  if (!fs::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  laya_model* m = nullptr;
  ASSERT_EQ(laya_model_load(kModel, &m), LAYA_OK) << err();
  // Threads: the bound's worth of 8 MiB stacks does not fit in 12 MiB more.
  const int threads = laya::ThreadPool::max_threads();
  EXPECT_EXIT(
      {
        limit_address_space(size_t{12} << 20);
        laya_engine* e = nullptr;
        const laya_status st = laya_engine_create(m, threads, 64, &e);
        std::fprintf(stderr, "status %d: %s\n", static_cast<int>(st), laya_last_error());
        std::_Exit(st == LAYA_OUT_OF_MEMORY && e == nullptr ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "status 7: cannot start [0-9]+ threads");
  // Memory: the largest context (16M positions: RoPE table, KV pool, scratch)
  // in 256 MiB more.
  EXPECT_EXIT(
      {
        limit_address_space(size_t{256} << 20);
        laya_engine* e = nullptr;
        const laya_status st = laya_engine_create(m, 1, int64_t{1} << 24, &e);
        std::fprintf(stderr, "status %d: %s\n", static_cast<int>(st), laya_last_error());
        std::_Exit(st == LAYA_OUT_OF_MEMORY && e == nullptr ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "status 7: ");
  laya_model_free(m);
}
#endif

// A model file truncated or rewritten while an engine uses it: reading its
// mapped pages past the new end would raise SIGBUS; each forward pass checks
// the file first and reports it.
TEST(CApiModelFile, TruncatedOrRewrittenWhileInUse) {
  if (!fs::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  const fs::path path = fs::temp_directory_path() / ("laya_capi_misuse_" + std::to_string(::getpid()) + ".gguf");
  fs::copy_file(kModel, path, fs::copy_options::overwrite_existing);
  laya_model* m = nullptr;
  ASSERT_EQ(laya_model_load(path.c_str(), &m), LAYA_OK) << err();
  laya_engine* e = nullptr;
  ASSERT_EQ(laya_engine_create(m, 1, 64, &e), LAYA_OK) << err();
  laya_sequence* q = nullptr;
  ASSERT_EQ(laya_sequence_new(e, &q), LAYA_OK);
  const int32_t ids[3] = {10, 11, 12};
  ASSERT_EQ(laya_prefill(e, q, ids, 3, 0), LAYA_OK) << err();

  fs::resize_file(path, 4096);
  EXPECT_EQ(laya_decode(e, q, 13), LAYA_IO);
  EXPECT_TRUE(ErrorHas({path.c_str(), "changed on disk after it was loaded", "4096 now"}));
  EXPECT_EQ(laya_prefill(e, q, ids, 3, 0), LAYA_IO);
  EXPECT_EQ(laya_sequence_n_past(q), 3);  // the sequence keeps what it had
  laya_tokenizer* t = nullptr;
  EXPECT_EQ(laya_tokenizer_from_model(m, &t), LAYA_IO);
  laya_engine* e2 = nullptr;
  EXPECT_EQ(laya_engine_create(m, 1, 64, &e2), LAYA_IO);
  EXPECT_EQ(e2, nullptr);

  // The same size again, but written anew: refused too (the content may differ).
  fs::copy_file(kModel, path, fs::copy_options::overwrite_existing);
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::hours(1));
  EXPECT_EQ(laya_decode(e, q, 13), LAYA_IO);
  EXPECT_TRUE(ErrorHas({"rewritten in place"}));

  laya_sequence_free(q);
  laya_engine_free(e);
  laya_model_free(m);
  fs::remove(path);
}

// Hot model swap through the C API: hostile arguments and files that are no
// model are refused with a message, and the old model keeps serving.
TEST(CApiModelSlot, HostileSwapsLeaveTheOldModelServing) {
  if (!fs::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  laya_slot* slot = nullptr;
  EXPECT_EQ(laya_slot_create(nullptr, 2, 128, &slot), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_slot_create", "path is NULL"}));
  EXPECT_EQ(laya_slot_create(kModel, 2, 128, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_slot_create(kModel, 2, -5, &slot), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"n_ctx = -5"}));
  EXPECT_EQ(laya_slot_create("/nonexistent/model.gguf", 2, 128, &slot), LAYA_NOT_FOUND);
  EXPECT_TRUE(ErrorHas({"/nonexistent/model.gguf"}));
  EXPECT_EQ(slot, nullptr);
  ASSERT_EQ(laya_slot_create(kModel, 2, 128, &slot), LAYA_OK) << err();

  laya_session* s = nullptr;
  EXPECT_EQ(laya_session_new_on_slot(nullptr, nullptr, &s), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_new_on_slot(slot, nullptr, nullptr), LAYA_INVALID_ARGUMENT);
  laya_session_options bad;
  laya_session_options_default(&bad);
  bad.fim_suffix_tokens = 0;
  EXPECT_EQ(laya_session_new_on_slot(slot, &bad, &s), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"fim_suffix_tokens"}));
  ASSERT_EQ(laya_session_new_on_slot(slot, nullptr, &s), LAYA_OK) << err();
  const char* text = "def add(a, b):\n    return ";
  ASSERT_EQ(laya_session_set_text(s, text, std::strlen(text)), LAYA_OK);
  auto suggest = [&] {
    char buf[256];
    size_t len = 0;
    EXPECT_EQ(laya_session_suggest(s, 6, 0, 0, buf, sizeof buf, &len), LAYA_OK) << err();
    return std::string(buf, len);
  };
  const std::string before = suggest();

  // Handles and paths.
  EXPECT_EQ(laya_slot_swap_model(nullptr, kModel), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_slot_swap_model", "slot is NULL"}));
  EXPECT_EQ(laya_slot_swap_model(reinterpret_cast<laya_slot*>(s), kModel), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"is a laya_session, not a laya_slot"}));
  EXPECT_EQ(laya_slot_swap_model(slot, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"path is NULL", "keeps serving"}));
  EXPECT_EQ(laya_slot_swaps(nullptr), 0);

  // Files that are no model: missing, a text file, a truncated model.
  const fs::path dir = fs::temp_directory_path() / ("laya_capi_slot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_EQ(laya_slot_swap_model(slot, (dir / "missing.gguf").c_str()), LAYA_NOT_FOUND);
  EXPECT_TRUE(ErrorHas({"swap to", "missing.gguf", "keeps serving"}));
  const fs::path notes = dir / "notes.gguf";
  std::ofstream(notes) << "these are meeting notes, not a model\n";
  EXPECT_NE(laya_slot_swap_model(slot, notes.c_str()), LAYA_OK);
  EXPECT_TRUE(ErrorHas({"swap to", "notes.gguf", "load:", "keeps serving"}));
  const fs::path truncated = dir / "truncated.gguf";
  fs::copy_file(kModel, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) / 3);
  EXPECT_EQ(laya_slot_swap_model(slot, truncated.c_str()), LAYA_CORRUPT);
  EXPECT_TRUE(ErrorHas({"swap to", "truncated.gguf", "keeps serving"}));
  EXPECT_EQ(laya_slot_swaps(slot), 0);
  EXPECT_EQ(suggest(), before);  // still the old model

  // A valid swap (a copy of the same weights): the session follows it, and
  // survives its slot handle.
  const fs::path copy = dir / "copy.gguf";
  fs::copy_file(kModel, copy);
  ASSERT_EQ(laya_slot_swap_model(slot, copy.c_str()), LAYA_OK) << err();
  EXPECT_EQ(laya_slot_swaps(slot), 1);
  laya_slot_free(slot);
  laya_slot_free(nullptr);
  EXPECT_EQ(suggest(), before);
  laya_session_free(s);
  fs::remove_all(dir);
}

}  // namespace

namespace {

TEST_F(CApiMisuse, SessionSaveAndLoad) {
  const fs::path dir = fs::temp_directory_path() / ("laya_capi_store_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "s.laya").string();
  laya_session* ss = nullptr;
  ASSERT_EQ(laya_session_new(s_->e1, s_->tok, &ss), LAYA_OK) << err();
  const std::string text = "def f(x):\n    return";
  ASSERT_EQ(laya_session_set_text(ss, text.data(), text.size()), LAYA_OK) << err();
  char buf[64];
  size_t len = 0;
  ASSERT_EQ(laya_session_suggest(ss, 4, 0, 0, buf, sizeof buf, &len), LAYA_OK) << err();
  // NULLs and wrong handles.
  EXPECT_EQ(laya_session_save(nullptr, path.c_str()), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_save(ss, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_TRUE(ErrorHas({"laya_session_save: path is NULL"}));
  EXPECT_EQ(laya_session_save(reinterpret_cast<laya_session*>(s_->e1), path.c_str()), LAYA_INVALID_ARGUMENT);
  laya_session* out = reinterpret_cast<laya_session*>(&len);  // garbage: set to NULL on error
  EXPECT_EQ(laya_session_load(s_->e1, s_->tok, nullptr, &out), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(laya_session_load(s_->e1, s_->tok, path.c_str(), nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_load(nullptr, s_->tok, path.c_str(), &out), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_load(s_->e1, nullptr, path.c_str(), &out), LAYA_INVALID_ARGUMENT);
  // A missing file; a folder as the destination.
  EXPECT_EQ(laya_session_load(s_->e1, s_->tok, (dir / "absent.laya").c_str(), &out), LAYA_NOT_FOUND);
  EXPECT_TRUE(ErrorHas({"absent.laya"}));
  EXPECT_NE(laya_session_save(ss, dir.c_str()), LAYA_OK);
  // Saved and loaded: the same suggestion.
  ASSERT_EQ(laya_session_save(ss, path.c_str()), LAYA_OK) << err();
  ASSERT_EQ(laya_session_load(s_->e1, s_->tok, path.c_str(), &out), LAYA_OK) << err();
  char buf2[64];
  size_t len2 = 0;
  ASSERT_EQ(laya_session_suggest(out, 4, 0, 0, buf2, sizeof buf2, &len2), LAYA_OK) << err();
  EXPECT_EQ(std::string(buf2, len2), std::string(buf, len));
  laya_session_free(out);
  // Corrupted: a flipped byte, a truncation, a file that is no session file.
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto load_bytes = [&](const std::string& b) {
    std::ofstream(dir / "bad.laya", std::ios::binary | std::ios::trunc).write(b.data(), static_cast<std::streamsize>(b.size()));
    laya_session* o = nullptr;
    const laya_status st = laya_session_load(s_->e1, s_->tok, (dir / "bad.laya").c_str(), &o);
    EXPECT_EQ(o, nullptr);
    return st;
  };
  std::string flipped = bytes;
  flipped[bytes.size() - 3] ^= 1;
  EXPECT_EQ(load_bytes(flipped), LAYA_CORRUPT);
  EXPECT_TRUE(ErrorHas({"payload checksum"}));
  EXPECT_EQ(load_bytes(bytes.substr(0, bytes.size() / 2)), LAYA_CORRUPT);
  EXPECT_TRUE(ErrorHas({"truncated"}));
  EXPECT_EQ(load_bytes("hello, not a session\n"), LAYA_CORRUPT);
  laya_session_free(ss);
  fs::remove_all(dir);
}

}  // namespace
