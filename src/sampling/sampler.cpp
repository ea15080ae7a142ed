#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tokenizer/tokenizer.h"

namespace laya {

namespace {

uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(&x);  // never all zero
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

Status Sampler::validate(const SamplerParams& p, int n_vocab) {
  LAYA_CHECK_OR_RETURN(n_vocab > 0, StatusCode::kInvalidArgument, "sampler: n_vocab = {}, expected > 0", n_vocab);
  LAYA_CHECK_OR_RETURN(std::isfinite(p.temperature), StatusCode::kInvalidArgument,
                       "sampler: temperature = {:g}, expected a finite value (0 = greedy)", p.temperature);
  LAYA_CHECK_OR_RETURN(p.top_k >= 0, StatusCode::kInvalidArgument, "sampler: top_k = {}, expected >= 0 (0 = off)", p.top_k);
  LAYA_CHECK_OR_RETURN(p.top_p > 0.0f && p.top_p <= 1.0f, StatusCode::kInvalidArgument,
                       "sampler: top_p = {:g}, expected in (0, 1] (1 = off)", p.top_p);
  LAYA_CHECK_OR_RETURN(p.min_p >= 0.0f && p.min_p <= 1.0f, StatusCode::kInvalidArgument,
                       "sampler: min_p = {:g}, expected in [0, 1] (0 = off)", p.min_p);
  LAYA_CHECK_OR_RETURN(p.repeat_penalty > 0.0f && std::isfinite(p.repeat_penalty), StatusCode::kInvalidArgument,
                       "sampler: repeat_penalty = {:g}, expected a finite value > 0 (1 = off)", p.repeat_penalty);
  LAYA_CHECK_OR_RETURN(p.repeat_last_n >= -1, StatusCode::kInvalidArgument,
                       "sampler: repeat_last_n = {}, expected >= -1 (0 = off, -1 = whole history)", p.repeat_last_n);
  return Status::Ok();
}

Sampler::Sampler(SamplerParams params, int n_vocab)
    : params_(params), n_vocab_(std::max(n_vocab, 1)), rng_(params.seed) {
  // Clamp rather than fail: validate() is there for callers that want errors.
  if (!std::isfinite(params_.temperature)) params_.temperature = 0.0f;
  params_.top_k = std::max(params_.top_k, 0);
  if (!(params_.top_p > 0.0f) || params_.top_p > 1.0f) params_.top_p = 1.0f;
  if (!(params_.min_p >= 0.0f)) params_.min_p = 0.0f;
  params_.min_p = std::min(params_.min_p, 1.0f);
  if (!(params_.repeat_penalty > 0.0f) || !std::isfinite(params_.repeat_penalty)) params_.repeat_penalty = 1.0f;
  params_.repeat_last_n = std::max(params_.repeat_last_n, -1);
  work_.resize(static_cast<size_t>(n_vocab_));
  idx_.resize(static_cast<size_t>(n_vocab_));
  seen_.assign(static_cast<size_t>(n_vocab_), 0);
}

void TokenMask::add(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= bits_.size() || bits_[id]) return;
  bits_[id] = 1;
  ids_.push_back(id);
}

ContinuationMasks continuation_masks(const tok::Tokenizer& tk, int n_vocab, int32_t eos_id) {
  ContinuationMasks m{TokenMask(n_vocab), TokenMask(n_vocab)};
  const int32_t n = std::min<int32_t>(n_vocab, tk.n_vocab());
  for (int32_t id = 0; id < n; ++id) {
    if (id == eos_id || tk.is_eog(id)) m.eog.add(id);
    else if (tk.is_control(id)) m.control.add(id);
  }
  return m;
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> history, const TokenMask* extra) {
  double z = 0.0;
  int32_t best = -1;
  const int m = candidates(logits, history, extra, &z, &best);
  return m < 0 ? best : draw(m, z, best);  // 8.
}

int32_t Sampler::sample_given_draft(const float* logits, std::span<const int32_t> history, int32_t draft,
                                    const TokenMask* extra) {
  double z = 0.0;
  int32_t best = -1;
  const int m = candidates(logits, history, extra, &z, &best);
  if (m < 0) return best;
  double pd = 0.0;  // the draft's weight among the candidates (0: not one)
  for (int i = 0; i < m; ++i)
    if (idx_[i] == draft) pd = std::max(0.0, static_cast<double>(work_[draft]));
  if (pd <= 0.0) return draw(m, z, best);
  if (rng_.uniform() * z < pd) return draft;
  work_[draft] = 0.0f;  // draw() skips it: the rest, renormalised
  return draw(m, z - pd, best);
}

int Sampler::candidates(const float* logits, std::span<const int32_t> history, const TokenMask* extra, double* zp,
                        int32_t* best_out) {
  load_logits(logits, extra);
  apply_repetition_penalty(history);  // 1.
  const int32_t best = argmax(extra);  // 2.
  *best_out = best;
  if (params_.temperature <= 0.0f) return -1;
  const float wmax = work_[best];
  if (wmax == kNegInf) return -1;  // every logit -inf / NaN: nothing to draw from

  // 3 + 5. Temperature and (unnormalized) softmax: p = exp((l - max) / T), so
  // the best token has p = 1 exactly. Division (not × 1/T) keeps T → 0 sane.
  float* w = work_.data();
  const float temp = params_.temperature;
  for (int i = 0; i < n_vocab_; ++i) w[i] = std::exp((w[i] - wmax) / temp);
  for (int i = 0; i < n_vocab_; ++i) idx_[i] = i;

  bool sorted = false;
  int m = top_k(&sorted);  // 4.
  double z = 0.0;
  for (int i = 0; i < m; ++i) z += w[idx_[i]];
  m = top_p(m, &z, &sorted);  // 6.
  m = min_p(m, &z);           // 7.
  *zp = z;
  return m;
}

// Copy into work_, mapping NaN to -inf and +inf to the largest float (so
// max - max = 0); masked ids become -inf.
void Sampler::load_logits(const float* logits, const TokenMask* extra) {
  float* w = work_.data();
  for (int i = 0; i < n_vocab_; ++i) {
    float v = logits[i];
    if (std::isnan(v)) v = kNegInf;
    else if (v == std::numeric_limits<float>::infinity()) v = std::numeric_limits<float>::max();
    w[i] = v;
  }
  for (const TokenMask* mask : {static_cast<const TokenMask*>(&mask_), extra}) {
    if (!mask) continue;
    for (int32_t t : mask->ids()) {
      if (t < n_vocab_) w[t] = kNegInf;
    }
  }
}

// 1. Repetition penalty, once per distinct token in the window.
void Sampler::apply_repetition_penalty(std::span<const int32_t> history) {
  const float pen = params_.repeat_penalty;
  if (pen == 1.0f || params_.repeat_last_n == 0 || history.empty()) return;
  const int n = n_vocab_;
  float* w = work_.data();
  size_t take = history.size();
  if (params_.repeat_last_n > 0) take = std::min(take, static_cast<size_t>(params_.repeat_last_n));
  std::span<const int32_t> recent = history.last(take);
  for (int32_t t : recent) {
    if (t < 0 || t >= n || seen_[t]) continue;
    seen_[t] = 1;
    w[t] = w[t] > 0.0f ? w[t] / pen : w[t] * pen;
  }
  for (int32_t t : recent) {
    if (t >= 0 && t < n) seen_[t] = 0;
  }
}

// 2. Greedy: arg-max, lowest id on ties. When every logit is -inf the lowest
// id that is not masked (0 when nothing is masked).
int32_t Sampler::argmax(const TokenMask* extra) const {
  const float* w = work_.data();
  int32_t best = 0;
  for (int i = 1; i < n_vocab_; ++i) {
    if (w[i] > w[best]) best = i;
  }
  if (w[best] == kNegInf) {
    for (int32_t i = 0; i < n_vocab_; ++i) {
      if (!mask_.contains(i) && !(extra && extra->contains(i))) return i;
    }
  }
  return best;
}

namespace {
// Total order on candidates: by probability, then by id.
struct Descending {
  const float* w;
  bool operator()(int32_t a, int32_t b) const { return w[a] > w[b] || (w[a] == w[b] && a < b); }
};
}  // namespace

// 4. Top-k: the candidates become the k most probable, sorted.
int Sampler::top_k(bool* sorted) {
  const int n = n_vocab_;
  if (params_.top_k <= 0 || params_.top_k >= n) return n;
  int32_t* idx = idx_.data();
  std::partial_sort(idx, idx + params_.top_k, idx + n, Descending{work_.data()});
  *sorted = true;
  return params_.top_k;
}

// 6. Top-p: smallest prefix (by descending p) with mass >= top_p. Returns the
// new candidate count; *z becomes their mass.
int Sampler::top_p(int m, double* z, bool* sorted) {
  if (!(params_.top_p < 1.0f) || m <= 1) return m;
  const float* w = work_.data();
  int32_t* idx = idx_.data();
  const Descending desc{w};
  const double target = static_cast<double>(params_.top_p) * *z;
  // Without top-k the candidates are unsorted: sort a growing prefix until
  // it holds the nucleus (exact; usually far cheaper than a full sort).
  int k = *sorted ? m : std::min(m, 64);
  for (;;) {
    if (!*sorted) std::partial_sort(idx, idx + k, idx + m, desc);
    double cum = 0.0;
    for (int i = 0; i < k; ++i) {
      cum += w[idx[i]];
      if (cum >= target) {
        *z = cum;
        *sorted = true;
        return i + 1;
      }
    }
    if (k == m) {  // rounding: keep everything
      *sorted = true;
      return m;
    }
    k = k * 4 >= m / 2 ? m : k * 4;  // a large nucleus: sort everything
  }
}

// 7. Min-p: p >= min_p × p_max, and p_max = 1. Keeps the candidates' order.
int Sampler::min_p(int m, double* z) {
  if (!(params_.min_p > 0.0f)) return m;
  const float* w = work_.data();
  int32_t* idx = idx_.data();
  const float thr = params_.min_p;
  int j = 0;
  double zk = 0.0;
  for (int i = 0; i < m; ++i) {
    const int32_t t = idx[i];
    if (w[t] >= thr) {  // the best token (p = 1) always survives
      idx[j++] = t;
      zk += w[t];
    }
  }
  *z = zk;
  return j;
}

// 8. Draw from the first m candidates (mass z).
int32_t Sampler::draw(int m, double z, int32_t fallback) {
  const float* w = work_.data();
  const double u = rng_.uniform() * z;
  double cum = 0.0;
  int32_t last_pos = fallback;
  for (int i = 0; i < m; ++i) {
    const int32_t t = idx_[i];
    if (w[t] <= 0.0f) continue;
    cum += w[t];
    last_pos = t;
    if (u < cum) return t;
  }
  return last_pos;  // u rounded up to z
}

}  // namespace laya
