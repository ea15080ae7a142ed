// The constants of the vector exp(x) of the SIMD kernels (the x86 softmax, and
// GELU on x86 and NEON, cpu/vec_ops.h): 2^(x·log2 e) split into 2^n · 2^f,
// f in [-0.5, 0.5], a degree-6 polynomial; relative error < 2e-7.
// One set for every ISA, so that all compute the same function (the AVX2 and
// AVX-512 softmax weights agree to the last bit but for 2^n's scaling).
#pragma once

namespace laya::cpu::exp_poly {

inline constexpr float kLog2e = 1.44269504088896341f;
// x is clamped here: n >= -126, so 2^n · p stays a normal float.
inline constexpr float kMinArg = -87.0f;
// The largest argument a caller may pass (the kernels do not clamp it: the
// softmax's are <= 0): n <= 127 and 2^127 · p < FLT_MAX (p < sqrt 2).
inline constexpr float kMaxArg = 88.0f;
// ln 2 in two parts (f·ln2 = x - n·kLn2Hi - n·kLn2Lo, for accuracy).
inline constexpr float kLn2Hi = 0.693145751953125f;
inline constexpr float kLn2Lo = 1.428606765330187045e-06f;
// Taylor coefficients of e^f, highest first (Horner's order).
inline constexpr float kCoef[7] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};

}  // namespace laya::cpu::exp_poly
