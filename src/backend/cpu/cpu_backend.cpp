#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <fmt/format.h>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <sys/mman.h>
#include <unistd.h>

#include "core/foreground.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "core/fp16.h"
#include "core/memlock.h"

namespace laya {

namespace {

// [begin, end) of n items for thread ti of nt, in units of `grain`.
inline void split(int64_t n, int ti, int nt, int64_t grain, int64_t* b, int64_t* e) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t per = units / nt, extra = units % nt;
  const int64_t ub = ti * per + std::min<int64_t>(ti, extra);
  const int64_t ue = ub + per + (ti < extra ? 1 : 0);
  *b = std::min(n, ub * grain);
  *e = std::min(n, ue * grain);
}

}  // namespace

Result<std::unique_ptr<Backend>> CpuBackend::create(const BackendOptions& opt, const ForwardLimits& lim) {
  LAYA_TRY(ThreadPool::check_count(opt.n_threads));
  cpu::Isa isa = cpu::active_isa();
  if (!opt.isa.empty()) {
    if (!cpu::parse_isa(opt.isa, &isa)) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("cpu backend: unknown instruction set '{}' (scalar, avx2, avx512, neon)", opt.isa));
    }
    if (!cpu::isa_supported(isa)) {
      return Status(StatusCode::kUnsupported,
                    fmt::format("cpu backend: this CPU or build has no {} kernels", opt.isa));
    }
  }
  int n = opt.n_threads;
  if (n == 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    return std::unique_ptr<Backend>(new CpuBackend(opt, lim, n, isa));
  } catch (const std::system_error& e) {
    return Status(StatusCode::kOutOfMemory, fmt::format("cannot start {} threads: {}", n, e.what()));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "cpu backend: out of memory for its scratch");
  }
}

CpuBackend::CpuBackend(const BackendOptions& opt, const ForwardLimits& lim, int n_threads, cpu::Isa isa)
    : opt_(opt),
      lim_(lim),
      isa_(isa),
      kt_(cpu::kernels_for(isa)),
      pool_(n_threads, opt.background, std::chrono::milliseconds(opt.awake_ms)) {
  counters_ = std::make_unique<RowCounter[]>(static_cast<size_t>(pool_.size()));
  scratch_.resize(static_cast<size_t>(pool_.size()));
  for (auto& s : scratch_) {
    s.tile.resize(static_cast<size_t>(kTileRows * lim.max_cols));
    s.tileT.resize(static_cast<size_t>(kTileRows * lim.max_cols));
    s.scores.resize(static_cast<size_t>(cpu::scores_stride(std::max<int64_t>(lim.max_ctx, 1)) *
                                        std::max<int64_t>(lim.max_group, 1)));
  }
  // The affine kernels' view of each token's activations (prepare_affine_input),
  // for passes of up to kExactRowsMax tokens: 33 floats per 32 values.
  const size_t ac = static_cast<size_t>((std::max<int64_t>(lim.max_cols, 32) + 31) / 32 * 32);
  affine_x4_.resize(static_cast<size_t>(kExactRowsMax) * ac);
  affine_sum_.resize(static_cast<size_t>(kExactRowsMax) * ac / 32);
  affine_x_.resize(static_cast<size_t>(kExactRowsMax));
  // Resolve the ISA's kernels once, outside any hot path.
  gemm_ = cpu::gemm_tile_for(isa_);
  use_tileT_ = isa_ == cpu::Isa::kAvx512;
  // Activations quantized for the packed int8 kernels, one row per token of
  // a forward pass (row 0 is the decode input). Only where the kernels exist.
  if (cpu::packed_matvec_best(isa_)) {
    const size_t mc = static_cast<size_t>(std::max<int64_t>(lim.max_cols, 32));
    const size_t nb = mc / 32 + 1, bt = static_cast<size_t>(std::max<int64_t>(lim.max_batch, 1));
    qx_hi_.resize(bt * mc);
    qx_lo_.resize(bt * mc);
    qx_d_.resize(bt * nb);
    qx_sum_.resize(bt * nb);
    qx_corr_.resize(bt * nb);
    qx_corr16_.resize(bt * 2 * nb);
    qx_.resize(bt);
    for (size_t t = 0; t < bt; ++t) {
      qx_[t] = cpu::QuantizedX{0, qx_hi_.data() + t * mc, qx_lo_.data() + t * mc, qx_d_.data() + t * nb,
                               qx_corr_.data() + t * nb, qx_sum_.data() + t * nb, qx_corr16_.data() + t * 2 * nb};
    }
  }
}

CpuBackend::~CpuBackend() {
  unlock_pages(packed_buf_, packed_alloc_);  // see unlock_pages: else it stays resident after the free
  std::free(packed_buf_);
}

size_t CpuBackend::pack(const std::vector<const Tensor*>& matrices, std::atomic<uint64_t>* done,
                        const std::function<void()>& report) {
  quantize_x_ = cpu::quantize_x_best(isa_);
  if (!cpu::packed_matvec_best(isa_) || packed_buf_) return 0;
  std::vector<const Tensor*> todo;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const Tensor* t : matrices) {
    if (!t->present() || !cpu::packable(*t) || t->cols() > lim_.max_cols) continue;
    bool dup = false;
    for (const Tensor* u : todo) dup |= u->data == t->data;  // tied embeddings
    if (dup) continue;
    todo.push_back(t);
    offsets.push_back(total);
    total += cpu::packed_bytes(*t);
  }
  if (todo.empty()) return 0;
  // 2 MiB-aligned so the kernel can back it with huge pages: decode streams
  // every byte once per token, and 4 KiB pages cost a TLB miss per page.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t alloc = (total + kHuge - 1) / kHuge * kHuge;
  packed_buf_ = static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc));
  if (!packed_buf_) return 0;  // keep the file layout
  packed_alloc_ = alloc;
  madvise(packed_buf_, alloc, MADV_HUGEPAGE);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<cpu::PackedMatrix> mats(todo.size());
  // Pack on every thread (largest first is not needed: ~200 matrices).
  std::atomic<size_t> next{0};
  const bool background = pool_.solo();
  pool_.run_each([&](int ti, int) {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
      if (background) foreground::yield();  // a swap's packing gives way to keystrokes, matrix by matrix
      const Tensor* t = todo[i];
      cpu::pack(*t, packed_buf_ + offsets[i], &mats[i]);
      done->fetch_add(t->nbytes, std::memory_order_relaxed);
      if (ti == 0) report();  // the caller's thread: the callback's promise (BackendOptions)
      // Give back the file pages wholly inside this tensor (they are clean and
      // file-backed: a later read, e.g. an embedding row, faults them back in).
      const uintptr_t b = (reinterpret_cast<uintptr_t>(t->data) + page - 1) / page * page;
      const uintptr_t e = (reinterpret_cast<uintptr_t>(t->data) + t->nbytes) / page * page;
      if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
    }
  });
  for (size_t i = 0; i < todo.size(); ++i)
    packed_.emplace(todo[i]->data, PackedEntry{mats[i], cpu::packed_matvec_for(mats[i].type, isa_)});
  return total;
}

Status CpuBackend::prepare_weights(const std::vector<const Tensor*>& matrices, const std::vector<const Tensor*>& all) {
  // Progress in bytes of the file: each distinct tensor once, as packed or as
  // locked (both read all of it).
  uint64_t total = 0;
  std::unordered_set<const uint8_t*> seen;
  for (const auto* list : {&matrices, &all})
    for (const Tensor* t : *list)
      if (t->present() && seen.insert(t->data).second) total += t->nbytes;
  std::atomic<uint64_t> done{0};
  const std::function<void()> report = [&] {
    if (opt_.on_prepare_progress) opt_.on_prepare_progress(std::min<uint64_t>(done.load(), total), total);
  };
  try {
    packed_bytes_ += pack(matrices, &done, report);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "cpu backend: out of memory while packing the weights");
  }
  if (packed_buf_) lock(packed_buf_, packed_alloc_, "the packed weights");
  // The rest is read from the file mapping. Packed matrices' file pages were
  // given back; locking them would read them in again.
  for (const Tensor* t : all) {
    if (!t->present() || packed(*t)) continue;
    lock(t->data, t->nbytes, "the weights");
    if (t->groups.nbytes) {  // an MLX tensor's scales and biases, read with every row
      lock(t->groups.scales, t->groups.nbytes, "the weights");
      lock(t->groups.biases, t->groups.nbytes, "the weights");
    }
    done.fetch_add(t->nbytes, std::memory_order_relaxed);
    report();
  }
  done.store(total);
  report();  // done == total: the end, always said
  return Status::Ok();
}

void CpuBackend::lock(const void* p, size_t n, const char* what) {
  if (!opt_.lock_memory || !lock_note_.empty()) return;  // one refusal is enough to know
  if (Status st = lock_pages(p, n, what); !st.ok()) lock_note_ = st.message();
}

Result<Buffer> CpuBackend::alloc(size_t bytes, const char* what) {
  // 64-byte aligned for the vector kernels; 2 MiB-aligned when large, so the
  // kernel can back it with huge pages (fewer TLB misses on streamed KV).
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t n = std::max<size_t>((bytes + align - 1) / align * align, align);
  if (n < bytes) return Status(StatusCode::kOutOfMemory, fmt::format("{}: {} bytes cannot be allocated", what, bytes));
  void* p = std::aligned_alloc(align, n);
  if (!p) {
    return Status(StatusCode::kOutOfMemory,
                  fmt::format("{}: cannot allocate {:.1f} MB of host memory", what, static_cast<double>(bytes) / 1e6));
  }
  if (align == kHuge) madvise(p, n, MADV_HUGEPAGE);
  std::memset(p, 0, n);  // touch the pages now, not during the first keystroke
  lock(p, n, what);
  return Buffer(this, p, n);
}

void CpuBackend::release(void* data, size_t bytes) {
  unlock_pages(data, bytes);
  std::free(data);
}

Status CpuBackend::upload(void* dst, const void* host_src, size_t bytes) {
  std::memcpy(dst, host_src, bytes);
  return Status::Ok();
}

Status CpuBackend::download(void* host_dst, const void* src, size_t bytes) {
  std::memcpy(host_dst, src, bytes);
  return Status::Ok();
}

Status CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  std::memmove(dst, src, bytes);
  return Status::Ok();
}

const char* CpuBackend::name() const { return "cpu"; }

bool CpuBackend::uses_packed_gemm(const PackedEntry* pe, int64_t n_tok) const {
#if defined(LAYA_HAVE_X86)
  if (n_tok <= 1 || n_tok > static_cast<int64_t>(qx_.size())) return false;
  return pe && cpu::packed_gemm_supported(pe->m.type);
#else
  (void)pe;
  (void)n_tok;
  return false;
#endif
}

void CpuBackend::quantize_packed_input(const PackedEntry* const* pes, int n, const float* x, int64_t cols,
                                       int64_t n_tok) {
  bool needed = false;
  // A small pass runs every packed matrix per token (matmul_rows), a long one
  // only those with a packed GEMM.
  for (int i = 0; i < n; ++i) needed |= n_tok <= kExactRowsMax ? pes[i] != nullptr : uses_packed_gemm(pes[i], n_tok);
  if (!needed) return;
  for (int64_t t = 0; t < n_tok; ++t) quantize_x_(x + t * cols, cols, &qx_[static_cast<size_t>(t)]);
}

void CpuBackend::matmul_rows(const Tensor& w, const PackedEntry* pe, const float* x, int64_t n_tok, float* y, int64_t b,
                             int64_t e, int ti) {
  const int64_t rows = w.rows(), cols = w.cols();
#if defined(LAYA_HAVE_X86)
  if (uses_packed_gemm(pe, n_tok)) {
    cpu::packed_gemm_avx512vnni(pe->m, b / cpu::kPackRows, (e + cpu::kPackRows - 1) / cpu::kPackRows, qx_.data(),
                                n_tok, y, rows);
    return;
  }
#endif
  if (pe) {
    const cpu::PackedMatrix* pm = &pe->m;
    // Row ranges are multiples of kTileRows == kPackRows (see matmul_group).
    if (n_tok <= kExactRowsMax) {
      // One matvec per token: the bits of decoding each alone. (Q8_0 and
      // Q4_K took the packed GEMM above: the same integer sums and float
      // steps in the same order as their matvecs, so exact too.)
      // Group by group, so a group's bytes are read from memory once.
      for (int64_t g = b / cpu::kPackRows; g < (e + cpu::kPackRows - 1) / cpu::kPackRows; ++g)
        for (int64_t t = 0; t < n_tok; ++t) pe->matvec(*pm, g, g + 1, qx_[static_cast<size_t>(t)], y + t * rows);
      return;
    }
    float* tile = scratch_[static_cast<size_t>(ti)].tile.data();
#if defined(LAYA_HAVE_X86)
    if (use_tileT_) {  // packed groups dequantize straight into the transposed tile
      float* wt = scratch_[static_cast<size_t>(ti)].tileT.data();
      for (int64_t r0 = b; r0 < e; r0 += kTileRows) {
        cpu::dequantize_group_t_avx512(*pm, r0 / kTileRows, wt);
        cpu::gemm_tileT_avx512(wt, std::min<int64_t>(kTileRows, e - r0), x, cols, n_tok, cols, y + r0, rows);
      }
      return;
    }
#endif
    const float* rowp[kTileRows];
    for (int64_t i = 0; i < kTileRows; ++i) rowp[i] = tile + i * cols;
    for (int64_t r0 = b; r0 < e; r0 += kTileRows) {
      cpu::dequantize_group(*pm, r0 / kTileRows, tile);
      gemm_rows(rowp, std::min<int64_t>(kTileRows, e - r0), x, cols, n_tok, y + r0, rows, ti);
    }
    return;
  }
  if (const int bits = mlx_bits(w.type)) {
    matmul_rows_affine(w, bits, x, n_tok, y, b, e, ti);
    return;
  }
  const size_t stride = w.row_stride();
  const cpu::KernelTable& kt = *kt_;
  const auto type = static_cast<uint32_t>(w.type);
  if (n_tok == 1) {
    // Decode: one fused dequantize+dot per row.
    const cpu::DotRowFn dot = kt.dot_row[type];
    for (int64_t r = b; r < e; ++r) y[r] = dot(w.data + static_cast<size_t>(r) * stride, x, cols);
    return;
  }
  if (n_tok <= kExactRowsMax) {
    // A few tokens (a drafted continuation being verified, a keystroke's
    // prefill): each token's dot in decode's own order, so every row's
    // logits are the bits decoding it alone gives; the weights read once.
    if (const cpu::DotRowsFn dots = kt.dot_rows[type]) {
      for (int64_t r = b; r < e; ++r) dots(w.data + static_cast<size_t>(r) * stride, x, cols, n_tok, cols, y + r, rows);
    } else {
      const cpu::DotRowFn dot = kt.dot_row[type];
      for (int64_t r = b; r < e; ++r)
        for (int64_t t = 0; t < n_tok; ++t)
          y[t * rows + r] = dot(w.data + static_cast<size_t>(r) * stride, x + t * cols, cols);
    }
    return;
  }
  // Prefill: dequantize a tile of rows once, reuse it for every token.
  const cpu::DequantizeRowFn deq = kt.dequantize_row[type];
  const bool is_f32 = w.type == DType::F32;
  float* tile = scratch_[static_cast<size_t>(ti)].tile.data();
  for (int64_t r0 = b; r0 < e; r0 += kTileRows) {
    const int64_t nr = std::min<int64_t>(kTileRows, e - r0);
    const float* rowp[kTileRows];
    for (int64_t i = 0; i < nr; ++i) {
      const uint8_t* src = w.data + static_cast<size_t>(r0 + i) * stride;
      if (is_f32) {
        rowp[i] = reinterpret_cast<const float*>(src);
      } else {
        deq(src, tile + i * cols, cols);
        rowp[i] = tile + i * cols;
      }
    }
    gemm_rows(rowp, nr, x, cols, n_tok, y + r0, rows, ti);
  }
}

void CpuBackend::prepare_affine_input(const Tensor* const* ws, int n, const float* x, int64_t cols, int64_t n_tok) {
  if (n_tok > kExactRowsMax) return;  // the prefill's tiles read x as it is
  bool needed = false;
  for (int i = 0; i < n; ++i) needed |= mlx_bits(ws[i]->type) != 0;
  if (!needed) return;
  const size_t stride = affine_x4_.size() / static_cast<size_t>(kExactRowsMax);
  for (int64_t t = 0; t < n_tok; ++t) {
    float* x4 = affine_x4_.data() + static_cast<size_t>(t) * stride;
    float* sums = affine_sum_.data() + static_cast<size_t>(t) * (stride / 32);
    cpu::affine_prepare(x + t * cols, cols, x4, sums);
    affine_x_[static_cast<size_t>(t)] = cpu::AffineX{x + t * cols, x4, sums};
  }
}

void CpuBackend::matmul_rows_affine(const Tensor& w, int bits, const float* x, int64_t n_tok, float* y, int64_t b,
                                    int64_t e, int ti) {
  const int64_t rows = w.rows(), cols = w.cols();
  const size_t stride = w.row_stride();
  if (n_tok <= kExactRowsMax) {
    // Decode and short passes: each token's dot in decode's own order (the
    // bits of decoding it alone), the row's bytes still in cache for the next.
    // x was prepared into affine_x_ by the op (prepare_affine_input).
    (void)x;
    const cpu::AffineDotFn dot = kt_->affine_dot[bits];
    for (int64_t r = b; r < e; ++r) {
      const cpu::AffineRow row = cpu::affine_row(w.data, stride, w.groups, cols, r);
      for (int64_t t = 0; t < n_tok; ++t) y[t * rows + r] = dot(row, affine_x_[static_cast<size_t>(t)], cols);
    }
    return;
  }
  // Prefill: a tile of rows dequantized once (per thread, kTileRows rows:
  // never the whole matrix), reused for every token.
  const cpu::AffineDequantizeFn deq = kt_->affine_dequantize[bits];
  float* tile = scratch_[static_cast<size_t>(ti)].tile.data();
  for (int64_t r0 = b; r0 < e; r0 += kTileRows) {
    const int64_t nr = std::min<int64_t>(kTileRows, e - r0);
    const float* rowp[kTileRows];
    for (int64_t i = 0; i < nr; ++i) {
      deq(cpu::affine_row(w.data, stride, w.groups, cols, r0 + i), tile + i * cols, cols);
      rowp[i] = tile + i * cols;
    }
    gemm_rows(rowp, nr, x, cols, n_tok, y + r0, rows, ti);
  }
}

void CpuBackend::gemm_rows(const float* const* rowp, int64_t nr, const float* x, int64_t cols, int64_t n_tok, float* y,
                           int64_t ldy, int ti) {
#if defined(LAYA_HAVE_X86)
  if (use_tileT_) {
    float* wt = scratch_[static_cast<size_t>(ti)].tileT.data();
    cpu::transpose16_avx512(rowp, nr, cols, wt);
    cpu::gemm_tileT_avx512(wt, nr, x, cols, n_tok, cols, y, ldy);
    return;
  }
#endif
  (void)ti;
  gemm_(rowp, nr, x, cols, n_tok, cols, y, ldy);
}

template <typename F>
void CpuBackend::run_rows(int64_t n, int64_t n_tok, F&& rows) {
  static_assert(kDecodeChunkRows % cpu::kPackRows == 0, "chunks are whole packed groups");
  if (n_tok <= kExactRowsMax && pool_.active() > 1) {
    reset_row_counters(n);
    pool_.run_each([&](int ti, int nt) { claim_rows(ti, nt, [&](int64_t b, int64_t e) { rows(b, e, ti); }); });
    return;
  }
  pool_.run_each([&](int ti, int nt) {
    int64_t b, e;
    split(n, ti, nt, 16, &b, &e);
    if (b < e) rows(b, e, ti);
  });
}

template <typename F>
void CpuBackend::run_split(int64_t n, int64_t grain, int64_t serial_below, F&& fn) {
  if (n < serial_below || pool_.active() <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool_.run_each([&](int ti, int nt) {
    int64_t b, e;
    split(n, ti, nt, grain, &b, &e);
    if (b < e) fn(b, e);
  });
}

void CpuBackend::reset_row_counters(int64_t n) {
  // Split over the threads the job will run on; claim_rows visits all of
  // these counters whatever thread count the job then runs with, so every
  // row is done even if background mode changed in between.
  const int nt = pool_.active();
  n_counters_ = nt;
  for (int t = 0; t < nt; ++t) {
    int64_t b, e;
    split(n, t, nt, 16, &b, &e);
    counters_[static_cast<size_t>(t)].next.store(b, std::memory_order_relaxed);
    counters_[static_cast<size_t>(t)].end = e;
  }
  // ThreadPool::run publishes these with its release of the job.
}

Status CpuBackend::matmul(const Tensor& w, const float* x, int64_t n_tok, float* y) {
  const MatmulOut o{&w, y};
  return matmul_group(&o, 1, x, n_tok);
}

Status CpuBackend::matmul_group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok) {
  if (n_outs > kMaxGroup) {  // not reached from the forward pass (3 at most)
    for (int i = 0; i < n_outs; i += kMaxGroup)
      LAYA_TRY(matmul_group(outs + i, std::min(kMaxGroup, n_outs - i), x, n_tok));
    return Status::Ok();
  }
  // The matrices' rows are laid end to end and split evenly across threads,
  // in tiles so a thread's share of each matrix stays contiguous. Each
  // matrix starts on a tile boundary (its rows padded to a whole tile), so a
  // share never starts inside a later matrix's 16-row packed group (the
  // conformance suite's odd-rows-first group found that).
  static_assert(kTileRows == cpu::kPackRows, "packed groups are tiles");
  auto padded = [](int64_t rows) { return (rows + kTileRows - 1) / kTileRows * kTileRows; };
  int64_t total = 0;
  const PackedEntry* pes[kMaxGroup];  // looked up once here, not per chunk
  for (int i = 0; i < n_outs; ++i) {
    total += padded(outs[i].w->rows());
    pes[i] = packed(*outs[i].w);
  }
  quantize_packed_input(pes, n_outs, x, outs[0].w->cols(), n_tok);
  const Tensor* ws[kMaxGroup];
  for (int i = 0; i < n_outs; ++i) ws[i] = outs[i].w;
  prepare_affine_input(ws, n_outs, x, outs[0].w->cols(), n_tok);
  // Rows [b, e) of the matrices laid end to end.
  auto rows_of_group = [&](int64_t b, int64_t e, int ti) {
    int64_t base = 0;
    for (int i = 0; i < n_outs && b < e; ++i) {
      const int64_t rows = outs[i].w->rows();
      const int64_t lb = std::max<int64_t>(b - base, 0), le = std::min<int64_t>(e - base, rows);
      if (lb < le) matmul_rows(*outs[i].w, pes[i], x, n_tok, outs[i].y, lb, le, ti);
      base += padded(rows);
    }
  };
  run_rows(total, n_tok, rows_of_group);
  return Status::Ok();
}

Status CpuBackend::matmul_swiglu(const Tensor& w_gate, const Tensor& w_up, const float* x, int64_t n_tok,
                                 float* gate_scratch, float* out) {
  const int64_t rows = w_gate.rows();
  const PackedEntry* pes[2] = {packed(w_gate), packed(w_up)};
  const PackedEntry *pe_gate = pes[0], *pe_up = pes[1];
  quantize_packed_input(pes, 2, x, w_gate.cols(), n_tok);
  const Tensor* ws[2] = {&w_gate, &w_up};
  prepare_affine_input(ws, 2, x, w_gate.cols(), n_tok);
  auto rows_of_ffn = [&](int64_t b, int64_t e, int ti) {
    matmul_rows(w_gate, pe_gate, x, n_tok, gate_scratch, b, e, ti);
    matmul_rows(w_up, pe_up, x, n_tok, out, b, e, ti);
    for (int64_t t = 0; t < n_tok; ++t) {
      float* o = out + t * rows;
      const float* g = gate_scratch + t * rows;
      for (int64_t i = b; i < e; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * o[i];
    }
  };
  run_rows(rows, n_tok, rows_of_ffn);
  return Status::Ok();
}

Status CpuBackend::get_rows(const Tensor& w, const int32_t* ids, int64_t n, float* out) {
  const int64_t cols = w.cols();
  if (const int bits = mlx_bits(w.type)) {  // an MLX-quantized embedding (mlx-lm quantizes it too)
    for (int64_t i = 0; i < n; ++i)
      kt_->affine_dequantize[bits](cpu::affine_row(w.data, w.row_stride(), w.groups, cols, ids[i]), out + i * cols, cols);
    return Status::Ok();
  }
  const cpu::DequantizeRowFn deq = kt_->dequantize_row[static_cast<uint32_t>(w.type)];
  for (int64_t i = 0; i < n; ++i) deq(w.row(ids[i]), out + i * cols, cols);
  return Status::Ok();
}

Status CpuBackend::rms_norm(const float* x, const Tensor& wt, int64_t n_rows, int64_t n, float eps, float* out) {
  const float* w = reinterpret_cast<const float*>(wt.data);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) o[i] = w[i] * (xr[i] * inv);
  }
  return Status::Ok();
}

Status CpuBackend::add_bias(float* y, const Tensor& bt, int64_t n_rows, int64_t n) {
  const float* b = reinterpret_cast<const float*>(bt.data);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += b[i];
  return Status::Ok();
}

Status CpuBackend::add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  return Status::Ok();
}

// The families' elementwise ops: a decode step's (n_embd or most n_ff values)
// on the caller's thread, less work than a wake-up of the pool costs; a
// prefill's (n_tok times as many) or the logits' (n_vocab) split across it, in
// whole cache lines. (The threshold is the scalar GELU's; not re-measured for
// the SIMD kernels.)
constexpr int64_t kSerialElements = 16384;
constexpr int64_t kElementGrain = 64;

Status CpuBackend::scale(float* x, int64_t n, float s) {
  run_split(n, kElementGrain, kSerialElements, [&](int64_t b, int64_t e) { kt_->scale_f32(x + b, e - b, s); });
  return Status::Ok();
}

Status CpuBackend::mul(float* y, const float* x, int64_t n) {
  run_split(n, kElementGrain, kSerialElements, [&](int64_t b, int64_t e) { kt_->mul_f32(y + b, x + b, e - b); });
  return Status::Ok();
}

Status CpuBackend::softcap(float* x, int64_t n, float cap) {
  // A tanh per logit (Gemma 2's 256k a token): split across the pool.
  run_split(n, kElementGrain, kSerialElements, [&](int64_t b, int64_t e) { kt_->softcap_f32(x + b, e - b, cap); });
  return Status::Ok();
}

Status CpuBackend::gelu(float* x, int64_t n) {
  // In float32; the tanh approximation, as the families that use it were
  // trained with (gelu_pytorch_tanh). A prefill's millions of values split
  // across the pool.
  run_split(n, kElementGrain, kSerialElements, [&](int64_t b, int64_t e) { kt_->gelu_f32(x + b, e - b); });
  return Status::Ok();
}

Status CpuBackend::layer_norm(const float* x, const Tensor& wt, const Tensor& bt, int64_t n_rows, int64_t n, float eps,
                              float* out) {
  const float* w = reinterpret_cast<const float*>(wt.data);
  const float* b = reinterpret_cast<const float*>(bt.data);
  // Rows split across the pool once there are as many values as make an
  // elementwise op worth splitting (a prefill's; a decode step's one row stays here).
  const int64_t serial_rows = (kSerialElements + n - 1) / std::max<int64_t>(n, 1);
  run_split(n_rows, 1, std::max<int64_t>(serial_rows, 2), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kt_->layer_norm_f32(x + r * n, w, b, n, eps, out + r * n);
  });
  return Status::Ok();
}

Status CpuBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const RopeTable& rt) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* c = rt.cos + (pos0 + t) * rt.half;
    const float* s = rt.sin + (pos0 + t) * rt.half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      if (rt.interleaved) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = a * s[i] + b * c[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  }
  return Status::Ok();
}

namespace {

// This (layer, head)'s K / V across the sequence's blocks.
cpu::KvHeadBlocks head_blocks(const KvLayerView& kv, int64_t g) {
  const KvLayout& L = *kv.layout;
  return cpu::KvHeadBlocks{kv.pool + L.k_offset(kv.layer, g), kv.pool + L.v_offset(kv.layer, g), kv.ids,
                           L.block_bytes(), L.block_pos};
}

}  // namespace

Status CpuBackend::kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0) {
  // k, v: (n_tok, n_head_kv * hd) rows → each head's slice in the position's
  // block: V rows as they are, K into its 16-position blocks (cpu/attention.h).
  const KvLayout& L = *kv.layout;
  const int64_t hd = L.head_dim, kvd = L.n_head_kv * hd, bp = L.block_pos;
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t p = pos0 + t, slot = p % bp;
    for (int64_t g = 0; g < L.n_head_kv; ++g) {
      const cpu::KvHeadBlocks hb = head_blocks(kv, g);
      uint8_t* kb = const_cast<uint8_t*>(hb.k(p / bp));
      uint8_t* vb = const_cast<uint8_t*>(hb.v(p / bp));
      const float* ks = k + t * kvd + g * hd;
      const float* vs = v + t * kvd + g * hd;
      if (L.type == DType::Q8_0) {
        cpu::q8_store_k(kb, slot, ks, hd);
        cpu::q8_store_v(vb, slot, vs, hd);
      } else if (L.type == DType::F16) {
        uint16_t* kd = reinterpret_cast<uint16_t*>(kb);
        uint16_t* vd = reinterpret_cast<uint16_t*>(vb) + slot * hd;
        for (int64_t i = 0; i < hd; ++i) {
          kd[cpu::k_index(slot, i, hd)] = f32_to_fp16(ks[i]);
          vd[i] = f32_to_fp16(vs[i]);
        }
      } else {
        float* kd = reinterpret_cast<float*>(kb);
        for (int64_t i = 0; i < hd; ++i) kd[cpu::k_index(slot, i, hd)] = ks[i];
        std::memcpy(reinterpret_cast<float*>(vb) + slot * hd, vs, static_cast<size_t>(hd) * 4);
      }
    }
  }
  return Status::Ok();
}

Status CpuBackend::attention(const KvLayerView& kv, const float* q, int64_t n_tok, int64_t pos0,
                             const AttentionShape& s, float* out) {
  const int64_t hd = s.head_dim, group = s.n_head / s.n_head_kv;
  // One work item per (token, KV head): the GQA group's query heads share
  // every K/V row read, and a head's K and V are two contiguous streams per block.
  const cpu::AttendGroupFn attend = cpu::attend_group_for(kv.layout->type, static_cast<int>(group), hd, isa_);
  const int64_t n_work = n_tok * s.n_head_kv;
  pool_.run_each([&](int ti, int nt) {
    int64_t b, e;
    split(n_work, ti, nt, 1, &b, &e);
    float* scores = scratch_[static_cast<size_t>(ti)].scores.data();
    for (int64_t w = b; w < e; ++w) {
      const int64_t t = w / s.n_head_kv, g = w % s.n_head_kv;
      const int64_t first_head = t * s.n_head + g * group, n_kv = pos0 + t + 1;
      // A sliding window reads only its last s.window positions (the cache keeps them all).
      const int64_t first = s.window > 0 && n_kv > s.window ? n_kv - s.window : 0;
      attend(q + first_head * hd, static_cast<int>(group), hd, head_blocks(kv, g), n_kv,
             cpu::AttendParams{s.scale, s.softcap, first}, scores, out + first_head * hd);
    }
  });
  return Status::Ok();
}

}  // namespace laya
