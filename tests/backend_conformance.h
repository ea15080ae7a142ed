// The backend conformance suite's plumbing (tests/backend_conformance_test.cpp
// says what the suite checks and its accuracy contract): bounds, backend
// memory through the Backend interface only, the per-group error measure,
// weights in a file mapping with their scalar-reference dequantization, and
// the double-precision matmul reference. Shared by the suite's files (the
// MLX cases: backend_conformance_mlx_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"  // the scalar reference dequantizers (ground truth); the ISA for the log
#include "core/fp16.h"
#include "format/quantize.h"    // the scalar reference quantizers

namespace laya {
namespace {

// ---- bounds ------------------------------------------------------------------------------------
constexpr double kFloatTol = 1e-5;     // float32 arithmetic against double
constexpr double kInt8ActTol = 5e-4;   // ~15-bit activations (packed Q8_0 / Q5_0 / Q4_K / Q6_K)
constexpr double kExactTol = 1e-6;     // dequantization (get_rows), elementwise ops
constexpr double kAttnTol = 1e-5;      // attention on the values the cache holds

constexpr int kThreads = 2;

// ---- plumbing ----------------------------------------------------------------------------------
void must(const Status& st, const std::string& what) {
  if (!st.ok()) throw std::runtime_error(what + ": " + st.to_string());
}

std::unique_ptr<Backend> make(const std::string& name, const ForwardLimits& lim) {
  auto be = make_backend(name, BackendOptions{.n_threads = kThreads, .lock_memory = false, .on_prepare_progress = {}}, lim);
  must(be.status(), "make_backend(" + name + ")");
  return std::move(be).value();
}

// Why a backend this build has cannot run on this machine (the cuda backend
// without a GPU: kUnsupported from make_backend), or empty when it can.
std::string unavailable(const std::string& name) {
  auto be = make_backend(name, BackendOptions{.n_threads = 1, .lock_memory = false, .on_prepare_progress = {}}, ForwardLimits{16, 16, 1, 1});
  return be.ok() || be.status().code() != StatusCode::kUnsupported ? std::string() : be.status().message();
}
// Skips the test, naming the reason, where the backend cannot run here.
#define SKIP_IF_UNAVAILABLE(name)                                        \
  do {                                                                   \
    if (const std::string why_ = unavailable(name); !why_.empty()) GTEST_SKIP() << why_; \
  } while (0)

Buffer alloc(Backend& be, size_t bytes, const char* what) {
  auto b = be.alloc(bytes, what);
  must(b.status(), std::string("alloc ") + what);
  return std::move(b).value();
}

template <typename T>
Buffer upload(Backend& be, const std::vector<T>& v, const char* what) {
  Buffer b = alloc(be, std::max<size_t>(v.size() * sizeof(T), 1), what);
  if (!v.empty()) must(be.upload(b.data(), v.data(), v.size() * sizeof(T)), std::string("upload ") + what);
  return b;
}

template <typename T>
std::vector<T> download(Backend& be, const void* src, size_t n) {
  must(be.synchronize(), "synchronize");
  std::vector<T> v(n);
  must(be.download(v.data(), src, n * sizeof(T)), "download");
  return v;
}

const char* isa() { return cpu::isa_name(cpu::active_isa()); }

// Worst error per group of cases, and where it was; printed as one line each.
class Measure {
 public:
  explicit Measure(std::string what) : what_(std::move(what)) {}
  ~Measure() {
    for (const auto& [group, m] : groups_) {
      std::printf("[ measure  ] %s %s: max rel err %.2e (bound %.0e) over %d cases, worst %s (isa %s)\n", what_.c_str(),
                  group.c_str(), m.worst, m.bound, m.n, m.where.c_str(), isa());
    }
  }
  // Records err for `group`; a failure names the case.
  void add(const std::string& group, double err, double bound, const std::string& where) {
    Group& g = groups_[group];
    g.bound = bound;
    ++g.n;
    if (err > g.worst || g.n == 1) {
      g.worst = err;
      g.where = where;
    }
    EXPECT_LE(err, bound) << what_ << " " << group << ": " << where;
  }

 private:
  struct Group {
    double worst = 0, bound = 0;
    int n = 0;
    std::string where;
  };
  std::string what_;
  std::map<std::string, Group> groups_;
};

// max |got - ref| / max(max |ref|, floor); NaN anywhere is an infinite error.
double rel_err(const std::vector<float>& got, const std::vector<double>& ref, double floor) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = floor;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(got[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / (den > 0 ? den : 1e-30);
}

// ---- weights -----------------------------------------------------------------------------------
// Bytes in a shared memory file mapping: like a model file's mapping, pages
// given back by the backend (madvise DONTNEED) read back the same bytes.
class Mapping {
 public:
  explicit Mapping(size_t bytes) : n_(std::max<size_t>(bytes, 1)) {
    const int fd = memfd_create("laya-conformance", 0);
    if (fd < 0) throw std::runtime_error("memfd_create failed");
    if (ftruncate(fd, static_cast<off_t>(n_)) != 0) {
      close(fd);
      throw std::runtime_error("ftruncate failed");
    }
    void* p = mmap(nullptr, n_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    p_ = static_cast<uint8_t*>(p);
  }
  ~Mapping() { munmap(p_, n_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* data() const { return p_; }

 private:
  size_t n_;
  uint8_t* p_ = nullptr;
};

struct Weight {
  std::unique_ptr<Mapping> map;
  Tensor t;
  std::vector<float> deq;  // rows × cols: the scalar reference's dequantization
  int64_t rows() const { return t.rows(); }
  int64_t cols() const { return t.cols(); }
  const float* row(int64_t r) const { return deq.data() + r * cols(); }
};

// Q4_1 / Q5_1 have no quantizer in the project (no file writer needs them):
// ggml's reference rounding, min/max per block of 32.
void quantize_row_q4_1(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(y);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
    const float d = (mx - mn) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(mn);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - mn) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - mn) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q5_1(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(y);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
    const float d = (mx - mn) / 31.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>((x[j] - mn) * id + 0.5f));
      const int q1 = std::min(31, static_cast<int>((x[j + 16] - mn) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// A random (rows, cols) matrix of `type`: rows of different scales, a few
// outliers (so block scales differ), quantized by the reference quantizers.
std::unique_ptr<Weight> random_weight(DType type, int64_t rows, int64_t cols, std::mt19937& rng, const std::string& name) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.02f, 0.2f);
  std::uniform_int_distribution<int> pick(0, 63);
  auto w = std::make_unique<Weight>();
  const size_t rb = row_bytes(type, cols), bytes = rb * static_cast<size_t>(rows);
  w->map = std::make_unique<Mapping>(bytes);
  std::vector<float> src(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale(rng);
    for (auto& v : src) v = nd(rng) * s * (pick(rng) == 0 ? 4.f : 1.f);
    uint8_t* dst = w->map->data() + static_cast<size_t>(r) * rb;
    if (type == DType::Q4_1) {
      quantize_row_q4_1(src.data(), dst, cols);
    } else if (type == DType::Q5_1) {
      quantize_row_q5_1(src.data(), dst, cols);
    } else {
      if (!can_quantize(type)) throw std::runtime_error(std::string("no quantizer for ") + dtype_name(type));
      quantize_row(type, src.data(), dst, cols);
    }
  }
  w->t.name = name;
  w->t.type = type;
  w->t.n_dims = 2;
  w->t.ne[0] = cols;
  w->t.ne[1] = rows;
  w->t.data = w->map->data();
  w->t.nbytes = bytes;
  const cpu::KernelTable& ref = *cpu::kernels_for(cpu::Isa::kScalar);
  const cpu::DequantizeRowFn deq = ref.dequantize_row[static_cast<uint32_t>(type)];
  if (!deq) throw std::runtime_error(std::string("no reference dequantizer for ") + dtype_name(type));
  w->deq.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) deq(w->t.row(r), w->deq.data() + r * cols, cols);
  return w;
}

// An F32 vector tensor (norm weight, bias).
std::unique_ptr<Weight> random_vector(int64_t n, std::mt19937& rng, const std::string& name) {
  std::normal_distribution<float> nd(0.f, 1.f);
  auto w = std::make_unique<Weight>();
  w->map = std::make_unique<Mapping>(static_cast<size_t>(n) * 4);
  w->deq.resize(static_cast<size_t>(n));
  for (auto& v : w->deq) v = 1.0f + 0.3f * nd(rng);
  std::memcpy(w->map->data(), w->deq.data(), static_cast<size_t>(n) * 4);
  w->t.name = name;
  w->t.type = DType::F32;
  w->t.n_dims = 1;
  w->t.ne[0] = n;
  w->t.data = w->map->data();
  w->t.nbytes = static_cast<size_t>(n) * 4;
  return w;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float sd = 1.f) {
  std::normal_distribution<float> nd(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// y (n_tok, rows) = x · wᵀ in double, and the typical magnitude of one output
// (mean Σ|w x| / sqrt(cols)) as the metric's floor.
struct MatmulRef {
  std::vector<double> y;
  double floor = 0;
};
MatmulRef matmul_ref(const Weight& w, const std::vector<float>& x, int64_t n_tok) {
  const int64_t rows = w.rows(), cols = w.cols();
  MatmulRef r;
  r.y.resize(static_cast<size_t>(n_tok * rows));
  double mag = 0;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x.data() + t * cols;
    for (int64_t i = 0; i < rows; ++i) {
      const float* wr = w.row(i);
      double s = 0, a = 0;
      for (int64_t k = 0; k < cols; ++k) {
        s += static_cast<double>(wr[k]) * xt[k];
        a += std::fabs(static_cast<double>(wr[k]) * xt[k]);
      }
      r.y[static_cast<size_t>(t * rows + i)] = s;
      mag += a;
    }
  }
  r.floor = mag / static_cast<double>(n_tok * rows) / std::sqrt(static_cast<double>(cols));
  return r;
}

std::string shape(const Weight& w, int64_t n_tok) {
  return fmt::format("{} rows {} cols {} n_tok {}", dtype_name(w.t.type), w.rows(), w.cols(), n_tok);
}
}  // namespace
}  // namespace laya
