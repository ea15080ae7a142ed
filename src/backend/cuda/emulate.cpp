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

struct Block;

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  dim3 idx;
  Block* blk = nullptr;
  bool done = false;
};

// One block's state: its shared memory and barriers.
struct Block {
  dim3 block_idx;
  std::vector<unsigned char> smem;
  int alive = 0;
  // Block barrier and per-warp barriers: arrivals and generation.
  int arrived = 0;
  uint64_t gen = 0;
  std::vector<int> warp_arrived, warp_alive;
  std::vector<uint64_t> warp_gen;
  std::vector<uint64_t> slots;  // a lane's shuffle value, by thread
};

// The blocks being run: one at a time, or all of a cooperative grid. The
// fibers of block b are fibers[b * threads, (b + 1) * threads).
struct Grid {
  std::vector<Fiber> fibers;
  std::vector<Block> blocks;
  ucontext_t sched;
  int cur = 0;
  size_t threads = 0;
  dim3 block_dim, grid_dim;
  std::function<void()>* body = nullptr;
};

Grid g;
std::mutex g_mu;  // one launch at a time in the process
thread_local bool g_capturing = false;
thread_local std::vector<std::function<void()>>* g_graph = nullptr;

Fiber& cur_fiber() { return g.fibers[static_cast<size_t>(g.cur)]; }
Block& cur_block() { return *cur_fiber().blk; }

void yield() { swapcontext(&cur_fiber().ctx, &g.sched); }

void entry() {
  (*g.body)();
  Fiber& f = cur_fiber();
  Block& b = *f.blk;
  f.done = true;
  --b.alive;
  --b.warp_alive[f.idx.x / 32];
  // A thread that leaves releases the barriers it no longer takes part in.
  if (b.arrived > 0 && b.arrived >= b.alive) {
    b.arrived = 0;
    ++b.gen;
  }
  const size_t w = f.idx.x / 32;
  if (b.warp_arrived[w] > 0 && b.warp_arrived[w] >= b.warp_alive[w]) {
    b.warp_arrived[w] = 0;
    ++b.warp_gen[w];
  }
  // Back to the scheduler (uc_link).
}

void warp_sync() {
  Block& b = cur_block();
  const size_t w = cur_fiber().idx.x / 32;
  const uint64_t my = b.warp_gen[w];
  if (++b.warp_arrived[w] >= b.warp_alive[w]) {
    b.warp_arrived[w] = 0;
    ++b.warp_gen[w];
    return;
  }
  while (b.warp_gen[w] == my) yield();
}

// Runs the blocks `ids` together (fibers round robin) until every thread ends.
void run_blocks(const std::vector<dim3>& ids, size_t smem) {
  const size_t n = g.threads, nb = ids.size();
  if (g.fibers.size() < n * nb) {
    const size_t had = g.fibers.size();
    g.fibers.resize(n * nb);
    for (size_t t = had; t < n * nb; ++t) g.fibers[t].stack.reset(new char[kStack]);
  }
  g.blocks.resize(nb);
  const size_t nw = (n + 31) / 32;
  for (size_t bi = 0; bi < nb; ++bi) {
    Block& b = g.blocks[bi];
    b.block_idx = ids[bi];
    b.smem.assign(smem, 0xFF);
    b.alive = static_cast<int>(n);
    b.arrived = 0;
    b.warp_arrived.assign(nw, 0);
    b.warp_gen.assign(nw, 0);
    b.warp_alive.assign(nw, 0);
    for (size_t t = 0; t < n; ++t) ++b.warp_alive[t / 32];
    b.slots.assign(n, 0);
    for (size_t t = 0; t < n; ++t) {
      Fiber& f = g.fibers[bi * n + t];
      f.idx = dim3(static_cast<unsigned>(t), 0, 0);
      f.blk = &b;
      f.done = false;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.get();
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = &g.sched;
      makecontext(&f.ctx, entry, 0);
    }
  }
  // A cooperative grid's blocks take uneven turns: in each round a block sits
  // out with probability 1/2 (a fixed seed, so runs repeat), so one block can
  // fall several grid barriers behind the others as it can on a GPU. Round
  // robin kept every block within one barrier of the rest, which hid a grid
  // barrier that let blocks running ahead stand in for one behind.
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  for (bool any = true; any;) {
    any = false;
    for (size_t bi = 0; bi < nb; ++bi) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;  // xorshift64
      const bool sit_out = nb > 1 && (rng >> 32) % 2 == 0;
      for (size_t t = bi * n; t < (bi + 1) * n; ++t) {
        if (g.fibers[t].done) continue;
        any = true;
        if (sit_out) continue;
        g.cur = static_cast<int>(t);
        swapcontext(&g.sched, &g.fibers[t].ctx);
      }
    }
  }
}

void execute(dim3 grid, dim3 block, size_t smem, std::function<void()> body, bool cooperative) {
  std::lock_guard<std::mutex> lock(g_mu);
  g.threads = static_cast<size_t>(block.x) * block.y * block.z;
  g.block_dim = block;
  g.grid_dim = grid;
  g.body = &body;
  std::vector<dim3> ids;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) ids.emplace_back(x, y, z);
  if (cooperative) {
    run_blocks(ids, smem);
  } else {
    for (const dim3& id : ids) run_blocks({id}, smem);
  }
  g.body = nullptr;
}

}  // namespace

const dim3& thread_idx() { return cur_fiber().idx; }
const dim3& block_idx() { return cur_block().block_idx; }
const dim3& block_dim() { return g.block_dim; }
const dim3& grid_dim() { return g.grid_dim; }
void* dynamic_shared() { return cur_block().smem.data(); }
void yield_thread() {
  if (g.body) yield();
}

void sync_block() {
  Block& b = cur_block();
  const uint64_t my = b.gen;
  if (++b.arrived >= b.alive) {
    b.arrived = 0;
    ++b.gen;
    return;
  }
  while (b.gen == my) yield();
}

uint64_t shuffle(uint64_t v, int src) {
  Block& b = cur_block();
  const int me = static_cast<int>(cur_fiber().idx.x), base = me / 32 * 32;
  b.slots[static_cast<size_t>(me)] = v;
  warp_sync();  // every lane has written
  const uint64_t r = b.slots[static_cast<size_t>(base + (src & 31))];
  warp_sync();  // every lane has read: the slots may be written again
  return r;
}

bool capturing() { return g_capturing; }
void record(std::function<void()> op) { g_graph->push_back(std::move(op)); }

void launch(dim3 grid, dim3 block, size_t smem, std::function<void()> body, bool cooperative) {
  if (g_capturing) {
    record([=] { execute(grid, block, smem, body, cooperative); });
    return;
  }
  execute(grid, block, smem, std::move(body), cooperative);
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
  // An H100 / H200's: compute capability 9.x, opt-in shared memory per block;
  // 2 multiprocessors; a clock of 1 GHz (clock64() counts nanoseconds here).
  *v = a == cudaDevAttrComputeCapabilityMajor ? 9
       : a == cudaDevAttrMultiProcessorCount  ? 2
       : a == cudaDevAttrClockRate            ? 1000 * 1000
                                              : 227 * 1024;
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
