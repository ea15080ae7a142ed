// The backend conformance suite's MLX cases (DType::MLX_Q*, core/dtype.h):
// affine-quantized matrices as mlx-lm writes them (format/mlx_quantize.h),
// their scales and biases in the file mapping beside the packed values, as a
// folder's are, multiplied and looked up through every backend and compared
// with the scalar reference's dequantization (cpu/ref/affine_ref.cpp) in
// double, with the suite's float bound (backend_conformance_test.cpp): no
// backend multiplies MLX weights with quantized activations.
//
// Per width: groups of 32, 64 and 128, F16 and BF16 scales, and F32 scales
// (4 and 8 bits: the CUDA decode kernel's own units, and its general path for
// F32 scales; 2, 3, 5, 6 bits: two kinds), for one token (decode), 3 (the
// decode kernel's few tokens) and 17 (the tiled prefill): matmul of long and
// short rows, matmul_group beside an MLX matrix of other groups and a Q8_0
// one, matmul_swiglu, the fused norm and residual forms, and get_rows.
#include <tuple>

#include "backend_conformance.h"
#include "format/mlx_quantize.h"

namespace laya {
namespace {

constexpr int64_t kMlxMaxCols = 4224;
const int64_t kMlxNTok[] = {1, 3, 17};

struct MlxKind {
  int bits;
  int group;
  DType ptype;  // of the scales and biases
};

std::string kind_name(const MlxKind& k) { return fmt::format("{}-bit g{} {}", k.bits, k.group, dtype_name(k.ptype)); }

// A random (rows, cols) MLX matrix: rows of different scales and a few
// outliers, as random_weight makes them, quantized by mlx_quantize; values,
// scales and biases in one mapping; deq from the scalar reference.
std::unique_ptr<Weight> mlx_weight(const MlxKind& k, int64_t rows, int64_t cols, std::mt19937& rng, const std::string& name) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.02f, 0.2f);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> src(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale(rng);
    for (int64_t c = 0; c < cols; ++c) src[static_cast<size_t>(r * cols + c)] = nd(rng) * s * (pick(rng) == 0 ? 4.f : 1.f);
  }
  const MlxQuantizedMatrix q = mlx_quantize(src.data(), rows, cols, k.bits, k.group, k.ptype);
  const size_t qb = (q.q.size() + 63) / 64 * 64, sb = (q.scales.size() + 63) / 64 * 64;
  auto w = std::make_unique<Weight>();
  w->map = std::make_unique<Mapping>(qb + 2 * sb);
  uint8_t* base = w->map->data();
  std::memcpy(base, q.q.data(), q.q.size());
  std::memcpy(base + qb, q.scales.data(), q.scales.size());
  std::memcpy(base + qb + sb, q.biases.data(), q.biases.size());
  w->t.name = name;
  w->t.type = mlx_type(k.bits);
  w->t.n_dims = 2;
  w->t.ne[0] = cols;
  w->t.ne[1] = rows;
  w->t.data = base;
  w->t.nbytes = q.q.size();
  w->t.groups = GroupParams{base + qb, base + qb + sb, k.ptype, k.group, q.scales.size()};
  const cpu::KernelTable& ref = *cpu::kernels_for(cpu::Isa::kScalar);
  w->deq.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    ref.affine_dequantize[k.bits](cpu::affine_row(w->t.data, w->t.row_stride(), w->t.groups, cols, r),
                                  w->deq.data() + r * cols, cols);
  return w;
}

// The kinds of one width: every group with F16 and BF16 scales, and F32
// scales (the CUDA decode kernel's general path) for 4 and 8 bits (its own
// units); two for the other widths (the general path, as F32 scales are).
std::vector<MlxKind> kinds_of(int bits) {
  if (bits != 4 && bits != 8) return {{bits, 32, DType::BF16}, {bits, 128, DType::F16}};
  std::vector<MlxKind> v;
  for (int group : {32, 64, 128})
    for (DType pt : {DType::F16, DType::BF16}) v.push_back({bits, group, pt});
  v.push_back({bits, 64, DType::F32});
  return v;
}

class BackendConformanceMlx : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(BackendConformanceMlx, MatmulGroupSwigluFusedGetRows) {
  const auto& [backend, bits] = GetParam();
  SKIP_IF_UNAVAILABLE(backend);
  Measure m(fmt::format("{} MLX {}-bit", backend, bits));
  for (const MlxKind& k : kinds_of(bits)) {
    std::mt19937 rng(2000 + static_cast<unsigned>(bits * 1000 + k.group) + static_cast<unsigned>(k.ptype));
    const std::string kn = kind_name(k);
    // Another group size and scale type for the second output of a group.
    const MlxKind other{bits, k.group == 64 ? 32 : 64, k.ptype == DType::BF16 ? DType::F16 : DType::BF16};
    const int64_t E = 384;  // 12 units of 32 values: a part of a streaming chunk
    auto wide = mlx_weight(k, 129, E, rng, "wide");                // several rows a warp
    auto long_rows = mlx_weight(k, 17, kMlxMaxCols, rng, "long");  // whole chunks and a tail
    auto wq = mlx_weight(k, 48, E, rng, "wq"), wk = mlx_weight(other, 16, E, rng, "wk");
    auto wv = random_weight(DType::Q8_0, 32, E, rng, "wv");  // the CUDA per-row kernel's mixed jobs
    auto wg = mlx_weight(k, 48, E, rng, "gate"), wu = mlx_weight(k, 48, E, rng, "up");
    auto wo = mlx_weight(k, E, E, rng, "wo");
    auto norm = random_vector(E, rng, "norm");
    // The Q8_0 matrix as a weight only: the CPU would pack a prepared one and
    // multiply it with int8 activations (the suite's looser bound).
    const std::vector<const Tensor*> mats = {&wide->t, &long_rows->t, &wq->t, &wk->t, &wg->t, &wu->t, &wo->t};
    std::vector<const Tensor*> all = mats;
    all.push_back(&wv->t);
    all.push_back(&norm->t);
    std::unique_ptr<Backend> be = make(backend, ForwardLimits{kMlxMaxCols, 16, 1, 17});
    must(be->prepare_weights(mats, all), "prepare_weights " + kn);
    Buffer y = alloc(*be, static_cast<size_t>(17 * 129 + 8 * kMlxMaxCols) * 4, "y");
    for (int64_t n_tok : kMlxNTok) {
      const std::string where = fmt::format("{} n_tok {}", kn, n_tok);
      const auto x = random_floats(static_cast<size_t>(kMlxMaxCols * n_tok), rng);
      const std::vector<float> xe(x.begin(), x.begin() + E * n_tok);
      Buffer xd = upload(*be, x, "x"), xed = upload(*be, xe, "x");
      // matmul
      for (const Weight* w : {wide.get(), long_rows.get()}) {
        const std::vector<float>& xw = w->cols() == E ? xe : x;
        must(be->matmul(w->t, (w->cols() == E ? xed : xd).as<float>(), n_tok, y.as<float>()), "matmul " + where);
        const MatmulRef r = matmul_ref(*w, xw, n_tok);
        m.add("matmul", rel_err(download<float>(*be, y.data(), r.y.size()), r.y, r.floor), kFloatTol,
              shape(*w, n_tok) + " " + kn);
      }
      // matmul_group: q (this kind), k (other groups and scales), v (Q8_0)
      Buffer o[3] = {alloc(*be, 48 * 17 * 4, "q"), alloc(*be, 16 * 17 * 4, "k"), alloc(*be, 32 * 17 * 4, "v")};
      const Weight* gw[3] = {wq.get(), wk.get(), wv.get()};
      for (int n_outs = 1; n_outs <= 3; ++n_outs) {
        MatmulOut outs[3];
        for (int i = 0; i < n_outs; ++i) outs[i] = MatmulOut{&gw[i]->t, o[i].as<float>()};
        must(be->matmul_group(outs, n_outs, xed.as<float>(), n_tok), "matmul_group " + where);
        for (int i = 0; i < n_outs; ++i) {
          const MatmulRef r = matmul_ref(*gw[i], xe, n_tok);
          m.add("matmul_group", rel_err(download<float>(*be, o[i].data(), r.y.size()), r.y, r.floor), kFloatTol,
                fmt::format("output {} ({}) of {}, {}", i, gw[i]->t.name, n_outs, where));
        }
      }
      // matmul_swiglu
      Buffer gate = alloc(*be, 48 * 17 * 4, "gate"), out = alloc(*be, 48 * 17 * 4, "out");
      must(be->matmul_swiglu(wg->t, wu->t, xed.as<float>(), n_tok, gate.as<float>(), out.as<float>()), "matmul_swiglu " + where);
      const MatmulRef rg = matmul_ref(*wg, xe, n_tok), ru = matmul_ref(*wu, xe, n_tok);
      std::vector<double> want(rg.y.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = rg.y[i] / (1.0 + std::exp(-rg.y[i])) * ru.y[i];
      m.add("matmul_swiglu", rel_err(download<float>(*be, out.data(), want.size()), want, rg.floor * ru.floor), kFloatTol,
            where);
      // The fused forms against the same backend's separate ops (the CUDA
      // decode kernel normalises x as it stages it: the sums its MLX units
      // read are of the normalised x).
      auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
      auto get = [&](const Buffer& b, int64_t rows) { return download<float>(*be, b.data(), static_cast<size_t>(rows * n_tok)); };
      Buffer xn1 = alloc(*be, E * 17 * 4, "xn"), xn2 = alloc(*be, E * 17 * 4, "xn"), q1 = alloc(*be, 48 * 17 * 4, "q");
      const MatmulOut fo[2] = {{&wq->t, q1.as<float>()}, {&wk->t, o[1].as<float>()}};
      must(be->norm_matmul_group(xed.as<float>(), norm->t, 1e-5f, E, xn1.as<float>(), fo, 2, n_tok), "norm_matmul_group " + where);
      must(be->rms_norm(xed.as<float>(), norm->t, n_tok, E, 1e-5f, xn2.as<float>()), "rms_norm " + where);
      const MatmulOut so[1] = {{&wq->t, o[0].as<float>()}};
      must(be->matmul_group(so, 1, xn2.as<float>(), n_tok), "matmul_group " + where);
      m.add("fused norm_matmul_group", rel_err(get(q1, 48), as_double(get(o[0], 48)), 0), kFloatTol, where);
      must(be->norm_matmul_swiglu(xed.as<float>(), norm->t, 1e-5f, E, xn1.as<float>(), wg->t, wu->t, n_tok,
                                  gate.as<float>(), out.as<float>()), "norm_matmul_swiglu " + where);
      Buffer out2 = alloc(*be, 48 * 17 * 4, "out");
      must(be->matmul_swiglu(wg->t, wu->t, xn2.as<float>(), n_tok, o[0].as<float>(), out2.as<float>()), "matmul_swiglu " + where);
      m.add("fused norm_matmul_swiglu", rel_err(get(out, 48), as_double(get(out2, 48)), 0), kFloatTol, where);
      const auto y0 = random_floats(static_cast<size_t>(E * n_tok), rng);
      Buffer y1 = upload(*be, y0, "y"), y2 = upload(*be, y0, "y"), t = alloc(*be, E * 17 * 4, "t");
      must(be->matmul_add(wo->t, xed.as<float>(), n_tok, t.as<float>(), y1.as<float>()), "matmul_add " + where);
      must(be->matmul(wo->t, xed.as<float>(), n_tok, t.as<float>()), "matmul " + where);
      must(be->add(y2.as<float>(), t.as<float>(), E * n_tok), "add " + where);
      m.add("fused matmul_add", rel_err(get(y1, E), as_double(get(y2, E)), 0), kFloatTol, where);
    }
    // get_rows (an MLX embedding): rows in any order, repeated, first and last.
    for (const Weight* w : {wide.get(), long_rows.get()}) {
      const std::vector<int32_t> ids = w->rows() == 129 ? std::vector<int32_t>{128, 0, 64, 127, 1, 0}
                                                         : std::vector<int32_t>{16, 0, 7, 7};
      const int64_t n = static_cast<int64_t>(ids.size()), cols = w->cols();
      must(be->get_rows(w->t, ids.data(), n, y.as<float>()), "get_rows " + kn);
      std::vector<double> want(static_cast<size_t>(n * cols));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(i * cols + c)] = w->row(ids[static_cast<size_t>(i)])[c];
      m.add("get_rows", rel_err(download<float>(*be, y.data(), want.size()), want, 0), kExactTol,
            fmt::format("{} ids of {} rows {} cols, {}", n, w->rows(), cols, kn));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, BackendConformanceMlx,
                         ::testing::Combine(::testing::ValuesIn(backend_names()), ::testing::Values(4, 8, 2, 3, 5, 6)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, int>>& i) {
                           return fmt::format("{}_MLX{}", std::get<0>(i.param), std::get<1>(i.param));
                         });

}  // namespace
}  // namespace laya
