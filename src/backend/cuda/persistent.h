// The persistent decode kernel: one launch runs a whole decode step. The ops
// a step issues (recorded once, as the step's CUDA graph is) become a list of
// instructions in device memory; every block of a grid that fills the GPU
// walks the list, each instruction's work spread over all blocks. Where an
// instruction reads what an earlier one wrote (or overwrites what it reads),
// blocks wait at a grid-wide counter instead of at a kernel boundary, and
// before waiting they issue the next matrix's first weight loads, so the
// memory system streams across what were ~100 launches' ramp-ups and tails
// (docs/CUDA.md, "The persistent decode kernel").
//
// Host-callable, like kernels.h: only the .cu file goes through nvcc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"

namespace laya::cuda {

enum class StepOp : int32_t {
  kEmbed,        // out = row dyn[0] of m, dequantized
  kMatvec,       // the decode kernel's MatvecJob, one token
  kRmsNormRows,  // out (n_rows, n) = rms_norm(x) * w per row (qwen3's q / k norms)
  kRopeStore,    // rope of q and k; with `store`, k and v into an F32 / F16 cache
  kKvStoreQ8,    // k and v into a Q8_0 cache
  kAttention,    // one token's attention over the block pool, split along the positions
};

// One instruction; only the fields of its op are used. Plain data: the kernel
// reads it from device memory.
struct StepInstr {
  StepOp op = StepOp::kEmbed;
  bool wait = false;  // wait for every block to finish the instructions before (set by StepProgram)
  // kEmbed
  DevMat m;
  float* out = nullptr;  // kEmbed, kRmsNormRows, kAttention
  // kMatvec
  MatvecJob job;
  const float* x = nullptr;  // kMatvec, kRmsNormRows
  int64_t cols = 0, padded = 0, total = 0;
  bool deep = false;  // chunks of twice the units (long rows: matmul.cu's deep kernel)
  // CudaTuning::persistent_prefetch: its rows into L2 before the wait (1);
  // ahead: the next matvec instruction, whose rows go to L2 as this one starts (2; -1: none).
  bool prefetch = false;
  int32_t ahead = -1;
  // kRmsNormRows
  const float* w = nullptr;
  int64_t n_rows = 0, n = 0;
  float eps = 0.f;
  // kRopeStore, kKvStoreQ8, kAttention
  KvArgs kv;
  float* q = nullptr;
  float* k = nullptr;
  const float* v = nullptr;
  int64_t n_head = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t half = 0;
  bool interleaved = false, store = false;
  int64_t group = 0;
  float scale = 0.f, softcap = 0.f;
  int64_t window = 0;
  AttnSplit split;
};

// A byte range of device memory an instruction reads or writes.
struct DevRange {
  const void* p = nullptr;
  size_t bytes = 0;
};

// The recorded step: instructions with what each reads and writes, then on
// the device. Move-only (it owns device memory).
class StepProgram {
 public:
  StepProgram() = default;
  ~StepProgram();
  StepProgram(StepProgram&& o) noexcept;
  StepProgram& operator=(StepProgram&& o) noexcept;
  StepProgram(const StepProgram&) = delete;
  StepProgram& operator=(const StepProgram&) = delete;

  // Appends an instruction. Its wait flag is decided here: set where it
  // reads a range written since the last wait, or writes one read or written
  // since then.
  void add(StepInstr in, std::initializer_list<DevRange> reads, std::initializer_list<DevRange> writes);
  // y += b (n values) folded into the last instruction, a matvec that wrote
  // y (qwen2's q, k, v biases: the graph's add_bias kernel adds the same
  // float to the same product); false where the last instruction is not one.
  bool fold_bias(const float* y, const float* b, int64_t n);
  // The step holds an op the kernel does not run (the graph replays it).
  void refuse(std::string why);
  bool refused() const { return !why_refused_.empty(); }
  const std::string& why_refused() const { return why_refused_; }
  size_t size() const { return host_.size(); }
  // Instructions that wait (grid-wide barriers a step pays).
  int waits() const;

  // Copies the instructions to the device and picks the kernel for the
  // weights' type (every matrix of the step must have it: Q8_0, BF16, F16
  // or F32); a refusal becomes kErrorInvalidValue with why_refused() set.
  // Done on stream s (the one that launches), and waited for.
  cudaError_t upload(const Launch& l, cudaStream_t s);
  bool ready() const { return dev_ != nullptr; }
  // One decode step: the kernel reads the token and position from dyn.
  cudaError_t launch(const Launch& l, const int64_t* dyn, cudaStream_t s) const;

  // With CudaTuning::persistent_profile: waits for the step just launched,
  // downloads its clocks and adds them to the totals profile_report() shows.
  cudaError_t collect(cudaStream_t s);
  bool profiling() const { return prof_ != nullptr; }
  // Where a step's time goes, by kind of instruction: per step, the blocks'
  // mean wait (arrival to release), their mean and slowest work, and the
  // weights' bytes over the slowest work (what the streaming reached).
  // clock_khz: the SM clock the cycles are converted with.
  std::string profile_report(int clock_khz) const;

 private:
  void release();
  // Per instruction, summed over the steps collected (cycles).
  struct InstrTotals {
    double wait = 0, work_mean = 0, work_max = 0;
  };
  std::vector<InstrTotals> totals_;
  std::vector<long long> prof_host_;
  double step_cycles_ = 0;  // the blocks' mean first start to last end
  int64_t steps_ = 0;
  long long* prof_ = nullptr;  // n_instr x grid x 3 clocks (persistent.cu's step_kernel)
  std::vector<StepInstr> host_;
  std::vector<DevRange> stage_reads_, stage_writes_;
  std::string why_refused_;
  DType type_ = DType::F32;
  StepInstr* dev_ = nullptr;
  unsigned* sync_ = nullptr;  // the blocks done, then each wait's arrivals (1 + waits()), zero between launches
  int grid_ = 0;
  size_t smem_ = 0;
};

}  // namespace laya::cuda
