// Kernels written once for every SIMD instruction set, over a vector type V
// of that ISA (Avx2Vec in x86/vec_avx2.h, Avx512Vec in x86/vec_avx512.h,
// NeonVec in arm/vec_neon.h): the model families' elementwise ops and
// LayerNorm, KernelTable::scale_f32 .. layer_norm_f32. Their scalar truth is
// cpu/ref/kernels_ref.cpp; tests/kernels_test.cpp's KernelOps.* hold every
// table to it.
//
// Include it after V's header in a file compiled for V's ISA. V has internal
// linkage there, so every instantiation stays in that file (no copy compiled
// for one ISA can be linked into another's callers).
//
// V provides F (kWidth floats) and D (kWidth / 2 doubles); load, store, set1,
// add, sub, mul, div, fmadd (a·b + c, one rounding), min and max (NaN where b
// is NaN: x86's minps / maxps return b where either operand is, NEON's
// vminq / vmaxq the NaN), exp (exp_poly.h's, for x <= exp_poly::kMaxArg),
// zero_where_above(r, a, lim) (r's sign alone where a > lim); dzero, dset1,
// dlo / dhi (the low / high half of an F widened), dadd, dsub, dfmadd and
// dsum (the lanes' sum).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/exp_poly.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/tanh_rational.h"

namespace laya::cpu::vec {

// out[i] = op(in[i]...) for i in [0, n): whole vectors, then the last
// n % kWidth values through zero-padded copies. Every value takes the same
// instructions wherever it sits, so a result depends neither on n nor on how
// the backend splits an array across threads; nothing past n is read or
// written. out may be one of the inputs.
template <class V, class Op, class... In>
inline void apply(float* out, int64_t n, Op op, const In*... in) {
  constexpr int64_t W = V::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) V::store(out + i, op(V::load(in + i)...));
  if (i == n) return;
  const size_t k = static_cast<size_t>(n - i);
  struct Lanes {
    float v[W] = {};
  };
  auto pad = [&](const float* p) {
    Lanes l;
    std::memcpy(l.v, p + i, k * sizeof(float));
    return l;
  };
  Lanes r;
  V::store(r.v, op(V::load(pad(in).v)...));
  std::memcpy(out + i, r.v, k * sizeof(float));
}

template <class V>
void scale(float* x, int64_t n, float s) {
  const typename V::F sv = V::set1(s);
  apply<V>(x, n, [sv](typename V::F v) { return V::mul(v, sv); }, x);
}

template <class V>
void mul(float* y, const float* x, int64_t n) {
  apply<V>(y, n, [](typename V::F a, typename V::F b) { return V::mul(a, b); }, y, x);
}

// gelu_tanh(x) = 0.5·x·(1 + tanh(u)) with u = kGeluSqrt2OverPi·(x + kGeluCubic·x³),
// computed as x / (1 + e^(-2u)): the same function (1 + tanh(u) = 2 / (1 + e^(-2u))),
// with one exp and one division, and no 1 + tanh(u) that cancels where u is
// very negative (there the tanh form's float has few correct bits; this
// form keeps ~1e-7 relative until u's own rounding, |2u|·2^-24, dominates).
// Past e^(-2u) = e^88 the true value is below |x|·e^-88: the result is ±0,
// as the tanh form's is once tanh(u) rounds to -1. NaN gives NaN, +inf +inf,
// -inf -0 (the limit; the tanh form gives NaN there).
template <class V>
inline typename V::F gelu_v(typename V::F x) {
  using F = typename V::F;
  const F inner = V::fmadd(V::mul(V::set1(kGeluCubic), V::mul(x, x)), x, x);  // x + c·x³
  const F m2u = V::mul(V::set1(-2.0f * kGeluSqrt2OverPi), inner);               // -2u (×2 is exact)
  const F e = V::exp(V::min(m2u, V::set1(exp_poly::kMaxArg)));
  return V::zero_where_above(V::div(x, V::add(V::set1(1.0f), e)), m2u, exp_poly::kMaxArg);
}

template <class V>
void gelu(float* x, int64_t n) {
  apply<V>(x, n, [](typename V::F v) { return gelu_v<V>(v); }, x);
}

// tanh(x) = c · N(c²) / D(c²) with c = x clamped to ±C::kClamp (tanh_rational.h):
// only multiplies, fused multiply-adds and one division, so every ISA computes
// the same bits. The clamps take x as their second operand, so a NaN x stays
// NaN (V's min / max return b for a NaN b); ±inf gives ±1. c · (N / D), not
// (c · N) / D: N / D is near 1, so a tiny or denormal c keeps all its bits.
// C is a parameter so that tests can run this very code with a changed constant.
template <class V, class C = TanhRational>
inline typename V::F tanh_v(typename V::F x) {
  using F = typename V::F;
  const F c = V::max(V::set1(-C::kClamp), V::min(V::set1(C::kClamp), x));
  const F c2 = V::mul(c, c);
  F num = V::set1(C::kNum[0]);
  for (int i = 1; i < C::kNumTerms; ++i) num = V::fmadd(num, c2, V::set1(C::kNum[i]));
  F den = V::set1(C::kDen[0]);
  for (int i = 1; i < C::kDenTerms; ++i) den = V::fmadd(den, c2, V::set1(C::kDen[i]));
  return V::mul(c, V::div(num, den));
}

// Soft-capping, cap · tanh(x · (1 / cap)): the argument rounded as the
// reference rounds it, then tanh_v. The logit op (KernelTable::softcap_f32)
// and the x86 attention kernels' scores both run this.
template <class V, class C = TanhRational>
void softcap(float* x, int64_t n, float cap) {
  using F = typename V::F;
  const F c = V::set1(cap), inv = V::set1(1.0f / cap);
  apply<V>(x, n, [c, inv](F v) { return V::mul(c, tanh_v<V, C>(V::mul(v, inv))); }, x);
}

// The reference's two passes in double (Σx, then Σ(x - mean)²), each vector's
// halves widened into two accumulators, the last n % kWidth values added
// after them: the double sums differ from the reference's sequential ones in
// their last bits only, so mean and 1/sqrt(var + eps), rounded to float, are
// almost always the reference's. The output is one fused multiply-add per
// value ((x - mean)·inv · w + b, where the reference rounds w's product first).
template <class V>
void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  using F = typename V::F;
  using D = typename V::D;
  constexpr int64_t W = V::kWidth;
  const int64_t nv = n / W * W;
  D s0 = V::dzero(), s1 = V::dzero();
  for (int64_t i = 0; i < nv; i += W) {
    const F v = V::load(x + i);
    s0 = V::dadd(s0, V::dlo(v));
    s1 = V::dadd(s1, V::dhi(v));
  }
  double sum = V::dsum(V::dadd(s0, s1));
  for (int64_t i = nv; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  const D md = V::dset1(mean);
  s0 = s1 = V::dzero();
  for (int64_t i = 0; i < nv; i += W) {
    const F v = V::load(x + i);
    const D d0 = V::dsub(V::dlo(v), md), d1 = V::dsub(V::dhi(v), md);
    s0 = V::dfmadd(d0, d0, s0);
    s1 = V::dfmadd(d1, d1, s1);
  }
  double ss = V::dsum(V::dadd(s0, s1));
  for (int64_t i = nv; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const F m = V::set1(static_cast<float>(mean));
  const F inv = V::set1(static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps)));
  apply<V>(out, n, [m, inv](F xv, F wv, F bv) { return V::fmadd(V::mul(V::sub(xv, m), inv), wv, bv); }, x, w, b);
}

// The table entries of V's ISA.
template <class V>
void fill_ops(KernelTable& t) {
  t.scale_f32 = &scale<V>;
  t.mul_f32 = &mul<V>;
  t.gelu_f32 = &gelu<V>;
  t.softcap_f32 = &softcap<V>;
  t.layer_norm_f32 = &layer_norm<V>;
}

}  // namespace laya::cpu::vec
