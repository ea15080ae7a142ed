// Telling a near tie from a real difference, for `laya replay --verify`: an
// incremental suggestion and a from-scratch one that part at some token.
//
// On the CPU backend the two compute the same bits and any difference is a
// bug. A backend whose prefill and decode kernels sum in different orders
// (CUDA: a tiled GEMM for a prompt, a warp-per-row matvec for one token)
// differs in the last bits, and where two logits are nearly equal the greedy
// choice can go either way. The measure: where the two token lists first
// differ, both tokens' logits from scratch, their gap over the largest |logit|.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace laya {

// `prompt` then the tokens a and b share, prefilled on a new sequence of
// `eng`; |logit(a[i]) - logit(b[i])| / max |logit| at the first i where they
// differ. +infinity when they do not differ there (equal, or one is a prefix
// of the other: stopping early is not a near tie).
Result<double> logit_gap_where_they_part(Engine& eng, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace laya
