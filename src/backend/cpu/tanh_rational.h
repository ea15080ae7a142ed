// The constants of the CPU's one vector tanh (cpu/vec_ops.h's tanh_v, behind
// vec::softcap: the logit op on x86 and NEON and the x86 attention kernels'
// scores; the scalar reference keeps std::tanh): tanh(x) ≈ x · N(x²) / D(x²), N of
// degree 6 and D of degree 3 in x² (Eigen's fast float tanh's coefficients),
// x clamped to ±kClamp, the first float from which on the fraction is 1 (so a
// large |x| gives exactly ±1, as the reference's std::tanh does).
//
// Accuracy (the SIMD code on every non-negative float, x86 with FMA; tanh is
// odd and so is the code: KernelOps.TanhExhaustive, run by hand):
//   |tanh_v(x) - tanh(x)| <= 2.95e-7 · |tanh(x)|   (4.95 · 2^-24; worst at x = 7.168)
// One set for every ISA, evaluated with the same fused operations in the same
// order, so all compute the same bits.
#pragma once

namespace laya::cpu {

struct TanhRational {
  static constexpr int kNumTerms = 7;
  static constexpr int kDenTerms = 4;
  // N's coefficients of x^12, x^10 .. x^0 (in x², Horner's order).
  static constexpr float kNum[kNumTerms] = {-2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f,
                                            5.12229709037114e-08f,  1.48572235717979e-05f, 6.37261928875436e-04f,
                                            4.89352455891786e-03f};
  // D's coefficients of x^6, x^4, x^2, x^0.
  static constexpr float kDen[kDenTerms] = {1.19825839466702e-06f, 1.18534705686654e-04f, 2.26843463243900e-03f,
                                            4.89352518554385e-03f};
  static constexpr float kClamp = 7.99881172180175781f;
};

}  // namespace laya::cpu
