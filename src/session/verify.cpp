#include "session/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace laya {

Result<double> logit_gap_where_they_part(Engine& eng, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size() || i == b.size()) return std::numeric_limits<double>::infinity();
  std::vector<int32_t> ctx(prompt);
  ctx.insert(ctx.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(i));
  if (ctx.empty()) return Status(StatusCode::kInvalidArgument, "logit_gap_where_they_part: no prompt and no shared tokens");
  const int64_t nv = eng.n_vocab();
  if (a[i] < 0 || a[i] >= nv || b[i] < 0 || b[i] >= nv)
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("logit_gap_where_they_part: token {} or {} is outside the vocabulary of {}", a[i], b[i], nv));
  std::unique_ptr<Sequence> seq = eng.new_sequence();
  LAYA_TRY(eng.prefill(*seq, ctx, 0));
  const float* lg = seq->logits();
  double big = 0;
  for (int64_t v = 0; v < nv; ++v) big = std::max(big, std::fabs(static_cast<double>(lg[v])));
  return std::fabs(static_cast<double>(lg[a[i]]) - lg[b[i]]) / std::max(big, 1e-30);
}

}  // namespace laya
