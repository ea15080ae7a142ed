// The persistent decode kernel (persistent.h): one launch per decode step,
// every block walking the step's instruction list.
#include "backend/cuda/persistent.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/matvec.cuh"

namespace laya::cuda {

namespace {

// ---- the grid barrier ----------------------------------------------------------------------------
// One arrival counter per wait: sync[s] counts the blocks past the s-th
// waiting instruction's start (s from 1; sync[0] counts the blocks done).
// A block with no work in an instruction does not wait there, so it can
// arrive at several waits ahead of a block still working: with one shared
// counter (the s-th wait passed at s * gridDim.x arrivals) those early
// arrivals stood in for the late block's, and the CudaPersistent tests read
// half-written q / KV on an H100 (up to 0.32 off in a logit; the emulation's
// fibers never ran a block that far ahead). The pattern of cooperative
// groups' grid sync: the block's writes, a block barrier, then thread 0
// fences and counts; the waiter spins on its own, fences, and releases its
// block.
__device__ __forceinline__ void grid_arrive(unsigned* count) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
  }
}

__device__ __forceinline__ unsigned load_volatile(const unsigned* p) { return *static_cast<const volatile unsigned*>(p); }

__device__ __forceinline__ void grid_wait(const unsigned* count, unsigned blocks) {
  if (threadIdx.x == 0) {
    while (load_volatile(count) < blocks) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
}

// Shared memory: the matrix-vector kernel's sums, the attention merge's flag,
// then the staged x or the attention's buffers (the larger).
struct Smem {
  double (*part)[kWarps];
  int* last;
  float* big;
};
constexpr size_t kSmemHead = kMaxVecTok * kWarps * sizeof(double) + 16;
__device__ __forceinline__ Smem carve(unsigned char* base) {
  Smem s;
  s.part = reinterpret_cast<double (*)[kWarps]>(base);
  s.last = reinterpret_cast<int*>(base + kMaxVecTok * kWarps * sizeof(double));
  s.big = reinterpret_cast<float*>(base + kSmemHead);
  return s;
}

// ---- the instructions ----------------------------------------------------------------------------
template <class U, class Enter0>
__device__ __forceinline__ void run_matvec(const StepInstr& in, const Smem& sm, Enter0 enter0) {
  constexpr int B1 = stream_units<U, 1>(), B2 = stream_units<U, 2>();
  const MatvecJob& job = in.job;
  // The first chunk's loads are out; the rest of the rows go to L2 while the block waits.
  auto enter = [&] {
    if (in.prefetch) prefetch_stream_rows(job, in.total, blockIdx.x, gridDim.x);
    enter0();
  };
  if (job.swiglu) {
    if (in.deep)
      matvec_stream<U, 2 * B2, true, 1>(job, in.x, in.cols, in.padded, in.total, 1, sm.big, sm.part, blockIdx.x, gridDim.x, enter);
    else
      matvec_stream<U, B2, true, 1>(job, in.x, in.cols, in.padded, in.total, 1, sm.big, sm.part, blockIdx.x, gridDim.x, enter);
  } else {
    if (in.deep)
      matvec_stream<U, 2 * B1, false, 1>(job, in.x, in.cols, in.padded, in.total, 1, sm.big, sm.part, blockIdx.x, gridDim.x, enter);
    else
      matvec_stream<U, B1, false, 1>(job, in.x, in.cols, in.padded, in.total, 1, sm.big, sm.part, blockIdx.x, gridDim.x, enter);
  }
}

template <int ND, class Enter>
__device__ __forceinline__ void run_attention_nd(const StepInstr& in, int64_t pos, const Smem& sm, Enter enter) {
  const int64_t gz = (in.group + kMaxG - 1) / kMaxG * in.split.n, count = in.kv.n_head_kv * gz;
  for (int64_t vb = blockIdx.x; vb < count; vb += gridDim.x) {
    enter();
    attention_block<ND>(in.kv, in.q, pos, in.n_head, in.group, AttnScore{in.scale, in.softcap, in.window}, in.out,
                        in.split, 0, vb / gz, vb % gz, gz, sm.big, sm.last);
    __syncthreads();  // the shared buffers are reused by the next virtual block
  }
}

// head_dim up to 128: 256 (Gemma's) would hold 8 heads x 8 values of
// accumulators per lane and take the kernel past 128 registers, one block
// per SM (ptxas: 251 registers with it).
template <class Enter>
__device__ __forceinline__ void run_attention(const StepInstr& in, int64_t pos, const Smem& sm, Enter enter) {
  switch (in.kv.head_dim) {
    case 32: run_attention_nd<1>(in, pos, sm, enter); break;
    case 64: run_attention_nd<2>(in, pos, sm, enter); break;
    case 96: run_attention_nd<3>(in, pos, sm, enter); break;
    default: run_attention_nd<4>(in, pos, sm, enter); break;
  }
}

// Work spread over every thread of the grid: f(i) for i < n.
template <class F>
__device__ __forceinline__ void grid_threads(int64_t n, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// The kernel: U is the weights' unit type (every matrix of the step has it).
// Two blocks per SM (at most 128 registers a thread): 16 warps streaming
// weights, as the separate decode kernels ran at 3-4 blocks.
//
// prof (null unless CudaTuning::persistent_profile): per instruction and
// block, thread 0's clock64() as the block starts it, once its wait is passed
// (0: no work in it), and once every thread is done (StepTimes).
template <class U>
__global__ void __launch_bounds__(kWarps * 32, 2) step_kernel(const StepInstr* __restrict__ prog, int n_instr,
                                                               unsigned* sync, const int64_t* dyn, long long* prof) {
  LAYA_DYNAMIC_SHARED(unsigned char, smem_base);
  const Smem sm = carve(smem_base);
  const int64_t token = dyn[0], pos = dyn[1];
  unsigned passed = 0;     // waits this block has arrived at
  bool must_wait = false;  // an arrival not yet waited on
  for (int i = 0; i < n_instr; ++i) {
    const StepInstr& in = prog[i];
    long long* times = prof ? prof + (static_cast<int64_t>(i) * gridDim.x + blockIdx.x) * 3 : nullptr;
    if (times && threadIdx.x == 0) {
      times[0] = clock64();
      times[1] = 0;
    }
    if (in.wait) {
      ++passed;
      grid_arrive(sync + passed);
      must_wait = true;
    }
    // Called by every thread of the block before it reads what an earlier
    // instruction wrote; the matrix-vector body calls it after its first
    // weight loads are out. A block with no work in an instruction never
    // calls it: its wait moves on to the next instruction it works in.
    auto enter = [&] {
      if (must_wait) grid_wait(sync + passed, gridDim.x);
      must_wait = false;
      if (times && threadIdx.x == 0 && times[1] == 0) times[1] = clock64();
    };
    switch (in.op) {
      case StepOp::kMatvec:
        if (in.ahead >= 0) prefetch_stream_rows(prog[in.ahead].job, prog[in.ahead].total, blockIdx.x, gridDim.x);
        run_matvec<U>(in, sm, enter);
        break;
      case StepOp::kEmbed: {
        const int64_t groups = (in.m.cols + 31) / 32;
        if (static_cast<int64_t>(blockIdx.x) * blockDim.x >= groups) break;
        enter();
        grid_threads(groups, [&](int64_t g) {
          float w[32];
          deq32(in.m, token, g, w);
          for (int j = 0; j < 32 && g * 32 + j < in.m.cols; ++j) in.out[g * 32 + j] = w[j];
        });
        break;
      }
      case StepOp::kRmsNormRows:
        for (int64_t r = blockIdx.x; r < in.n_rows; r += gridDim.x) {
          enter();
          rms_norm_row(r, in.x, in.w, in.n, in.eps, in.out, sm.part[0]);
        }
        break;
      case StepOp::kRopeStore: {
        const int64_t pairs = (in.n_head + in.kv.n_head_kv) * (in.kv.head_dim / 2);
        if (static_cast<int64_t>(blockIdx.x) * blockDim.x >= pairs) break;
        enter();
        grid_threads(pairs, [&](int64_t idx) {
          rope_store_at(idx, in.q, in.k, in.v, in.kv, in.store, 1, in.n_head, pos, in.cos, in.sin, in.half, in.interleaved);
        });
        break;
      }
      case StepOp::kKvStoreQ8: {
        const int64_t warps = in.kv.n_head_kv * (in.kv.head_dim / 32);
        if (static_cast<int64_t>(blockIdx.x) * kWarps >= warps) break;
        enter();
        const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
        for (int64_t w = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); w < warps; w += stride)
          kv_store_q8_warp(w, threadIdx.x & 31, in.kv, in.k, in.v, 1, pos);
        break;
      }
      case StepOp::kAttention:
        run_attention(in, pos, sm, enter);
        break;
    }
    if (times) {
      __syncthreads();
      if (threadIdx.x == 0) times[2] = clock64();
    }
  }
  // The last block out zeroes the counters for the next launch (which the
  // stream starts only after this one has ended): every block has passed
  // every wait it takes by then, and every block arrived at all `passed`.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync, 1u) == gridDim.x - 1) {
      for (unsigned w = 0; w <= passed; ++w) sync[w] = 0;
      __threadfence();
    }
  }
}

using StepFn = void (*)(const StepInstr*, int, unsigned*, const int64_t*, long long*);

StepFn kernel_for(DType t) {
  switch (t) {
    case DType::Q8_0: return step_kernel<UnitQ8>;
    case DType::BF16: return step_kernel<Unit16<true>>;
    case DType::F16: return step_kernel<Unit16<false>>;
    case DType::F32: return step_kernel<UnitF32>;
    default: return nullptr;
  }
}

bool overlaps(const DevRange& a, const DevRange& b) {
  const auto* pa = static_cast<const unsigned char*>(a.p);
  const auto* pb = static_cast<const unsigned char*>(b.p);
  return a.bytes > 0 && b.bytes > 0 && pa < pb + b.bytes && pb < pa + a.bytes;
}
bool any_overlap(const std::vector<DevRange>& set, std::initializer_list<DevRange> ranges) {
  for (const DevRange& r : ranges)
    for (const DevRange& s : set)
      if (overlaps(r, s)) return true;
  return false;
}

// The bytes of weights (and Q8_0 scales) a matrix-vector instruction reads; 0 for the others.
double weight_bytes(const StepInstr& in) {
  if (in.op != StepOp::kMatvec) return 0;
  double b = 0;
  for (int i = 0; i < (in.job.swiglu ? 2 : in.job.n); ++i) {
    const DevMat& m = in.job.m[i];
    b += static_cast<double>(m.rows) * static_cast<double>(m.stride);
    if (m.type == DType::Q8_0 && m.scales) b += static_cast<double>(m.rows) * static_cast<double>(m.cols / 32) * 2;
  }
  return b;
}

}  // namespace

// ---- StepProgram ---------------------------------------------------------------------------------

StepProgram::~StepProgram() { release(); }

StepProgram::StepProgram(StepProgram&& o) noexcept { *this = std::move(o); }

StepProgram& StepProgram::operator=(StepProgram&& o) noexcept {
  if (this != &o) {
    release();
    host_ = std::move(o.host_);
    stage_reads_ = std::move(o.stage_reads_);
    stage_writes_ = std::move(o.stage_writes_);
    why_refused_ = std::move(o.why_refused_);
    type_ = o.type_;
    dev_ = std::exchange(o.dev_, nullptr);
    sync_ = std::exchange(o.sync_, nullptr);
    prof_ = std::exchange(o.prof_, nullptr);
    totals_ = std::move(o.totals_);
    prof_host_ = std::move(o.prof_host_);
    step_cycles_ = o.step_cycles_;
    steps_ = o.steps_;
    grid_ = o.grid_;
    smem_ = o.smem_;
  }
  return *this;
}

void StepProgram::release() {
  if (dev_) cudaFree(dev_);
  if (sync_) cudaFree(sync_);
  if (prof_) cudaFree(prof_);
  dev_ = nullptr;
  sync_ = nullptr;
  prof_ = nullptr;
}

void StepProgram::add(StepInstr in, std::initializer_list<DevRange> reads, std::initializer_list<DevRange> writes) {
  if (refused()) return;
  // Reading what this stage wrote, or writing what it read or wrote: every
  // block must be past the stage first.
  in.wait = !host_.empty() && (any_overlap(stage_writes_, reads) || any_overlap(stage_writes_, writes) ||
                               any_overlap(stage_reads_, writes));
  if (in.wait) {
    stage_reads_.clear();
    stage_writes_.clear();
  }
  stage_reads_.insert(stage_reads_.end(), reads.begin(), reads.end());
  stage_writes_.insert(stage_writes_.end(), writes.begin(), writes.end());
  host_.push_back(in);
}

bool StepProgram::fold_bias(const float* y, const float* b, int64_t n) {
  if (refused() || host_.empty()) return false;
  StepInstr& in = host_.back();
  if (in.op != StepOp::kMatvec || in.job.swiglu || in.job.accumulate) return false;
  for (int i = 0; i < in.job.n; ++i) {
    if (in.job.y[i] == y && in.job.m[i].rows == n && !in.job.bias[i]) {
      in.job.bias[i] = b;
      return true;
    }
  }
  return false;
}

void StepProgram::refuse(std::string why) {
  if (!refused()) why_refused_ = std::move(why);
}

int StepProgram::waits() const {
  return static_cast<int>(std::count_if(host_.begin(), host_.end(), [](const StepInstr& i) { return i.wait; }));
}

cudaError_t StepProgram::upload(const Launch& l, cudaStream_t s) {
  if (host_.empty()) refuse("an empty step");
  // Every matrix of the step has one type: the kernel is compiled for it.
  bool typed = false;
  size_t big = 0;
  for (StepInstr& in : host_) {
    if (in.op == StepOp::kMatvec) {
      // As matmul.cu's matvec() launches the job: x padded, rows end to end,
      // long rows in double chunks.
      in.padded = padded_cols(in.cols);
      in.total = in.job.m[0].rows;
      if (!in.job.swiglu)
        for (int i = 1; i < in.job.n; ++i) in.total += in.job.m[i].rows;
      in.deep = deep_rows(in.job.m[0], l.tuning.stream_deep);
      const int nm = in.job.swiglu ? 2 : in.job.n;
      for (int i = 0; i < nm; ++i) {
        if (!typed) type_ = in.job.m[i].type, typed = true;
        if (in.job.m[i].type != type_) refuse("matrices of two types in one step");
      }
      big = std::max(big, static_cast<size_t>(xpad_size(in.padded)) * sizeof(float));
    }
    if (in.op == StepOp::kAttention) {
      const int64_t hd = in.kv.head_dim;
      if (hd != 32 && hd != 64 && hd != 96 && hd != 128) refuse("head_dim over 128");
      const size_t a[] = {attention_smem<1>(), attention_smem<2>(), attention_smem<3>(), attention_smem<4>()};
      big = std::max(big, a[hd == 32 ? 0 : hd == 64 ? 1 : hd == 96 ? 2 : 3]);
    }
  }
  // What goes to L2 ahead of the loads (CudaTuning::persistent_prefetch).
  int last_matvec = -1;
  for (int i = 0; i < static_cast<int>(host_.size()); ++i) {
    StepInstr& in = host_[static_cast<size_t>(i)];
    if (in.op != StepOp::kMatvec) continue;
    in.prefetch = l.tuning.persistent_prefetch >= 1;
    // At most half an H100's L2, so the rows sent ahead (scales too) are still there when read.
    if (l.tuning.persistent_prefetch >= 2 && last_matvec >= 0 && weight_bytes(in) <= 24e6)
      host_[static_cast<size_t>(last_matvec)].ahead = i;
    last_matvec = i;
  }
  const StepFn f = kernel_for(type_);
  if (!f) refuse("weights of a type the persistent kernel has no units for");
  // Q8_0 weights with a Q8_0 cache matched the graph bit for bit on an H100
  // (qwen2-tiny); F16 weights with an F32 cache differed there by up to 2.6
  // in a logit, as Q8_0 runs later did, before each wait had its own counter
  // (the emulation, with blocks taking uneven turns, traced the Q8_0
  // differences to the shared one). The rest stays refused until a GPU run of
  // the per-wait barrier finds it the graph's (docs/CUDA.md).
  if (type_ != DType::Q8_0) refuse("weights other than Q8_0 (verified on a GPU for Q8_0 weights and a Q8_0 cache)");
  for (const StepInstr& in : host_)
    if (in.op == StepOp::kAttention && in.kv.type != DType::Q8_0)
      refuse("a KV cache other than Q8_0 (verified on a GPU for Q8_0 weights and a Q8_0 cache)");
  if (refused()) return cudaErrorInvalidValue;
  smem_ = kSmemHead + big;
  if (smem_ > l.smem_optin) {
    refuse("more shared memory than a block may have");
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_));
      e != cudaSuccess)
    return e;
  // Every block must be resident at once (they wait for each other): no more
  // than the occupancy allows, which the cooperative launch checks again.
  int per_sm = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, kWarps * 32, smem_); e != cudaSuccess)
    return e;
  if (per_sm < 1) {
    refuse("the persistent kernel does not fit a multiprocessor");
    return cudaErrorInvalidValue;
  }
  grid_ = l.sms * per_sm;
  release();
  const size_t bytes = host_.size() * sizeof(StepInstr);
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&dev_), bytes); e != cudaSuccess) return e;
  const size_t sync_bytes = (1 + static_cast<size_t>(waits())) * sizeof(unsigned);  // kernel: sync[0] and one per wait
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&sync_), sync_bytes); e != cudaSuccess) return e;
  // On the launching stream, then waited for: the stream is non-blocking, so
  // cudaMemcpy / cudaMemset on the legacy stream would not be ordered before
  // the first launch (a pageable copy may return before its DMA is done), and
  // a barrier counter not yet zeroed lets every wait pass.
  if (cudaError_t e = cudaMemcpyAsync(dev_, host_.data(), bytes, cudaMemcpyHostToDevice, s); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMemsetAsync(sync_, 0, sync_bytes, s); e != cudaSuccess) return e;
  if (l.tuning.persistent_profile) {
    const size_t n = host_.size() * static_cast<size_t>(grid_) * 3;
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&prof_), n * sizeof(long long)); e != cudaSuccess) return e;
    prof_host_.assign(n, 0);
    totals_.assign(host_.size(), InstrTotals{});
  }
  return cudaStreamSynchronize(s);
}

cudaError_t StepProgram::launch(const Launch& l, const int64_t* dyn, cudaStream_t s) const {
  (void)l;
  const StepFn f = kernel_for(type_);
  const int n = static_cast<int>(host_.size());
#if defined(LAYA_CUDA_EMULATE)
  LAYA_LAUNCH_COOPERATIVE(f, dim3(static_cast<unsigned>(grid_)), dim3(kWarps * 32), smem_, s)(dev_, n, sync_, dyn, prof_);
  return cudaGetLastError();
#else
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid_));
  cfg.blockDim = dim3(kWarps * 32);
  cfg.dynamicSmemBytes = smem_;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, f, static_cast<const StepInstr*>(dev_), n, sync_, dyn, prof_);
#endif
}

cudaError_t StepProgram::collect(cudaStream_t s) {
  if (!prof_) return cudaSuccess;
  if (cudaError_t e = cudaMemcpyAsync(prof_host_.data(), prof_, prof_host_.size() * sizeof(long long),
                                      cudaMemcpyDeviceToHost, s);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
  const size_t n = host_.size(), g = static_cast<size_t>(grid_);
  auto at = [&](size_t i, size_t b, int k) { return prof_host_[(i * g + b) * 3 + static_cast<size_t>(k)]; };
  double step = 0;
  for (size_t b = 0; b < g; ++b) step += static_cast<double>(at(n - 1, b, 2) - at(0, b, 0));
  step_cycles_ += step / static_cast<double>(g);
  for (size_t i = 0; i < n; ++i) {
    double wait = 0, work = 0, work_max = 0;
    int working = 0;
    for (size_t b = 0; b < g; ++b) {
      if (at(i, b, 1) == 0) continue;  // no work for this block
      ++working;
      wait += static_cast<double>(at(i, b, 1) - at(i, b, 0));
      const double w = static_cast<double>(at(i, b, 2) - at(i, b, 1));
      work += w;
      work_max = std::max(work_max, w);
    }
    if (working == 0) continue;
    totals_[i].wait += wait / working;
    totals_[i].work_mean += work / working;
    totals_[i].work_max += work_max;
  }
  ++steps_;
  return cudaSuccess;
}

namespace {
const char* kind_of(const StepInstr& in) {
  switch (in.op) {
    case StepOp::kEmbed: return "embedding row";
    case StepOp::kMatvec:
      if (in.job.swiglu) return "matvec gate+up, SwiGLU";
      if (in.job.accumulate) return "matvec into the residual";
      return in.job.n > 1 ? "matvec q, k, v" : "matvec";
    case StepOp::kRmsNormRows: return "RMSNorm rows";
    case StepOp::kRopeStore: return "RoPE (+ KV store)";
    case StepOp::kKvStoreQ8: return "Q8_0 KV store";
    case StepOp::kAttention: return "attention";
  }
  return "?";
}
}  // namespace

std::string StepProgram::profile_report(int clock_khz) const {
  if (steps_ == 0 || clock_khz <= 0) return {};
  const double us = 1e3 / clock_khz / static_cast<double>(steps_);  // cycles summed over steps -> us a step
  struct Row {
    int count = 0, waits = 0;
    double wait = 0, work_mean = 0, work_max = 0, bytes = 0;
  };
  std::vector<std::pair<std::string, Row>> rows;
  Row all;
  for (size_t i = 0; i < host_.size(); ++i) {
    const std::string k = kind_of(host_[i]);
    auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == k; });
    if (it == rows.end()) it = rows.insert(rows.end(), {k, Row{}});
    for (Row* r : {&it->second, &all}) {
      ++r->count;
      r->waits += host_[i].wait ? 1 : 0;
      r->wait += totals_[i].wait * us;
      r->work_mean += totals_[i].work_mean * us;
      r->work_max += totals_[i].work_max * us;
      r->bytes += weight_bytes(host_[i]);
    }
  }
  std::string out = "persistent kernel, per step (us; clock64 at " + std::to_string(clock_khz / 1000) + " MHz, " +
                    std::to_string(steps_) + " steps, " + std::to_string(grid_) + " blocks):\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-26s %6s %6s %9s %10s %10s %9s\n", "instruction", "count", "waits", "wait",
                "work mean", "work max", "GB/s");
  out += line;
  rows.emplace_back("all", all);
  for (const auto& [k, r] : rows) {
    const double gbs = r.bytes > 0 && r.work_max > 0 ? r.bytes / (r.work_max * 1e3) : 0;
    std::snprintf(line, sizeof line, "  %-26s %6d %6d %9.1f %10.1f %10.1f %9.0f\n", k.c_str(), r.count, r.waits, r.wait,
                  r.work_mean, r.work_max, gbs);
    out += line;
  }
  std::snprintf(line, sizeof line, "  a block's whole step: %.1f us\n", step_cycles_ * us);
  out += line;
  return out;
}

}  // namespace laya::cuda
