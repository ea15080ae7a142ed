/* Compiled as C: the public header is valid C, and a minimal generation
 * loop works through it. Returns 0 on success, else the failing step. */
#include <stdio.h>
#include <string.h>

#include "laya/laya.h"

int laya_capi_c_smoke(const char* model_path) {
  laya_model* m = NULL;
  laya_engine* e = NULL;
  laya_sequence* s = NULL;
  laya_tokenizer* t = NULL;
  int32_t ids[64];
  int64_t n = 0;
  int rc = 0;
  if (laya_model_load(model_path, &m) != LAYA_OK) return 1;
  if (laya_engine_create(m, 1, 128, &e) != LAYA_OK) { rc = 2; goto done; }
  if (laya_tokenizer_from_model(m, &t) != LAYA_OK) { rc = 3; goto done; }
  if (laya_tokenize(t, "hello world", 11, 0, -1, ids, 64, &n) != LAYA_OK || n <= 0) { rc = 4; goto done; }
  if (laya_sequence_new(e, &s) != LAYA_OK) { rc = 5; goto done; }
  if (laya_prefill(e, s, ids, n, 0) != LAYA_OK) { rc = 6; goto done; }
  for (int step = 0; step < 4; ++step) {
    const float* lg = laya_sequence_logits(s);
    int32_t best = 0;
    for (int64_t i = 1; i < laya_engine_n_vocab(e); ++i)
      if (lg[i] > lg[best]) best = (int32_t)i;
    if (laya_decode(e, s, best) != LAYA_OK) { rc = 7; goto done; }
  }
  if (laya_sequence_n_past(s) != n + 4) { rc = 8; goto done; }
  /* "" when locked, else the reason naming the limit (either is fine here). */
  const char* note = laya_engine_memory_lock_note(e);
  if (note == NULL || (note[0] != '\0' && strstr(note, "ulimit -l") == NULL)) { rc = 10; goto done; }
  if (laya_prefill(e, s, ids, 1, 1000) != LAYA_OUT_OF_RANGE || strlen(laya_last_error()) == 0) { rc = 9; goto done; }
done:
  laya_sequence_free(s);
  laya_tokenizer_free(t);
  laya_engine_free(e);
  laya_model_free(m);
  return rc;
}
