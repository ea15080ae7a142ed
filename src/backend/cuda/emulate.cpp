// The fibers and the runtime stand-ins of emulate.h (LAYA_CUDA_EMULATE only).
#if defined(LAYA_CUDA_EMULATE)
#include "backend/cuda/emulate.h"

#include <ucontext.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace laya::emu {

namespace {

constexpr size_t kStack = 256 * 1024;

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  dim3 idx;
  bool done = false;
};

// One block at a time; every field below belongs to the block being run.
struct Block {
  std::vector<Fiber> fibers;
  ucontext_t sched;
  int cur = 0, alive = 0;
  dim3 block_idx, block_dim, grid_dim;
  std::function<void()>* body = nullptr;
  std::vector<unsigned char> smem;
  // Block barrier and per-warp barriers: arrivals and generation.
  int arrived = 0;
  uint64_t gen = 0;
  std::vector<int> warp_arrived, warp_alive;
  std::vector<uint64_t> warp_gen;
  std::vector<uint64_t> slots;  // a lane's shuffle value
};

Block g;
std::mutex g_mu;  // one launch at a time in the process
thread_local bool g_capturing = false;
thread_local std::vector<std::function<void()>>* g_graph = nullptr;

void yield() { swapcontext(&g.fibers[static_cast<size_t>(g.cur)].ctx, &g.sched); }

void entry() {
  (*g.body)();
  Fiber& f = g.fibers[static_cast<size_t>(g.cur)];
  f.done = true;
  --g.alive;
  --g.warp_alive[f.idx.x / 32];
  // A thread that leaves releases the barriers it no longer takes part in.
  if (g.arrived > 0 && g.arrived >= g.alive) {
    g.arrived = 0;
    ++g.gen;
  }
  const size_t w = f.idx.x / 32;
  if (g.warp_arrived[w] > 0 && g.warp_arrived[w] >= g.warp_alive[w]) {
    g.warp_arrived[w] = 0;
    ++g.warp_gen[w];
  }
  // Back to the scheduler (uc_link).
}

void warp_sync() {
  const size_t w = g.fibers[static_cast<size_t>(g.cur)].idx.x / 32;
  const uint64_t my = g.warp_gen[w];
  if (++g.warp_arrived[w] >= g.warp_alive[w]) {
    g.warp_arrived[w] = 0;
    ++g.warp_gen[w];
    return;
  }
  while (g.warp_gen[w] == my) yield();
}

void run_block(const dim3& bidx) {
  g.block_idx = bidx;
  const int n = static_cast<int>(g.fibers.size());
  g.alive = n;
  g.arrived = 0;
  const size_t nw = static_cast<size_t>((n + 31) / 32);
  g.warp_arrived.assign(nw, 0);
  g.warp_gen.assign(nw, 0);
  g.warp_alive.assign(nw, 0);
  for (int t = 0; t < n; ++t) ++g.warp_alive[static_cast<size_t>(t / 32)];
  std::memset(g.smem.data(), 0xFF, g.smem.size());
  for (int t = 0; t < n; ++t) {
    Fiber& f = g.fibers[static_cast<size_t>(t)];
    f.done = false;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = &g.sched;
    makecontext(&f.ctx, entry, 0);
  }
  while (g.alive > 0) {
    for (int t = 0; t < n; ++t) {
      if (g.fibers[static_cast<size_t>(t)].done) continue;
      g.cur = t;
      swapcontext(&g.sched, &g.fibers[static_cast<size_t>(t)].ctx);
    }
  }
}

void execute(dim3 grid, dim3 block, size_t smem, std::function<void()> body) {
  std::lock_guard<std::mutex> lock(g_mu);
  const size_t n = static_cast<size_t>(block.x) * block.y * block.z;
  if (g.fibers.size() != n) {
    g.fibers.clear();
    g.fibers.resize(n);
    for (size_t t = 0; t < n; ++t) g.fibers[t].stack.reset(new char[kStack]);
  }
  for (size_t t = 0; t < n; ++t) g.fibers[t].idx = dim3(static_cast<unsigned>(t), 0, 0);
  g.block_dim = block;
  g.grid_dim = grid;
  g.body = &body;
  g.smem.assign(smem, 0xFF);
  g.slots.assign(n, 0);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) run_block(dim3(x, y, z));
  g.body = nullptr;
}

}  // namespace

const dim3& thread_idx() { return g.fibers[static_cast<size_t>(g.cur)].idx; }
const dim3& block_idx() { return g.block_idx; }
const dim3& block_dim() { return g.block_dim; }
const dim3& grid_dim() { return g.grid_dim; }
void* dynamic_shared() { return g.smem.data(); }

void sync_block() {
  const uint64_t my = g.gen;
  if (++g.arrived >= g.alive) {
    g.arrived = 0;
    ++g.gen;
    return;
  }
  while (g.gen == my) yield();
}

uint64_t shuffle(uint64_t v, int src) {
  const int me = g.cur, base = me / 32 * 32;
  g.slots[static_cast<size_t>(me)] = v;
  warp_sync();  // every lane has written
  const uint64_t r = g.slots[static_cast<size_t>(base + (src & 31))];
  warp_sync();  // every lane has read: the slots may be written again
  return r;
}

bool capturing() { return g_capturing; }
void record(std::function<void()> op) { g_graph->push_back(std::move(op)); }

void launch(dim3 grid, dim3 block, size_t smem, std::function<void()> body) {
  if (g_capturing) {
    record([=] { execute(grid, block, smem, body); });
    return;
  }
  execute(grid, block, smem, std::move(body));
}

}  // namespace laya::emu

// ---- runtime stand-ins ---------------------------------------------------------------------------

struct EmuGraph {
  std::vector<std::function<void()>> ops;
};
struct EmuStream {
  int unused = 0;
};

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  // An H100 / H200's: compute capability 9.x, opt-in shared memory per block.
  *v = a == cudaDevAttrComputeCapabilityMajor ? 9 : a == cudaDevAttrMultiProcessorCount ? 2 : 227 * 1024;
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void*) {
  *a = cudaFuncAttributes{};
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* lo, int* hi) {
  *lo = 0;
  *hi = -5;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) {
  *s = new EmuStream;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t n) {
  if (n > (size_t{1} << 36)) return cudaErrorMemoryAllocation;  // 64 GiB: "the device is full"
  const size_t rounded = (n + 255) / 256 * 256;
  *p = std::aligned_alloc(256, rounded);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xFF, rounded);  // device memory is not zeroed: catch reads of what was never written
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  *p = std::malloc(n);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t n) {
  std::memset(p, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) {
  if (laya::emu::capturing()) {
    laya::emu::record([=] { std::memset(p, v, n); });
  } else {
    std::memset(p, v, n);
  }
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  std::memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t) {
  // A copy from host memory cannot be captured (CUDA refuses pageable memory there).
  if (laya::emu::capturing()) {
    if (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToHost) return cudaErrorStreamCaptureUnsupported;
    laya::emu::record([=] { std::memmove(d, s, n); });
    return cudaSuccess;
  }
  std::memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "invalid argument";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorInvalidValue";
  }
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  laya::emu::g_graph = new std::vector<std::function<void()>>();
  laya::emu::g_capturing = true;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  auto* graph = new EmuGraph;
  graph->ops = std::move(*laya::emu::g_graph);
  delete laya::emu::g_graph;
  laya::emu::g_graph = nullptr;
  laya::emu::g_capturing = false;
  *g = graph;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = new EmuGraph{g->ops};
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
  for (auto& op : e->ops) op();
  return cudaSuccess;
}
#endif
