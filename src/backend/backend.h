// The boundary between the model graph and the kernels. The forward pass
// (model/transformer.cpp) is written only against this interface, so a CUDA
// or Metal backend plugs in beside the CPU one. Buffers are float32 arrays in
// the backend's memory; weights are Tensor views.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace laya {

// Precomputed RoPE angles: cos/sin[(pos * half) + i] for pos < n_pos.
struct RopeTable {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t half = 0;    // head_dim / 2
  int64_t n_pos = 0;
  bool interleaved = false;  // pairs (2i, 2i+1) instead of (i, i + half)
};

// One sequence's cache for one layer, head-major: K and V each hold n_head_kv
// slices of n_ctx * head_dim elements (n_ctx a multiple of 16), so a GQA
// group's attention reads two sequential streams. Inside a slice V is
// (position, head_dim) and K is blocked by the backend for its kernels (the
// CPU's: 16 positions transposed, cpu/attention.h).
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType type = DType::F32;  // F32, F16 or Q8_0 (int8, a float32 scale per 32 values)
  int64_t n_head_kv = 0, head_dim = 0;
  size_t head_bytes = 0;  // of one head's K (or V) slice (n_ctx positions)
  uint8_t* k_head(int64_t g) const { return static_cast<uint8_t*>(k) + static_cast<size_t>(g) * head_bytes; }
  uint8_t* v_head(int64_t g) const { return static_cast<uint8_t*>(v) + static_cast<size_t>(g) * head_bytes; }
};

struct AttentionShape {
  int64_t n_head, n_head_kv, head_dim;
  float scale;  // 1/sqrt(head_dim)
};

// One output of a grouped matmul: y (n_tok, w.rows()) = x · wᵀ.
struct MatmulOut {
  const Tensor* w;
  float* y;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // y (n_tok, rows) = x (n_tok, cols) · wᵀ, w: (rows, cols) of any supported type.
  virtual void matmul(const Tensor& w, const float* x, int64_t n_tok, float* y) = 0;
  // Several matrices over the same input x (same cols), as one parallel job:
  // q/k/v, gate/up. Saves a thread synchronisation per extra matrix.
  virtual void matmul_group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok) = 0;
  // SwiGLU feed-forward input: out (n_tok, rows) = silu(x·w_gateᵀ) * (x·w_upᵀ),
  // fused so each thread applies the activation to the rows it computed.
  // gate_scratch (n_tok, rows) holds the gate products.
  virtual void matmul_swiglu(const Tensor& w_gate, const Tensor& w_up, const float* x, int64_t n_tok, float* gate_scratch,
                             float* out) = 0;
  // out (n, cols) = rows ids[0..n) of w, dequantized.
  virtual void get_rows(const Tensor& w, const int32_t* ids, int64_t n, float* out) = 0;
  // out (n_rows, n) = x / rms(x) * w, per row of length n.
  virtual void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* out) = 0;
  // y (n_rows, n) += b (n) (bias), per row.
  virtual void add_bias(float* y, const float* b, int64_t n_rows, int64_t n) = 0;
  // y += x, n elements.
  virtual void add(float* y, const float* x, int64_t n) = 0;
  // Rotate x (n_tok, n_heads, head_dim) in place; token t is at position pos0 + t.
  virtual void rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const RopeTable& rt) = 0;
  // Write k, v (n_tok, kv_dim) into the cache rows pos0 .. pos0 + n_tok.
  virtual void kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0) = 0;
  // Causal attention of q (n_tok, n_head, head_dim) at positions pos0.. over
  // cache rows [0, pos0 + t]; out (n_tok, n_head * head_dim).
  virtual void attention(const KvLayerView& kv, const float* q, int64_t n_tok, int64_t pos0, const AttentionShape& s,
                         float* out) = 0;
};

}  // namespace laya
