// Backend conformance suite (as llama.cpp's test-backend-ops does for ggml):
// every op of the Backend interface, every weight and KV cache type, odd
// shapes, checked through the interface only against references written here
// in plain double loops. Weights are built from random data with the scalar
// reference quantizers and dequantized with the scalar reference kernels
// (src/backend/cpu/ref, the project's ground truth); everything else the
// backend computes is compared with textbook formulas.
//
// The suite is parameterized by backend name (backend_names()), so a new
// backend runs it unchanged: inputs go in with upload(), results come back
// with download(), nothing dereferences backend memory. Weight tensors are
// host Tensors in a file mapping (as the engine's are: the CPU backend gives
// back the file pages of the matrices it packs), readied by prepare_weights().
//
// Accuracy contract (error metric: max |got - ref| over an op's output divided
// by the output's scale, max |ref| or the typical magnitude of a dot product,
// whichever is larger — so a near-zero single output cannot inflate it):
//   - float paths (float weights, every weight type multiplied in float32,
//     attention on the values the cache holds): 1e-5 (the CPU
//     measures <= 2e-6 at every ISA); dequantization (get_rows) and
//     elementwise ops: 1e-6 (measured <= 1e-7);
//   - the quantized types a backend may multiply with quantized activations
//     once prepared (Q8_0, Q5_0, Q4_K, Q6_K: the CPU's VNNI kernels quantize
//     activations to ~15 bits, packed.h): 5e-4 (measured <= 2.2e-4, Q4_K).
//     One 4-bit quant step of one weight in one row fails it, as one int8
//     step of one Q8_0 weight fails the float bound (TolerancesRejectOneQuantStep);
//   - attention over an F16 / Q8_0 cache: the reference first rounds K/V as
//     the cache stores them (fp16; Q8_0: d = max|x| / 127, q = round(x / d) per
//     32 values of a position, a float32 scale), then the float bound applies.
// Each test prints one `[ measure  ]` line per group with the worst error.
// The plumbing is in backend_conformance.h; the MLX affine types' cases in
// backend_conformance_mlx_test.cpp (float paths: no backend quantizes the
// activations of an MLX matrix).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"   // the scalar reference dequantizers (ground truth); the ISA for the log
#include "format/quantize.h"  // the scalar reference quantizers
#include "core/fp16.h"
#include "backend_conformance.h"

namespace laya {

// Test names and failures print a weight type by name (ADL finds it here;
// static: no clash with another test file's).
[[maybe_unused]] static void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }

namespace {

const std::vector<DType>& weight_types() {
  static const std::vector<DType> t = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                       DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  return t;
}

// Types a backend may multiply with quantized activations once prepared.
bool int8_activation_type(DType t) {
  return t == DType::Q8_0 || t == DType::Q5_0 || t == DType::Q4_K || t == DType::Q6_K;
}


// ---- the suites --------------------------------------------------------------------------------
class BackendConformance : public ::testing::TestWithParam<std::string> {};
class BackendConformanceWeights : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

std::string weights_case_name(const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
  return std::get<0>(info.param) + "_" + dtype_name(std::get<1>(info.param));
}

constexpr int64_t kMaxCols = 4160;
constexpr int64_t kMaxBatch = 17;
const int64_t kNTok[] = {1, 3, 17};  // 1: the decode path; > 1: the GEMM paths
const int64_t kRows[] = {1, 15, 16, 17, 33, 48, 257};

// Row lengths per type: multiples of the block size, odd block counts too;
// the last is the group / SwiGLU matrices'. 4,160 (Q8_0) and 2,056 (F16,
// BF16) are long enough for the CUDA decode kernel's deep chunks (64 units of
// 16 bytes a lane), past their end by one unit and a lane.
std::vector<int64_t> cols_for(DType t) {
  const int64_t bs = dtype_info(t).block_size;
  if (bs == 256) return {256, 512};
  if (bs == 32) return {32, 4160, 96, 288};
  return {37, 2056, 96};  // float types: any length
}

// Every matrix one weight-type test multiplies, the activations, and the
// double references (computed once, shared by the backends of both variants).
struct WeightSet {
  DType type;
  std::vector<int64_t> cols_list;
  int64_t gcols;  // row length of the group / swiglu matrices
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Weight>> mats;  // (rows, cols)
  std::unique_ptr<Weight> other;                                        // a second type for the groups
  std::vector<std::pair<std::unique_ptr<Weight>, std::unique_ptr<Weight>>> ffn;  // (gate, up)
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> xs;          // (cols, n_tok)
  std::map<std::pair<const Weight*, int64_t>, MatmulRef> refs;
  std::vector<const Tensor*> all;

  WeightSet(DType t, std::mt19937& rng) : type(t), cols_list(cols_for(t)), gcols(cols_list.back()) {
    for (int64_t cols : cols_list)
      for (int64_t rows : kRows) mats[{rows, cols}] = random_weight(t, rows, cols, rng, fmt::format("w.{}.{}", rows, cols));
    // A second type in the group (as a Q4_K_M file's q/k/v mix Q4_K and Q6_K).
    const DType partner = gcols % 32 != 0 ? DType::F32 : t == DType::Q8_0 ? DType::Q4_0 : DType::Q8_0;
    other = random_weight(partner, 32, gcols, rng, "w.partner");
    for (int64_t rows : {17, 48})
      ffn.emplace_back(random_weight(t, rows, gcols, rng, "ffn_gate"), random_weight(t, rows, gcols, rng, "ffn_up"));
    for (auto& [k, w] : mats) all.push_back(&w->t);
    all.push_back(&other->t);
    for (auto& [g, u] : ffn) {
      all.push_back(&g->t);
      all.push_back(&u->t);
    }
    for (int64_t cols : cols_list)
      for (int64_t n_tok : kNTok) xs[{cols, n_tok}] = random_floats(static_cast<size_t>(cols * n_tok), rng);
  }
  const MatmulRef& ref(const Weight& w, int64_t n_tok) {
    auto it = refs.find({&w, n_tok});
    if (it == refs.end()) it = refs.emplace(std::make_pair(&w, n_tok), matmul_ref(w, xs[{w.cols(), n_tok}], n_tok)).first;
    return it->second;
  }
};

// A backend for one variant: given the matrices to prepare (the CPU packs
// what it can: Q8_0 / Q5_0 / Q4_K / Q6_K with rows % 16 == 0, on AVX-512
// VNNI) or given them only as weights (every path in float32).
struct Variant {
  bool prepared;
  std::unique_ptr<Backend> be;
  std::map<std::pair<int64_t, int64_t>, Buffer> xd;
  Buffer y[3];

  Variant(const std::string& backend, WeightSet& ws, bool prep) : prepared(prep) {
    be = make(backend, ForwardLimits{kMaxCols, 16, 1, kMaxBatch});
    must(be->prepare_weights(prepared ? ws.all : std::vector<const Tensor*>{}, ws.all), "prepare_weights");
    for (auto& [k, x] : ws.xs) xd[k] = upload(*be, x, "x");
    // Products (up to kMaxBatch x 257 rows) and get_rows' output (up to 8 rows of kMaxCols).
    for (auto& b : y) b = alloc(*be, static_cast<size_t>(std::max<int64_t>(kMaxBatch * 257, 8 * kMaxCols)) * 4, "y");
  }
  const char* name() const { return prepared ? "prepared" : "as weights"; }
  // The looser bound where the backend may multiply with quantized activations.
  bool int8_act(DType t) const { return prepared && int8_activation_type(t); }
  double bound(DType t) const { return int8_act(t) ? kInt8ActTol : kFloatTol; }
  std::string group(const char* op, DType t) const {
    return fmt::format("{} ({})", op, int8_act(t) ? "prepared, int8-act bound" : "float bound");
  }
};

// Outputs of a matmul_group: rows of each (a partner marks the other type's matrix).
struct GroupLayout {
  const char* name;
  int64_t rows[3];
  int partner_at;
};
constexpr GroupLayout kAligned{"rows 48/16/partner 32", {48, 16, 32}, 2};
constexpr GroupLayout kOddLast{"rows 16/partner 32/33", {16, 32, 33}, 1};
constexpr GroupLayout kOddFirst{"rows 33/16/partner 32", {33, 16, 32}, 2};

// matmul_group with 1..3 outputs of layout gl, every batch size.
void check_group(Variant& v, WeightSet& ws, const GroupLayout& gl, Measure& m) {
  const Weight* w[3];
  for (int i = 0; i < 3; ++i) w[i] = gl.partner_at == i ? ws.other.get() : ws.mats[{gl.rows[i], ws.gcols}].get();
  for (int n_outs = 1; n_outs <= 3; ++n_outs) {
    for (int64_t n_tok : kNTok) {
      MatmulOut outs[3];
      for (int i = 0; i < n_outs; ++i) outs[i] = MatmulOut{&w[i]->t, v.y[i].as<float>()};
      const std::string where = fmt::format("{} outputs of {}, {} cols {} n_tok {}, {}", n_outs, gl.name, dtype_name(ws.type), ws.gcols, n_tok, v.name());
      must(v.be->matmul_group(outs, n_outs, v.xd[{ws.gcols, n_tok}].as<float>(), n_tok), "matmul_group " + where);
      for (int i = 0; i < n_outs; ++i) {
        const auto got = download<float>(*v.be, outs[i].y, static_cast<size_t>(n_tok * w[i]->rows()));
        const MatmulRef& r = ws.ref(*w[i], n_tok);
        m.add(v.group("matmul_group", w[i]->t.type), rel_err(got, r.y, r.floor), v.bound(w[i]->t.type),
              fmt::format("output {} ({}) of ", i, dtype_name(w[i]->t.type)) + where);
      }
    }
  }
}

// matmul, matmul_group (1..3 outputs, a second type beside), matmul_swiglu and
// get_rows of one weight type, in both variants.
TEST_P(BackendConformanceWeights, MatmulGroupSwigluGetRows) {
  const auto& [backend, type] = GetParam();
  SKIP_IF_UNAVAILABLE(backend);
  std::mt19937 rng(1000 + static_cast<unsigned>(type));
  WeightSet ws(type, rng);
  Measure m(fmt::format("{} {}", backend, dtype_name(type)));
  for (const bool prepared : {false, true}) {
    Variant v(backend, ws, prepared);
    Backend& be = *v.be;
    float* y = v.y[0].as<float>();

    // matmul: every shape, every batch size.
    for (auto& [k, w] : ws.mats) {
      for (int64_t n_tok : kNTok) {
        must(be.matmul(w->t, v.xd[{w->cols(), n_tok}].as<float>(), n_tok, y), "matmul " + shape(*w, n_tok));
        const auto got = download<float>(be, y, static_cast<size_t>(n_tok * w->rows()));
        const MatmulRef& r = ws.ref(*w, n_tok);
        m.add(v.group("matmul", type), rel_err(got, r.y, r.floor), v.bound(type), shape(*w, n_tok) + " " + v.name());
      }
    }

    // matmul_group: every output's rows start at a multiple of 16, or the odd
    // row count comes last. Odd rows first: see MatmulGroupOddRowsFirst.
    check_group(v, ws, kAligned, m);
    check_group(v, ws, kOddLast, m);

    // matmul_swiglu: out = silu(x·gateᵀ) * (x·upᵀ).
    for (auto& [g, u] : ws.ffn) {
      for (int64_t n_tok : kNTok) {
        const int64_t rows = g->rows();
        must(be.matmul_swiglu(g->t, u->t, v.xd[{ws.gcols, n_tok}].as<float>(), n_tok, v.y[1].as<float>(), y),
             "matmul_swiglu " + shape(*g, n_tok));
        const auto got = download<float>(be, y, static_cast<size_t>(n_tok * rows));
        const MatmulRef& rg = ws.ref(*g, n_tok);
        const MatmulRef& ru = ws.ref(*u, n_tok);
        std::vector<double> want(rg.y.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = rg.y[i] / (1.0 + std::exp(-rg.y[i])) * ru.y[i];
        m.add(v.group("matmul_swiglu", type), rel_err(got, want, rg.floor * ru.floor), v.bound(type),
              shape(*g, n_tok) + " " + v.name());
      }
    }

    // get_rows: rows in any order, repeated, first and last.
    for (int64_t cols : ws.cols_list) {
      for (int64_t rows : {33, 257}) {
        const Weight& w = *ws.mats[{rows, cols}];
        const std::vector<int32_t> ids = rows == 33 ? std::vector<int32_t>{32, 0, 7, 7, 31, 16}
                                                    : std::vector<int32_t>{256, 0, 128, 255, 1};
        const int64_t n = static_cast<int64_t>(ids.size());
        must(be.get_rows(w.t, ids.data(), n, y), "get_rows " + shape(w, n));
        const auto got = download<float>(be, y, static_cast<size_t>(n * cols));
        std::vector<double> want(got.size());
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(i * cols + c)] = w.row(ids[static_cast<size_t>(i)])[c];
        m.add("get_rows", rel_err(got, want, 0), kExactTol,
              fmt::format("{} ids of {} rows {} cols {}, {}", static_cast<int>(n), dtype_name(type), rows, cols, v.name()));
      }
    }
  }
}

// Found by this suite: matmul_group split the outputs' rows, laid end to end,
// across threads in units of 16; when an earlier output's row count was not a
// multiple of 16, a later matrix's share started mid-way through a 16-row
// packed group, and the Q5_0 / Q6_K prepared paths at n_tok > 1 wrote that
// group's rows shifted (rel err 0.35-0.85 on {Q5_0 33, Q5_0 16, Q8_0 32}
// rows). Each matrix now starts on a tile boundary; this keeps it fixed.
TEST_P(BackendConformance, MatmulGroupOddRowsFirst) {
  SKIP_IF_UNAVAILABLE(GetParam());
  for (DType type : weight_types()) {
    std::mt19937 rng(1000 + static_cast<unsigned>(type));
    WeightSet ws(type, rng);
    Measure m(fmt::format("{} {}", GetParam(), dtype_name(type)));
    for (const bool prepared : {false, true}) {
      Variant v(GetParam(), ws, prepared);
      check_group(v, ws, kOddFirst, m);
    }
  }
}

// The bounds are tight enough that a kernel misreading one quant of one
// weight in one row by one step (an off-by-one nibble, a wrong rounding: the
// smallest error a wrong kernel makes) fails them: the backend's correct
// output, checked against a reference built from the matrix with one quant
// byte's low bit flipped, must exceed the bound of its class. Q8_0 (one int8
// step, the smallest) against the float bound; Q4_K (one 4-bit step) against
// the float bound and, prepared, against the int8-activation bound.
TEST_P(BackendConformance, TolerancesRejectOneQuantStep) {
  SKIP_IF_UNAVAILABLE(GetParam());
  std::mt19937 rng(7);
  const cpu::KernelTable& ref = *cpu::kernels_for(cpu::Isa::kScalar);
  struct Case {
    DType type;
    bool prepared;
    size_t quant0;  // byte of the row's first quant (element j at quant0 + j, j < 32)
  };
  for (const Case& c : {Case{DType::Q8_0, false, 2}, Case{DType::Q4_K, false, 16}, Case{DType::Q4_K, true, 16}}) {
    const int64_t cols = 256, rows = 16, r = 5;
    auto w = random_weight(c.type, rows, cols, rng, "w");
    std::unique_ptr<Backend> be = make(GetParam(), ForwardLimits{kMaxCols, 16, 1, kMaxBatch});
    must(be->prepare_weights(c.prepared ? std::vector<const Tensor*>{&w->t} : std::vector<const Tensor*>{}, {&w->t}),
         "prepare_weights");
    const double bound = c.prepared && int8_activation_type(c.type) ? kInt8ActTol : kFloatTol;
    for (int64_t n_tok : kNTok) {
      const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
      Buffer xd = upload(*be, x, "x");
      Buffer y = alloc(*be, static_cast<size_t>(n_tok * rows) * 4, "y");
      must(be->matmul(w->t, xd.as<float>(), n_tok, y.as<float>()), "matmul");
      const auto got = download<float>(*be, y.data(), static_cast<size_t>(n_tok * rows));
      MatmulRef want = matmul_ref(*w, x, n_tok);
      EXPECT_LE(rel_err(got, want.y, want.floor), bound) << dtype_name(c.type);
      // Element j of the first block, where the activations are largest.
      size_t j = 0;
      double best = -1;
      for (size_t k = 0; k < 32; ++k)
        for (int64_t t = 0; t < n_tok; ++t)
          if (std::fabs(x[static_cast<size_t>(t * cols) + k]) > best) best = std::fabs(x[static_cast<size_t>(t * cols) + k]), j = k;
      std::vector<uint8_t> bytes(w->t.row(r), w->t.row(r) + w->t.row_stride());
      bytes[c.quant0 + j] ^= 1;
      std::vector<float> off(static_cast<size_t>(cols));
      ref.dequantize_row[static_cast<uint32_t>(c.type)](bytes.data(), off.data(), cols);
      for (int64_t t = 0; t < n_tok; ++t) {
        double s = 0;
        for (int64_t k = 0; k < cols; ++k) s += static_cast<double>(off[static_cast<size_t>(k)]) * x[static_cast<size_t>(t * cols + k)];
        want.y[static_cast<size_t>(t * rows + r)] = s;
      }
      const double err = rel_err(got, want.y, want.floor);
      std::printf("[ measure  ] %s %s %s n_tok %lld: one quant step off in one weight gives rel err %.2e (bound %.0e)\n",
                  GetParam().c_str(), dtype_name(c.type), c.prepared ? "prepared" : "as weights", static_cast<long long>(n_tok),
                  err, bound);
      EXPECT_GT(err, bound) << dtype_name(c.type) << " n_tok " << n_tok << ": the bound cannot see a one-step error";
    }
  }
}

// rms_norm, add_bias, add and rope (both layouts), at odd lengths and positions > 0.
TEST_P(BackendConformance, NormBiasAddRope) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::mt19937 rng(11);
  const int64_t lens[] = {8, 37, 96, 1000};
  std::map<int64_t, std::unique_ptr<Weight>> norms, biases;
  std::vector<const Tensor*> all;
  for (int64_t n : lens) {
    norms[n] = random_vector(n, rng, "norm");
    biases[n] = random_vector(n, rng, "bias");
    all.push_back(&norms[n]->t);
    all.push_back(&biases[n]->t);
  }
  std::unique_ptr<Backend> be = make(backend, ForwardLimits{1000, 64, 1, kMaxBatch});
  must(be->prepare_weights({}, all), "prepare_weights");
  Measure m(backend);

  for (int64_t n : lens) {
    for (int64_t n_rows : {1, 3, 17}) {
      for (float eps : {1e-6f, 1e-5f}) {
        auto x = random_floats(static_cast<size_t>(n * n_rows), rng, 2.f);
        x[0] *= 30.f;  // one large value: the mean square must not overflow or lose it
        Buffer xd = upload(*be, x, "x");
        Buffer od = alloc(*be, x.size() * 4, "out");
        must(be->rms_norm(xd.as<float>(), norms[n]->t, n_rows, n, eps, od.as<float>()), "rms_norm");
        const auto got = download<float>(*be, od.data(), x.size());
        std::vector<double> want(x.size());
        for (int64_t r = 0; r < n_rows; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[static_cast<size_t>(r * n + i)]) * x[static_cast<size_t>(r * n + i)];
          const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
          for (int64_t i = 0; i < n; ++i)
            want[static_cast<size_t>(r * n + i)] = norms[n]->deq[static_cast<size_t>(i)] * x[static_cast<size_t>(r * n + i)] * inv;
        }
        m.add("rms_norm", rel_err(got, want, 0), kExactTol, fmt::format("rows {} n {} eps {}", n_rows, n, eps));
      }
      // add_bias: y (n_rows, n) += b.
      const auto y0 = random_floats(static_cast<size_t>(n * n_rows), rng);
      Buffer yd = upload(*be, y0, "y");
      must(be->add_bias(yd.as<float>(), biases[n]->t, n_rows, n), "add_bias");
      const auto got = download<float>(*be, yd.data(), y0.size());
      std::vector<double> want(y0.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<double>(y0[i]) + biases[n]->deq[i % static_cast<size_t>(n)];
      m.add("add_bias", rel_err(got, want, 0), kExactTol, fmt::format("rows {} n {}", n_rows, n));
    }
  }

  // add: y += x, at an odd offset into both buffers, leaving the neighbours alone.
  for (int64_t n : {1, 37, 4099}) {
    const auto y0 = random_floats(static_cast<size_t>(n + 2), rng), x = random_floats(static_cast<size_t>(n + 2), rng);
    Buffer yd = upload(*be, y0, "y"), xd = upload(*be, x, "x");
    must(be->add(yd.as<float>() + 1, xd.as<float>() + 1, n), "add");
    const auto got = download<float>(*be, yd.data(), y0.size());
    std::vector<double> want(y0.begin(), y0.end());
    for (int64_t i = 1; i <= n; ++i) want[static_cast<size_t>(i)] += x[static_cast<size_t>(i)];
    m.add("add", rel_err(got, want, 0), kExactTol, fmt::format("n {} at offset 1", n));
  }

  // rope: a table of n_pos positions in backend memory, both pair layouts.
  const int64_t n_pos = 64;
  for (int64_t hd : {64, 128}) {
    const int64_t half = hd / 2;
    std::vector<float> cs(static_cast<size_t>(2 * n_pos * half));
    for (int64_t p = 0; p < n_pos; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
        cs[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(a));
        cs[static_cast<size_t>(n_pos * half + p * half + i)] = static_cast<float>(std::sin(a));
      }
    }
    Buffer table = upload(*be, cs, "rope table");
    for (const bool interleaved : {false, true}) {
      const RopeTable rt{table.as<float>(), table.as<float>() + n_pos * half, half, n_pos, interleaved};
      for (int64_t n_tok : {1, 3, 17}) {
        for (int64_t pos0 : {0, 5, 40}) {
          const int64_t n_heads = 3;
          const auto x = random_floats(static_cast<size_t>(n_tok * n_heads * hd), rng);
          Buffer xd = upload(*be, x, "x");
          must(be->rope(xd.as<float>(), n_tok, n_heads, hd, pos0, rt), "rope");
          const auto got = download<float>(*be, xd.data(), x.size());
          std::vector<double> want(x.size());
          for (int64_t t = 0; t < n_tok; ++t) {
            const float* c = cs.data() + (pos0 + t) * half;
            const float* s = cs.data() + n_pos * half + (pos0 + t) * half;
            for (int64_t h = 0; h < n_heads; ++h) {
              const size_t o = static_cast<size_t>((t * n_heads + h) * hd);
              for (int64_t i = 0; i < half; ++i) {
                // The pair (a, b) rotated by the position's angle.
                const size_t ia = o + static_cast<size_t>(interleaved ? 2 * i : i);
                const size_t ib = o + static_cast<size_t>(interleaved ? 2 * i + 1 : i + half);
                const double a = x[ia], b = x[ib];
                want[ia] = a * c[i] - b * s[i];
                want[ib] = a * s[i] + b * c[i];
              }
            }
          }
          m.add(interleaved ? "rope interleaved" : "rope halves", rel_err(got, want, 0), kExactTol,
                fmt::format("hd {} n_tok {} pos0 {}", hd, n_tok, pos0));
        }
      }
    }
  }
}

// The families' elementwise ops (granite's scale, gemma's gelu and mul,
// starcoder2's layer_norm with a bias) against double-precision formulas, at
// odd lengths and offsets, rows with a large mean (LayerNorm subtracts it).
TEST_P(BackendConformance, ScaleMulGeluSoftcapLayerNorm) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::mt19937 rng(23);
  const int64_t lens[] = {8, 37, 1000};
  std::map<int64_t, std::unique_ptr<Weight>> ws, bs;
  std::vector<const Tensor*> all;
  for (int64_t n : lens) {
    ws[n] = random_vector(n, rng, "ln weight");
    bs[n] = random_vector(n, rng, "ln bias");
    all.push_back(&ws[n]->t);
    all.push_back(&bs[n]->t);
  }
  std::unique_ptr<Backend> be = make(backend, ForwardLimits{1000, 64, 1, kMaxBatch});
  must(be->prepare_weights({}, all), "prepare_weights");
  Measure m(backend);
  for (int64_t n : {1, 37, 4099, 40001}) {  // 40001: a prefill's, split across the CPU's threads
    auto y0 = random_floats(static_cast<size_t>(n + 2), rng, 4.f), x = random_floats(static_cast<size_t>(n + 2), rng, 4.f);
    y0[1] = 9.f, y0[2] = -7.f;  // GELU's tails
    Buffer yd = upload(*be, y0, "y"), xd = upload(*be, x, "x");
    must(be->scale(yd.as<float>() + 1, n, 0.22f), "scale");
    auto got = download<float>(*be, yd.data(), y0.size());
    std::vector<double> want(y0.begin(), y0.end());
    for (int64_t i = 1; i <= n; ++i) want[static_cast<size_t>(i)] *= 0.22f;
    m.add("scale", rel_err(got, want, 0), kExactTol, fmt::format("n {} at offset 1", n));

    must(be->mul(yd.as<float>() + 1, xd.as<float>() + 1, n), "mul");
    std::vector<double> want2(got.begin(), got.end());
    for (int64_t i = 1; i <= n; ++i) want2[static_cast<size_t>(i)] *= x[static_cast<size_t>(i)];
    got = download<float>(*be, yd.data(), y0.size());
    m.add("mul", rel_err(got, want2, 0), kExactTol, fmt::format("n {} at offset 1", n));

    must(be->gelu(xd.as<float>() + 1, n), "gelu");
    got = download<float>(*be, xd.data(), x.size());
    std::vector<double> want3(x.begin(), x.end());
    for (int64_t i = 1; i <= n; ++i) {
      const double v = x[static_cast<size_t>(i)];
      want3[static_cast<size_t>(i)] = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    m.add("gelu", rel_err(got, want3, 0), kExactTol, fmt::format("n {} at offset 1", n));

    // Gemma 2's logit soft-capping: y = cap * tanh(y / cap), on values past the cap too.
    auto y1 = random_floats(static_cast<size_t>(n + 2), rng, 20.f);
    Buffer sd = upload(*be, y1, "softcap");
    must(be->softcap(sd.as<float>() + 1, n, 8.0f), "softcap");
    got = download<float>(*be, sd.data(), y1.size());
    std::vector<double> want4(y1.begin(), y1.end());
    for (int64_t i = 1; i <= n; ++i) want4[static_cast<size_t>(i)] = 8.0 * std::tanh(y1[static_cast<size_t>(i)] / 8.0);
    m.add("softcap", rel_err(got, want4, 0), kExactTol, fmt::format("n {} at offset 1", n));
  }
  for (int64_t n : lens) {
    for (int64_t n_rows : {1, 3, 17}) {
      auto x = random_floats(static_cast<size_t>(n * n_rows), rng, 2.f);
      for (size_t i = 0; i < x.size(); i += 2) x[i] += 50.f;  // a mean far from 0
      Buffer xd = upload(*be, x, "x");
      Buffer od = alloc(*be, x.size() * 4, "out");
      must(be->layer_norm(xd.as<float>(), ws[n]->t, bs[n]->t, n_rows, n, 1e-5f, od.as<float>()), "layer_norm");
      const auto got = download<float>(*be, od.data(), x.size());
      std::vector<double> want(x.size());
      for (int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x.data() + r * n;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) mean += xr[i];
        mean /= static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + 1e-5);
        for (int64_t i = 0; i < n; ++i) {
          const size_t k = static_cast<size_t>(i);
          want[static_cast<size_t>(r * n + i)] = (xr[i] - mean) * inv * ws[n]->deq[k] + bs[n]->deq[k];
        }
      }
      m.add("layer_norm", rel_err(got, want, 0), kExactTol, fmt::format("rows {} n {}", n_rows, n));
    }
  }
}

// The values a cache of `type` holds for x (hd values of one position and head).
void cache_round(DType type, float* x, int64_t hd) {
  if (type == DType::F16) {
    for (int64_t i = 0; i < hd; ++i) x[i] = fp16_to_f32(f32_to_fp16(x[i]));
  } else if (type == DType::Q8_0) {
    for (int64_t b = 0; b < hd; b += 32) {
      float amax = 0;
      for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
      for (int64_t i = b; i < b + 32; ++i) x[i] = std::roundf(x[i] * id) * d;
    }
  }
}

// Plain softmax attention in double of one query token (n_head heads at q)
// over positions [0, n_kv) of k and v (rows of n_head_kv * head_dim), into
// want (n_head * head_dim); with s.window, over the last s.window positions
// only, with s.softcap, scores capped to softcap * tanh(score / softcap).
void attention_ref(const float* q, const std::vector<float>& k, const std::vector<float>& v, int64_t n_kv,
                   const AttentionShape& s, double* want) {
  const int64_t hd = s.head_dim, kvd = s.n_head_kv * hd, group = s.n_head / s.n_head_kv;
  const int64_t first = s.window > 0 && n_kv > s.window ? n_kv - s.window : 0;
  for (int64_t h = 0; h < s.n_head; ++h) {
    const int64_t g = h / group;
    const float* qh = q + h * hd;
    std::vector<double> sc(static_cast<size_t>(n_kv), -INFINITY);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = first; j < n_kv; ++j) {
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * k[static_cast<size_t>(j * kvd + g * hd + i)];
      d *= s.scale;
      sc[static_cast<size_t>(j)] = s.softcap > 0 ? s.softcap * std::tanh(d / s.softcap) : d;
      mx = std::max(mx, sc[static_cast<size_t>(j)]);
    }
    for (auto& e : sc) sum += (e = std::exp(e - mx));
    for (int64_t i = 0; i < hd; ++i) {
      double o = 0;
      for (int64_t j = first; j < n_kv; ++j) o += sc[static_cast<size_t>(j)] * v[static_cast<size_t>(j * kvd + g * hd + i)];
      want[h * hd + i] = o / sum;
    }
  }
}

// kv_store + attention for every cache type, GQA group, head size and block
// size: the sequence's blocks at shuffled ids in a pool that holds more, the
// pool filled with NaN bytes first (a kernel must read only stored positions),
// the prefix written in chunks that cross block boundaries, then n_tok queries
// at pos0 (causal: query t sees positions [0, pos0 + t]).
TEST_P(BackendConformance, KvStoreAndAttention) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::mt19937 rng(23);
  std::unique_ptr<Backend> be = make(backend, ForwardLimits{kMaxCols, 128, 8, kMaxBatch});
  must(be->prepare_weights({}, {}), "prepare_weights");
  Measure m(backend);
  const int64_t n_layer = 2, layer = 1, n_head_kv = 2;
  struct Pos {
    int64_t pos0, n_tok;
  };
  const Pos positions[] = {{0, 5}, {37, 1}, {13, 6}, {61, 9}, {100, 17}};
  int64_t pool_checks = 0;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (int64_t hd : {64, 128}) {
      for (int64_t block_pos : {16, 64}) {
        const KvLayout L{n_layer, n_head_kv, hd, type, block_pos};
        for (int group : {1, 2, 4, 7}) {
          const int64_t n_head = n_head_kv * group, kvd = n_head_kv * hd, qd = n_head * hd;
          for (const Pos& ps : positions) {
            const int64_t n_pos = ps.pos0 + ps.n_tok, n_blocks = (n_pos + block_pos - 1) / block_pos;
            const int64_t pool_blocks = n_blocks + 3;
            std::vector<int32_t> perm(static_cast<size_t>(pool_blocks));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            std::vector<int32_t> ids(perm.begin(), perm.begin() + n_blocks);
            if (n_blocks > 1 && std::is_sorted(ids.begin(), ids.end())) std::reverse(ids.begin(), ids.end());
            const size_t pool_bytes = static_cast<size_t>(pool_blocks) * L.block_bytes();
            Buffer pool = upload(*be, std::vector<uint8_t>(pool_bytes, 0xFF), "kv pool");
            const KvLayerView kv{&L, pool.as<uint8_t>(), ids.data(), n_blocks, layer};

            auto k = random_floats(static_cast<size_t>(n_pos * kvd), rng, 2.f);
            auto v = random_floats(static_cast<size_t>(n_pos * kvd), rng);
            const auto q = random_floats(static_cast<size_t>(ps.n_tok * qd), rng);
            Buffer kd = upload(*be, k, "k"), vd = upload(*be, v, "v"), qdv = upload(*be, q, "q");
            Buffer od = alloc(*be, static_cast<size_t>(ps.n_tok * qd) * 4, "out");
            // The prefix in two chunks (the first ends mid-block), then the queries' tokens.
            const int64_t cut = std::min(ps.pos0, ps.pos0 / 2 + 3);
            const std::string where = fmt::format("{} hd {} block_pos {} group {} pos0 {} n_tok {}", dtype_name(type), hd, block_pos, group, ps.pos0, ps.n_tok);
            for (const auto& [p, n] : {std::make_pair(int64_t{0}, cut), std::make_pair(cut, ps.pos0 - cut), std::make_pair(ps.pos0, ps.n_tok)}) {
              if (n > 0) must(be->kv_store(kv, kd.as<float>() + p * kvd, vd.as<float>() + p * kvd, n, p), "kv_store " + where);
            }
            const AttentionShape s{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
            must(be->attention(kv, qdv.as<float>(), ps.n_tok, ps.pos0, s, od.as<float>()), "attention " + where);
            const auto got = download<float>(*be, od.data(), static_cast<size_t>(ps.n_tok * qd));

            // Reference: plain softmax attention on the values the cache holds.
            for (int64_t p = 0; p < n_pos; ++p)
              for (int64_t g = 0; g < n_head_kv; ++g) {
                cache_round(type, k.data() + p * kvd + g * hd, hd);
                cache_round(type, v.data() + p * kvd + g * hd, hd);
              }
            std::vector<double> want(got.size());
            for (int64_t t = 0; t < ps.n_tok; ++t) attention_ref(q.data() + t * qd, k, v, ps.pos0 + t + 1, s, want.data() + t * qd);
            m.add(fmt::format("attention {} cache", dtype_name(type)), rel_err(got, want, 0), kAttnTol, where);

            // kv_store wrote only this layer's slices of the sequence's blocks.
            if (group == 1) {
              const auto bytes = download<uint8_t>(*be, pool.data(), pool_bytes);
              bool clean = true;
              for (int64_t b = 0; b < pool_blocks; ++b) {
                const bool used = std::find(ids.begin(), ids.end(), static_cast<int32_t>(b)) != ids.end();
                const size_t at = static_cast<size_t>(b) * L.block_bytes();
                const size_t n = used ? L.k_offset(layer, 0) : L.block_bytes();  // layer 0 of a used block
                for (size_t i = 0; i < n; ++i) clean &= bytes[at + i] == 0xFF;
              }
              EXPECT_TRUE(clean) << "kv_store wrote outside layer " << layer << " of its blocks: " << where;
              ++pool_checks;
            }
          }
        }
      }
    }
  }
  std::printf("[ measure  ] %s kv_store: %lld pools checked untouched outside the sequence's layer slices\n", backend.c_str(),
              static_cast<long long>(pool_checks));
}

// Decode steps as the engine issues them (step_begin, the op, step_end):
// the first captured at a short context, the others replays of the same
// recording (the same grid, q, out and KV pool) at the position they upload:
// long contexts where a CUDA decode step takes several blocks per head
// group and merges them through the group's counter, and short ones again,
// where one block suffices; a replay after a merge finds the counter at 0.
TEST_P(BackendConformance, DecodeStepsAcrossContextLengths) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::mt19937 rng(29);
  const int64_t n_pos = 1100, n_head_kv = 2, n_layer = 2, layer = 1;
  // Positions of the query token. CUDA's defaults (16 or 32 split blocks per
  // head group, 16 chunks of 16 positions a block) use 1, 5, 2, 1, 5, 5 of them.
  const int64_t steps[] = {20, 1099, 300, 20, 1040, 1099};
  Measure m(backend);
  struct Case {
    DType type;
    int64_t hd, block_pos, group;
  };
  // Every head size once; group 9 takes two blocks (and counters) per KV head and split.
  for (const Case& c : {Case{DType::F32, 64, 16, 4}, Case{DType::F16, 128, 64, 7}, Case{DType::Q8_0, 96, 64, 1},
                        Case{DType::F16, 256, 16, 2}, Case{DType::F32, 32, 64, 9}}) {
    // A backend per case: a recording is keyed by the out buffer, whose address a later case may get again.
    std::unique_ptr<Backend> be = make(backend, ForwardLimits{1024, n_pos, 9, kMaxBatch});
    must(be->prepare_weights({}, {}), "prepare_weights");
    const KvLayout L{n_layer, n_head_kv, c.hd, c.type, c.block_pos};
    const int64_t n_head = n_head_kv * c.group, kvd = n_head_kv * c.hd, qd = n_head * c.hd;
    const int64_t n_blocks = (n_pos + c.block_pos - 1) / c.block_pos;
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    Buffer pool = upload(*be, std::vector<uint8_t>(static_cast<size_t>(n_blocks) * L.block_bytes(), 0xFF), "kv pool");
    const KvLayerView kv{&L, pool.as<uint8_t>(), ids.data(), n_blocks, layer};
    auto k = random_floats(static_cast<size_t>(n_pos * kvd), rng, 2.f);
    auto v = random_floats(static_cast<size_t>(n_pos * kvd), rng);
    Buffer kd = upload(*be, k, "k"), vd = upload(*be, v, "v");
    must(be->kv_store(kv, kd.as<float>(), vd.as<float>(), n_pos, 0), "kv_store");
    for (int64_t p = 0; p < n_pos; ++p)
      for (int64_t g = 0; g < n_head_kv; ++g) {
        cache_round(c.type, k.data() + p * kvd + g * c.hd, c.hd);
        cache_round(c.type, v.data() + p * kvd + g * c.hd, c.hd);
      }
    const AttentionShape s{n_head, n_head_kv, c.hd, 1.0f / std::sqrt(static_cast<float>(c.hd))};
    Buffer qdv = alloc(*be, static_cast<size_t>(qd) * 4, "q"), od = alloc(*be, static_cast<size_t>(qd) * 4, "out");
    for (const int64_t pos : steps) {
      const std::string where = fmt::format("{} hd {} block_pos {} group {} pos {}", dtype_name(c.type), c.hd, c.block_pos, c.group, pos);
      const auto q = random_floats(static_cast<size_t>(qd), rng);
      must(be->upload(qdv.data(), q.data(), q.size() * 4), "upload q");
      bool replayed = false;
      must(be->step_begin(kv, 0, pos, od.as<float>(), &replayed), "step_begin " + where);
      if (!replayed) {
        must(be->attention(kv, qdv.as<float>(), 1, pos, s, od.as<float>()), "attention " + where);
        must(be->step_end(true), "step_end " + where);
      }
      const auto got = download<float>(*be, od.data(), static_cast<size_t>(qd));
      std::vector<double> want(got.size());
      attention_ref(q.data(), k, v, pos + 1, s, want.data());
      m.add(fmt::format("decode attention {} cache", dtype_name(c.type)), rel_err(got, want, 0), kAttnTol, where);
    }
  }
}

// A sliding window and soft-capped scores (Gemma 2's local layers), for
// every cache type: a prefill's queries, whose windows start at different
// positions of a 16-position K block, and decode steps as the engine issues
// them (a CUDA step's window follows the position it uploads on replay),
// against the plain attention over each query's last `window` positions.
TEST_P(BackendConformance, WindowedSoftcappedAttention) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::mt19937 rng(37);
  Measure m(backend);
  const int64_t n_pos = 90, n_head_kv = 2, n_layer = 1, hd = 64, block_pos = 16;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (const auto& [window, softcap] : {std::pair{int64_t{16}, 0.0f}, std::pair{int64_t{23}, 2.5f},
                                          std::pair{int64_t{40}, 50.0f}}) {
      const int group = window == 23 ? 4 : 1;
      std::unique_ptr<Backend> be = make(backend, ForwardLimits{kMaxCols, 128, 8, kMaxBatch});
      must(be->prepare_weights({}, {}), "prepare_weights");
      const KvLayout L{n_layer, n_head_kv, hd, type, block_pos};
      const int64_t n_head = n_head_kv * group, kvd = n_head_kv * hd, qd = n_head * hd;
      const int64_t n_blocks = (n_pos + block_pos - 1) / block_pos;
      std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      Buffer pool = upload(*be, std::vector<uint8_t>(static_cast<size_t>(n_blocks) * L.block_bytes(), 0xFF), "kv pool");
      const KvLayerView kv{&L, pool.as<uint8_t>(), ids.data(), n_blocks, 0};
      auto k = random_floats(static_cast<size_t>(n_pos * kvd), rng, 2.f);
      auto v = random_floats(static_cast<size_t>(n_pos * kvd), rng);
      Buffer kd = upload(*be, k, "k"), vd = upload(*be, v, "v");
      must(be->kv_store(kv, kd.as<float>(), vd.as<float>(), n_pos, 0), "kv_store");
      for (int64_t p = 0; p < n_pos; ++p)
        for (int64_t g = 0; g < n_head_kv; ++g) {
          cache_round(type, k.data() + p * kvd + g * hd, hd);
          cache_round(type, v.data() + p * kvd + g * hd, hd);
        }
      AttentionShape s{n_head, n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
      s.window = window;
      s.softcap = softcap;
      const std::string where = fmt::format("{} window {} softcap {} group {}", dtype_name(type), window, softcap, group);
      // A prefill of 17 queries from position 50: windows start at 11 ... 43 - window + 1.
      const int64_t pos0 = 50, n_tok = 17;
      const auto q = random_floats(static_cast<size_t>(n_tok * qd), rng, 3.f);
      Buffer qdv = upload(*be, q, "q"), od = alloc(*be, static_cast<size_t>(n_tok * qd) * 4, "out");
      must(be->attention(kv, qdv.as<float>(), n_tok, pos0, s, od.as<float>()), "attention " + where);
      auto got = download<float>(*be, od.data(), static_cast<size_t>(n_tok * qd));
      std::vector<double> want(got.size());
      for (int64_t t = 0; t < n_tok; ++t) attention_ref(q.data() + t * qd, k, v, pos0 + t + 1, s, want.data() + t * qd);
      m.add(fmt::format("windowed prefill {} cache", dtype_name(type)), rel_err(got, want, 0), kAttnTol, where);
      // Decode steps: captured at the first, replayed at the others.
      for (const int64_t pos : {int64_t{20}, int64_t{89}, int64_t{5}, int64_t{60}}) {
        const auto q1 = random_floats(static_cast<size_t>(qd), rng, 3.f);
        must(be->upload(qdv.data(), q1.data(), q1.size() * 4), "upload q");
        bool replayed = false;
        must(be->step_begin(kv, 0, pos, od.as<float>(), &replayed), "step_begin " + where);
        if (!replayed) {
          must(be->attention(kv, qdv.as<float>(), 1, pos, s, od.as<float>()), "attention " + where);
          must(be->step_end(true), "step_end " + where);
        }
        got = download<float>(*be, od.data(), static_cast<size_t>(qd));
        want.assign(got.size(), 0.0);
        attention_ref(q1.data(), k, v, pos + 1, s, want.data());
        m.add(fmt::format("windowed decode {} cache", dtype_name(type)), rel_err(got, want, 0), kAttnTol,
              fmt::format("{} pos {}", where, pos));
      }
    }
  }
}

// The fused sequences of the Backend interface (norm_matmul_group,
// norm_matmul_swiglu, matmul_add, rope_kv_store) against the same backend's
// separate ops: a backend that fuses them into one kernel (CUDA) must give
// what the sequence gives, in every buffer the sequence writes.
TEST_P(BackendConformance, FusedSequencesMatchTheirOps) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::mt19937 rng(31);
  Measure m(backend);
  const int64_t E = 256, F = 48;  // Q4_K rows are 256 values
  const float eps = 1e-5f;
  auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  for (DType type : {DType::BF16, DType::Q8_0, DType::Q4_K}) {
    auto norm = random_vector(E, rng, "norm");
    auto wq = random_weight(type, 33, E, rng, "wq"), wk = random_weight(type, 16, E, rng, "wk");
    auto wg = random_weight(type, F, E, rng, "gate"), wu = random_weight(type, F, E, rng, "up");
    auto wo = random_weight(type, E, E, rng, "wo");
    const std::vector<const Tensor*> mats = {&wq->t, &wk->t, &wg->t, &wu->t, &wo->t};
    std::vector<const Tensor*> all = mats;
    all.push_back(&norm->t);
    std::unique_ptr<Backend> be = make(backend, ForwardLimits{E, 16, 1, kMaxBatch});
    must(be->prepare_weights(mats, all), "prepare_weights");
    for (int64_t n_tok : kNTok) {
      const std::string where = fmt::format("{} n_tok {}", dtype_name(type), n_tok);
      const auto x = random_floats(static_cast<size_t>(E * n_tok), rng, 2.f);
      Buffer xd = upload(*be, x, "x");
      auto buf = [&](int64_t rows) { return alloc(*be, static_cast<size_t>(rows * n_tok) * 4, "out"); };
      auto get = [&](const Buffer& b, int64_t rows) { return download<float>(*be, b.data(), static_cast<size_t>(rows * n_tok)); };
      auto same = [&](const char* what, const Buffer& fused, const Buffer& seq, int64_t rows, double bound) {
        m.add(fmt::format("fused {}", what), rel_err(get(fused, rows), as_double(get(seq, rows)), 0), bound, where);
      };
      // xn = rms_norm(x); q, k = xn · wq, wk
      Buffer xn1 = buf(E), q1 = buf(33), k1 = buf(16), xn2 = buf(E), q2 = buf(33), k2 = buf(16);
      const MatmulOut o1[2] = {{&wq->t, q1.as<float>()}, {&wk->t, k1.as<float>()}};
      const MatmulOut o2[2] = {{&wq->t, q2.as<float>()}, {&wk->t, k2.as<float>()}};
      must(be->norm_matmul_group(xd.as<float>(), norm->t, eps, E, xn1.as<float>(), o1, 2, n_tok), "norm_matmul_group " + where);
      must(be->rms_norm(xd.as<float>(), norm->t, n_tok, E, eps, xn2.as<float>()), "rms_norm " + where);
      must(be->matmul_group(o2, 2, xn2.as<float>(), n_tok), "matmul_group " + where);
      same("norm_matmul_group xn", xn1, xn2, E, kExactTol);
      same("norm_matmul_group q", q1, q2, 33, kFloatTol);
      same("norm_matmul_group k", k1, k2, 16, kFloatTol);
      // gate, up = silu(xn · gate) * (xn · up)
      Buffer g1 = buf(F), u1 = buf(F), g2 = buf(F), u2 = buf(F);
      must(be->norm_matmul_swiglu(xd.as<float>(), norm->t, eps, E, xn1.as<float>(), wg->t, wu->t, n_tok, g1.as<float>(),
                                  u1.as<float>()), "norm_matmul_swiglu " + where);
      must(be->matmul_swiglu(wg->t, wu->t, xn2.as<float>(), n_tok, g2.as<float>(), u2.as<float>()), "matmul_swiglu " + where);
      same("norm_matmul_swiglu xn", xn1, xn2, E, kExactTol);
      same("norm_matmul_swiglu out", u1, u2, F, kFloatTol);
      // y += x · woᵀ
      const auto y0 = random_floats(static_cast<size_t>(E * n_tok), rng);
      Buffer y1 = upload(*be, y0, "y"), y2 = upload(*be, y0, "y"), t1 = buf(E), t2 = buf(E);
      must(be->matmul_add(wo->t, xd.as<float>(), n_tok, t1.as<float>(), y1.as<float>()), "matmul_add " + where);
      must(be->matmul(wo->t, xd.as<float>(), n_tok, t2.as<float>()), "matmul " + where);
      must(be->add(y2.as<float>(), t2.as<float>(), E * n_tok), "add " + where);
      same("matmul_add", y1, y2, E, kFloatTol);
    }
  }
  // rope(q), rope(k), kv_store(k, v): q, k and every byte of the pool.
  const int64_t hd = 64, n_head = 4, n_head_kv = 2, n_pos = 64, half = hd / 2;
  std::vector<float> cs(static_cast<size_t>(2 * n_pos * half));
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      cs[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(a));
      cs[static_cast<size_t>(n_pos * half + p * half + i)] = static_cast<float>(std::sin(a));
    }
  std::unique_ptr<Backend> be = make(backend, ForwardLimits{kMaxCols, 64, 8, kMaxBatch});
  must(be->prepare_weights({}, {}), "prepare_weights");
  Buffer table = upload(*be, cs, "rope table");
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const KvLayout L{2, n_head_kv, hd, type, 16};
    for (const bool interleaved : {false, true}) {
      const RopeTable rt{table.as<float>(), table.as<float>() + n_pos * half, half, n_pos, interleaved};
      for (int64_t n_tok : kNTok) {
        const int64_t pos0 = 5, n_blocks = (pos0 + n_tok + 15) / 16;
        const std::string where = fmt::format("{} cache, {}, n_tok {}", dtype_name(type), interleaved ? "interleaved" : "halves", n_tok);
        std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
        std::iota(ids.rbegin(), ids.rend(), 0);
        const size_t pool_bytes = static_cast<size_t>(n_blocks) * L.block_bytes();
        Buffer p1 = upload(*be, std::vector<uint8_t>(pool_bytes, 0xFF), "kv pool"), p2 = upload(*be, std::vector<uint8_t>(pool_bytes, 0xFF), "kv pool");
        const KvLayerView kv1{&L, p1.as<uint8_t>(), ids.data(), n_blocks, 1}, kv2{&L, p2.as<uint8_t>(), ids.data(), n_blocks, 1};
        const auto q = random_floats(static_cast<size_t>(n_tok * n_head * hd), rng), k = random_floats(static_cast<size_t>(n_tok * n_head_kv * hd), rng);
        const auto v = random_floats(k.size(), rng);
        Buffer q1 = upload(*be, q, "q"), k1 = upload(*be, k, "k"), q2 = upload(*be, q, "q"), k2 = upload(*be, k, "k"), vd = upload(*be, v, "v");
        must(be->rope_kv_store(kv1, q1.as<float>(), k1.as<float>(), vd.as<float>(), n_tok, n_head, n_head_kv, hd, pos0, rt), "rope_kv_store " + where);
        must(be->rope(q2.as<float>(), n_tok, n_head, hd, pos0, rt), "rope q " + where);
        must(be->rope(k2.as<float>(), n_tok, n_head_kv, hd, pos0, rt), "rope k " + where);
        must(be->kv_store(kv2, k2.as<float>(), vd.as<float>(), n_tok, pos0), "kv_store " + where);
        m.add("fused rope_kv_store q", rel_err(download<float>(*be, q1.data(), q.size()), as_double(download<float>(*be, q2.data(), q.size())), 0), kExactTol, where);
        m.add("fused rope_kv_store k", rel_err(download<float>(*be, k1.data(), k.size()), as_double(download<float>(*be, k2.data(), k.size())), 0), kExactTol, where);
        EXPECT_EQ(download<uint8_t>(*be, p1.data(), pool_bytes), download<uint8_t>(*be, p2.data(), pool_bytes)) << "KV pool bytes differ: " << where;
      }
    }
  }
}

// Memory calls: zero-filled alloc, upload / copy / download at offsets, a
// refused allocation and an unknown backend name as statuses, not crashes.
TEST_P(BackendConformance, MemoryAndErrors) {
  SKIP_IF_UNAVAILABLE(GetParam());
  const std::string backend = GetParam();
  std::unique_ptr<Backend> be = make(backend, ForwardLimits{kMaxCols, 16, 1, 1});
  EXPECT_STREQ(be->name(), backend.c_str());
  const size_t n = 3 * 4096 + 13;
  Buffer a = alloc(*be, n, "a"), b = alloc(*be, n, "b");
  ASSERT_GE(a.bytes(), n);
  const auto zeros = download<uint8_t>(*be, a.data(), n);
  EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](uint8_t c) { return c == 0; })) << "alloc is not zero-filled";
  std::vector<uint8_t> pat(n);
  for (size_t i = 0; i < n; ++i) pat[i] = static_cast<uint8_t>(i * 131 + 7);
  must(be->upload(a.as<uint8_t>() + 5, pat.data(), n - 5), "upload");
  must(be->copy(b.as<uint8_t>() + 1, a.as<uint8_t>() + 5, n - 9), "copy");
  must(be->synchronize(), "synchronize");
  const auto got = download<uint8_t>(*be, b.data(), n);
  EXPECT_EQ(got[0], 0);
  EXPECT_TRUE(std::equal(pat.begin(), pat.begin() + static_cast<std::ptrdiff_t>(n - 9), got.begin() + 1)) << "upload / copy / download";
  EXPECT_TRUE(std::all_of(got.begin() + static_cast<std::ptrdiff_t>(n - 8), got.end(), [](uint8_t c) { return c == 0; }))
      << "copy wrote past its end";

  auto huge = be->alloc(size_t{1} << 62, "a huge buffer");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(huge.status().message().find("a huge buffer"), std::string::npos) << huge.status().message();

  auto none = make_backend("no-such-backend", BackendOptions{}, ForwardLimits{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find(backend), std::string::npos) << "the error should name the available backends";
}

INSTANTIATE_TEST_SUITE_P(All, BackendConformance, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(All, BackendConformanceWeights,
                         ::testing::Combine(::testing::ValuesIn(backend_names()), ::testing::ValuesIn(weight_types())),
                         weights_case_name);

}  // namespace
}  // namespace laya
