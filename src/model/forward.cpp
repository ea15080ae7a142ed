// The forward scratch every architecture's forward pass works in (model/forward.h).
#include "model/forward.h"

namespace laya {

Result<ForwardScratch> ForwardScratch::create(Backend& be, const HParams& hp, int64_t nb) {
  ForwardScratch s;
  s.n_batch = nb;
  auto floats = [&](Buffer* b, int64_t per_token) -> Status {
    LAYA_ASSIGN_OR_RETURN(*b, be.alloc(static_cast<size_t>(nb * per_token) * sizeof(float), "the forward scratch"));
    return Status::Ok();
  };
  LAYA_TRY(floats(&s.x, hp.n_embd));
  LAYA_TRY(floats(&s.xn, hp.n_embd));
  LAYA_TRY(floats(&s.q, hp.q_dim()));
  LAYA_TRY(floats(&s.k, hp.kv_dim()));
  LAYA_TRY(floats(&s.v, hp.kv_dim()));
  LAYA_TRY(floats(&s.attn, hp.q_dim()));
  LAYA_TRY(floats(&s.gate, hp.n_ff));
  LAYA_TRY(floats(&s.up, hp.n_ff));
  LAYA_TRY(floats(&s.tmp, hp.n_embd));
  return s;
}

}  // namespace laya
