#include "backend/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>

namespace laya {

namespace {

// A Status naming the op, what it was doing and the CUDA error; Ok for cudaSuccess.
Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  const StatusCode code = e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kInternal;
  return Status(code, fmt::format("cuda {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

#define LAYA_CUDA_TRY(expr, ...)                                                          \
  do {                                                                                    \
    if (cudaError_t e_ = (expr); e_ != cudaSuccess) return cuda_status(e_, fmt::format(__VA_ARGS__)); \
  } while (0)

}  // namespace

Status CudaBackend::device_status() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kUnsupported,
                  fmt::format("the cuda backend has no device: cudaGetDeviceCount: {}", cudaGetErrorString(e)));
  }
  if (n == 0) return Status(StatusCode::kUnsupported, "the cuda backend has no device: cudaGetDeviceCount found none");
  return Status::Ok();
}

Result<std::unique_ptr<Backend>> CudaBackend::create(const BackendOptions& opt, const ForwardLimits& lim) {
  // Threads and memory locking are the CPU's concerns; the tuning is this
  // backend's alone (the environment's defaults where the caller gave none).
  const CudaTuning tuning = opt.cuda ? *opt.cuda : CudaTuning::from_env();
  LAYA_TRY(device_status());
  std::unique_ptr<CudaBackend> be(new CudaBackend(lim));
  LAYA_CUDA_TRY(cudaSetDevice(0), "cudaSetDevice(0)");
  // The highest priority the device offers: a keystroke's decode step goes
  // ahead of other work sharing the GPU.
  int lo = 0, hi = 0;
  LAYA_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange");
  LAYA_CUDA_TRY(cudaStreamCreateWithPriority(&be->stream_, cudaStreamNonBlocking, hi), "cudaStreamCreateWithPriority");
  LAYA_CUDA_TRY(cuda::configure(tuning, &be->launch_), "configuring the kernels");
  LAYA_CUDA_TRY(cuda::configure_attention(), "configuring the attention kernels");
  // Block tables of up to max_ctx positions in blocks of at least 16.
  be->ids_cap_ = std::max<int64_t>(lim.max_ctx / 16 + 1, 64);
  LAYA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&be->ids_dev_), static_cast<size_t>(be->ids_cap_) * sizeof(int32_t)),
                "cudaMalloc of the block table ({} entries)", be->ids_cap_);
  LAYA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&be->step_dev_), 2 * sizeof(int64_t)), "cudaMalloc of the step arguments");
  // Up to 32 splits of up to max_cols / 32 heads of head_dim values (q_dim <= max_cols).
  be->split_scratch_floats_ = 32 * (static_cast<size_t>(lim.max_cols) + 2 * static_cast<size_t>(lim.max_cols / 32 + 8));
  be->split_counters_n_ = static_cast<size_t>(lim.max_cols / 32 + 64);
  LAYA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&be->split_scratch_), be->split_scratch_floats_ * sizeof(float)),
                "cudaMalloc of the attention split scratch");
  LAYA_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&be->split_counters_), be->split_counters_n_ * sizeof(int)),
                "cudaMalloc of the attention split counters");
  LAYA_CUDA_TRY(cudaMemset(be->split_counters_, 0, be->split_counters_n_ * sizeof(int)), "zeroing the split counters");
  be->use_graphs_ = tuning.graphs;
  be->use_pinned_ = tuning.pinned;
  be->attn_split_ = tuning.attn_split;
  be->use_persistent_ = tuning.persistent;
  return std::unique_ptr<Backend>(std::move(be));
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  drop_graphs();
  if (step_dev_) cudaFree(step_dev_);
  if (split_scratch_) cudaFree(split_scratch_);
  if (split_counters_) cudaFree(split_counters_);
  for (void* p : weight_mem_) cudaFree(p);
  if (ids_dev_) cudaFree(ids_dev_);
  if (pinned_) cudaFreeHost(pinned_);
  if (stream_) cudaStreamDestroy(stream_);
}

// ---- memory ------------------------------------------------------------------------------------

Result<Buffer> CudaBackend::alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const size_t n = std::max<size_t>(bytes, 1);
  if (cudaError_t e = cudaMalloc(&p, n); e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky; clear it for the next call
    return Status(StatusCode::kOutOfMemory, fmt::format("{}: cannot allocate {:.1f} MB of GPU memory: {}", what,
                                                        static_cast<double>(bytes) / 1e6, cudaGetErrorString(e)));
  }
  if (cudaError_t e = cudaMemsetAsync(p, 0, n, stream_); e != cudaSuccess) {
    cudaFree(p);
    return cuda_status(e, fmt::format("zero-filling {} ({} bytes)", what, bytes));
  }
  return Buffer(this, p, n);
}

void CudaBackend::release(void* data, size_t) {
  cudaFree(data);  // waits for the device: no kernel still reads it
}

Status CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
  LAYA_CUDA_TRY(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "upload of {} bytes", bytes);
  // The caller may free or reuse host_src once this returns.
  LAYA_CUDA_TRY(cudaStreamSynchronize(stream_), "upload of {} bytes", bytes);
  return Status::Ok();
}

Status CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
  constexpr size_t kBounceFrom = 64 * 1024;  // smaller copies: the driver's staging is as fast
  if (use_pinned_ && bytes >= kBounceFrom && bytes > pinned_bytes_) {
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    if (cudaMallocHost(&pinned_, bytes) == cudaSuccess) {
      pinned_bytes_ = bytes;
    } else {  // no page-locked memory to spare: pageable copies from now on, not a failed allocation a step
      cudaGetLastError();
      pinned_ = nullptr;
      use_pinned_ = false;
    }
  }
  const bool bounce = use_pinned_ && bytes >= kBounceFrom && bytes <= pinned_bytes_;
  LAYA_CUDA_TRY(cudaMemcpyAsync(bounce ? pinned_ : host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
                "download of {} bytes", bytes);
  LAYA_CUDA_TRY(cudaStreamSynchronize(stream_), "download of {} bytes (or an op before it)", bytes);
  if (bounce) std::memcpy(host_dst, pinned_, bytes);
  return Status::Ok();
}

Status CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  LAYA_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy of {} bytes", bytes);
  return Status::Ok();
}

Status CudaBackend::synchronize() {
  LAYA_CUDA_TRY(cudaStreamSynchronize(stream_), "synchronize (an op issued before it failed)");
  return Status::Ok();
}

// ---- weights -----------------------------------------------------------------------------------

Status CudaBackend::upload_tensor(const Tensor& t, uint8_t* dst, cuda::DevMat* out) {
  const int64_t rows = t.rows(), cols = t.cols();
  cuda::DevMat m;
  m.type = t.type;
  m.rows = rows;
  m.cols = cols;
  m.data = dst;
  m.stride = cuda::dev_stride(t.type, cols);
  if (cuda::dev_scales_bytes(t.type, rows, cols) > 0 || mlx_bits(t.type))
    m.scales = reinterpret_cast<const uint16_t*>(dst + static_cast<size_t>(rows) * m.stride);
  m.group = t.groups.size;
  m.group_type = t.groups.type;
  const size_t bytes = cuda::dev_bytes(t);
  if (cuda::dev_same_as_file(t)) {
    LAYA_CUDA_TRY(cudaMemcpy(dst, t.data, bytes, cudaMemcpyHostToDevice), "upload of {} ({} bytes)", t.name, bytes);
  } else {
    std::vector<uint8_t> host(bytes);
    cuda::pack_tensor(t, host.data());
    LAYA_CUDA_TRY(cudaMemcpy(dst, host.data(), bytes, cudaMemcpyHostToDevice), "upload of {} ({} bytes)", t.name, bytes);
  }
  *out = m;
  return Status::Ok();
}

Status CudaBackend::prepare_weights(const std::vector<const Tensor*>& matrices, const std::vector<const Tensor*>& all) {
  // Everything either list names, once (tied embeddings share their bytes).
  std::vector<const Tensor*> todo;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const auto* list : {&matrices, &all}) {
    for (const Tensor* t : *list) {
      if (!t->present() || mats_.count(t->data)) continue;
      if (std::any_of(todo.begin(), todo.end(), [&](const Tensor* u) { return u->data == t->data; })) continue;
      if (const GroupParams& g = t->groups; mlx_bits(t->type) &&
          ((g.size != 32 && g.size != 64 && g.size != 128) || t->cols() % g.size != 0 || !g.scales || !g.biases ||
           (g.type != DType::F16 && g.type != DType::BF16 && g.type != DType::F32))) {
        return Status(StatusCode::kInvalidArgument,
                      fmt::format("cuda: MLX tensor {} ({} columns) has groups of {} {} values: the kernels read groups "
                                  "of 32, 64 or 128 F16 / BF16 / F32 scales and biases",
                                  t->name, t->cols(), g.size, dtype_name(g.type)));
      }
      if (!cuda::dev_supported(t->type)) {
        return Status(StatusCode::kUnsupported,
                      fmt::format("cuda: tensor {} has type {}, which the cuda backend cannot read", t->name,
                                  dtype_name(t->type)));
      }
      todo.push_back(t);
      offsets.push_back(total);
      total += (cuda::dev_bytes(*t) + 255) / 256 * 256;
    }
  }
  if (todo.empty()) return Status::Ok();
  void* mem = nullptr;
  if (cudaError_t e = cudaMalloc(&mem, total); e != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kOutOfMemory, fmt::format("cuda: cannot allocate {:.1f} MB of GPU memory for the weights: {}",
                                                        static_cast<double>(total) / 1e6, cudaGetErrorString(e)));
  }
  weight_mem_.push_back(mem);
  try {
    for (size_t i = 0; i < todo.size(); ++i) {
      cuda::DevMat m;
      LAYA_TRY(upload_tensor(*todo[i], static_cast<uint8_t*>(mem) + offsets[i], &m));
      mats_.emplace(todo[i]->data, m);
    }
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "cuda: out of host memory while repacking the weights");
  }
  prepared_bytes_ += total;
  return Status::Ok();
}

Result<const cuda::DevMat*> CudaBackend::dev(const Tensor& w, const char* op) const {
  auto it = mats_.find(w.data);
  if (it == mats_.end()) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("cuda {}: tensor {} was not given to prepare_weights", op, w.name));
  }
  return &it->second;
}

// ---- ops ---------------------------------------------------------------------------------------

namespace {
// n floats at p, as a range the persistent kernel's program orders by.
cuda::DevRange floats(const float* p, int64_t n) { return cuda::DevRange{p, static_cast<size_t>(n) * sizeof(float)}; }
// The block pool as one thing: a store to it comes before the attention that reads it.
cuda::DevRange pool_token(const cuda::KvArgs& a) { return cuda::DevRange{a.pool, 1}; }

// The persistent kernel's instruction for a one-token matvec job.
cuda::StepInstr matvec_instr(const cuda::MatvecJob& job, const float* x) {
  cuda::StepInstr in;
  in.op = cuda::StepOp::kMatvec;
  in.job = job;
  in.x = x;
  in.cols = job.m[0].cols;
  return in;
}
// What a one-token matvec job reads and writes.
void tape_matvec(cuda::StepProgram* tape, const cuda::MatvecJob& job, const float* x) {
  const cuda::StepInstr in = matvec_instr(job, x);
  const int64_t cols = job.m[0].cols;
  const cuda::DevRange xr = floats(x, cols), xn = floats(job.norm_out, job.norm_out ? cols : 0);
  if (job.swiglu) {
    tape->add(in, {xr}, {floats(job.y[0], job.m[0].rows), floats(job.y[1], job.m[0].rows), xn});
    return;
  }
  const cuda::DevRange y0 = floats(job.y[0], job.m[0].rows);
  const cuda::DevRange y1 = floats(job.y[1], job.n > 1 ? job.m[1].rows : 0);
  const cuda::DevRange y2 = floats(job.y[2], job.n > 2 ? job.m[2].rows : 0);
  if (job.accumulate) {
    tape->add(in, {xr, y0, y1, y2}, {y0, y1, y2, xn});
  } else {
    tape->add(in, {xr}, {y0, y1, y2, xn});
  }
}
// The decode kernel's SwiGLU job: gate products to `gate`, silu(gate) * up to `out`.
cuda::MatvecJob swiglu_job(const cuda::DevMat& g, const cuda::DevMat& u, float* gate, float* out) {
  cuda::MatvecJob job;
  job.n = 2;
  job.swiglu = true;
  job.m[0] = g;
  job.m[1] = u;
  job.y[0] = gate;
  job.y[1] = out;
  return job;
}
}  // namespace

Status CudaBackend::matmul(const Tensor& w, const float* x, int64_t n_tok, float* y) {
  const MatmulOut o{&w, y};
  return matmul_group(&o, 1, x, n_tok);
}

Status CudaBackend::matmul_group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok) {
  return group(outs, n_outs, x, n_tok, Fuse{});
}

Status CudaBackend::group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok, const Fuse& f) {
  for (int i0 = 0; i0 < n_outs; i0 += 3) {
    cuda::MatvecJob job;
    job.n = std::min(3, n_outs - i0);
    job.norm_w = f.norm_w;
    job.norm_eps = f.eps;
    job.norm_out = f.norm_out;
    job.accumulate = f.accumulate;
    for (int i = 0; i < job.n; ++i) {
      LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* m, dev(*outs[i0 + i].w, "matmul"));
      job.m[i] = *m;
      job.y[i] = outs[i0 + i].y;
      if (!cuda::matvec_tokens(launch_, n_tok, m->cols)) {
        if (f.norm_w || f.accumulate) {
          return Status(StatusCode::kInternal, fmt::format("cuda: a fused matmul of {} tokens x {} columns", n_tok, m->cols));
        }
        LAYA_CUDA_TRY(cuda::gemm(*m, x, n_tok, outs[i0 + i].y, stream_), "matmul {} {} ({} x {}) n_tok {}",
                      outs[i0 + i].w->name, dtype_name(m->type), m->rows, m->cols, n_tok);
      }
    }
    if (cuda::matvec_tokens(launch_, n_tok, job.m[0].cols)) {
      LAYA_CUDA_TRY(cuda::matvec(launch_, job, x, n_tok, stream_), "matmul {} {} ({} x {}) and {} more, n_tok {}",
                    outs[i0].w->name, dtype_name(job.m[0].type), job.m[0].rows, job.m[0].cols, job.n - 1, n_tok);
      if (capturing_) tape_matvec(&tape_, job, x);
    } else {
      tape_refuse("a matmul of several tokens");
    }
  }
  return Status::Ok();
}

Result<const float*> CudaBackend::norm_weight(const Tensor& w, const char* op) const {
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* m, dev(w, op));
  if (m->type != DType::F32) {
    return Status(StatusCode::kUnsupported, fmt::format("cuda {}: norm weight {} is {}, not F32", op, w.name, dtype_name(m->type)));
  }
  return reinterpret_cast<const float*>(m->data);
}

Status CudaBackend::norm_matmul_group(const float* x, const Tensor& norm, float eps, int64_t n_embd, float* xn,
                                      const MatmulOut* outs, int n_outs, int64_t n_tok) {
  if (n_outs < 1 || !fusable(*outs[0].w, n_tok) || outs[0].w->cols() != n_embd) {
    return Backend::norm_matmul_group(x, norm, eps, n_embd, xn, outs, n_outs, n_tok);
  }
  LAYA_ASSIGN_OR_RETURN(const float* w, norm_weight(norm, "norm_matmul_group"));
  return group(outs, n_outs, x, n_tok, Fuse{w, eps, xn, false});
}

Status CudaBackend::norm_matmul_swiglu(const float* x, const Tensor& norm, float eps, int64_t n_embd, float* xn,
                                       const Tensor& w_gate, const Tensor& w_up, int64_t n_tok, float* gate_scratch,
                                       float* out) {
  if (!fusable(w_gate, n_tok) || w_gate.cols() != n_embd) {
    return Backend::norm_matmul_swiglu(x, norm, eps, n_embd, xn, w_gate, w_up, n_tok, gate_scratch, out);
  }
  LAYA_ASSIGN_OR_RETURN(const float* nw, norm_weight(norm, "norm_matmul_swiglu"));
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* g, dev(w_gate, "norm_matmul_swiglu"));
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* u, dev(w_up, "norm_matmul_swiglu"));
  cuda::MatvecJob job = swiglu_job(*g, *u, gate_scratch, out);
  job.norm_w = nw;
  job.norm_eps = eps;
  job.norm_out = xn;
  LAYA_CUDA_TRY(cuda::matvec(launch_, job, x, n_tok, stream_), "norm_matmul_swiglu {} ({} x {}) n_tok {}", dtype_name(g->type),
                g->rows, g->cols, n_tok);
  if (capturing_) tape_matvec(&tape_, job, x);
  return Status::Ok();
}

Status CudaBackend::matmul_add(const Tensor& w, const float* x, int64_t n_tok, float* tmp, float* y) {
  if (!fusable(w, n_tok)) return Backend::matmul_add(w, x, n_tok, tmp, y);
  const MatmulOut o{&w, y};
  return group(&o, 1, x, n_tok, Fuse{nullptr, 0.f, nullptr, true});
}

Status CudaBackend::rope_kv_store(const KvLayerView& kv, float* q, float* k, const float* v, int64_t n_tok, int64_t n_head,
                                  int64_t n_head_kv, int64_t head_dim, int64_t pos0, const RopeTable& rt) {
  LAYA_ASSIGN_OR_RETURN(const cuda::KvArgs a, kv_args(kv, "rope_kv_store"));
  if (a.n_head_kv != n_head_kv || a.head_dim != head_dim || (a.type == DType::Q8_0 && head_dim % 32 != 0)) {
    return Backend::rope_kv_store(kv, q, k, v, n_tok, n_head, n_head_kv, head_dim, pos0, rt);
  }
  if (pos0 + n_tok > rt.n_pos) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("cuda rope_kv_store: positions up to {} past the table's {}", pos0 + n_tok, rt.n_pos));
  }
  LAYA_CUDA_TRY(cuda::rope_kv_store(a, q, k, v, n_tok, n_head, pos0, rt.cos, rt.sin, rt.half, rt.interleaved,
                                    n_tok == 1 ? dyn() : nullptr, launch_.chained, stream_),
                "rope_kv_store {} tokens x {}+{} heads x {} at {} ({} cache, layer {})", n_tok, n_head, n_head_kv, head_dim,
                pos0, dtype_name(a.type), kv.layer);
  if (capturing_) {
    cuda::StepInstr in;
    in.op = cuda::StepOp::kRopeStore;
    in.kv = a;
    in.q = q;
    in.k = k;
    in.v = v;
    in.n_head = n_head;
    in.cos = rt.cos;
    in.sin = rt.sin;
    in.half = rt.half;
    in.interleaved = rt.interleaved;
    in.store = a.type != DType::Q8_0;  // a Q8_0 cache quantizes whole groups: an instruction of its own after
    const cuda::DevRange qr = floats(q, n_head * head_dim), kr = floats(k, n_head_kv * head_dim),
                         vr = floats(v, n_head_kv * head_dim);
    if (in.store) {
      tape_.add(in, {qr, kr, vr}, {qr, kr, pool_token(a)});
    } else {
      tape_.add(in, {qr, kr}, {qr, kr});
      in.op = cuda::StepOp::kKvStoreQ8;
      tape_.add(in, {kr, vr}, {pool_token(a)});
    }
  }
  return Status::Ok();
}

Status CudaBackend::matmul_swiglu(const Tensor& w_gate, const Tensor& w_up, const float* x, int64_t n_tok,
                                  float* gate_scratch, float* out) {
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* g, dev(w_gate, "matmul_swiglu"));
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* u, dev(w_up, "matmul_swiglu"));
  if (cuda::matvec_tokens(launch_, n_tok, g->cols)) {
    const cuda::MatvecJob job = swiglu_job(*g, *u, gate_scratch, out);
    LAYA_CUDA_TRY(cuda::matvec(launch_, job, x, n_tok, stream_), "matmul_swiglu {} ({} x {}) n_tok {}",
                  dtype_name(g->type), g->rows, g->cols, n_tok);
    if (capturing_) tape_matvec(&tape_, job, x);
    return Status::Ok();
  }
  tape_refuse("a SwiGLU of several tokens");
  LAYA_CUDA_TRY(cuda::gemm(*g, x, n_tok, gate_scratch, stream_), "matmul_swiglu gate {} n_tok {}", w_gate.name, n_tok);
  LAYA_CUDA_TRY(cuda::gemm(*u, x, n_tok, out, stream_), "matmul_swiglu up {} n_tok {}", w_up.name, n_tok);
  LAYA_CUDA_TRY(cuda::silu_mul(gate_scratch, out, n_tok * g->rows, stream_), "matmul_swiglu silu n_tok {}", n_tok);
  return Status::Ok();
}

Status CudaBackend::get_rows(const Tensor& w, const int32_t* ids, int64_t n, float* out) {
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* m, dev(w, "get_rows"));
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= m->rows) {
      return Status(StatusCode::kOutOfRange, fmt::format("cuda get_rows: id {} of {} rows", ids[i], m->rows));
    }
  }
  LAYA_CUDA_TRY(cuda::get_rows(*m, ids, n, out, n == 1 ? dyn() : nullptr, stream_), "get_rows {} {} rows of {}", w.name, n, m->cols);
  if (capturing_) {
    cuda::StepInstr in;
    in.op = cuda::StepOp::kEmbed;
    in.m = *m;
    in.out = out;
    tape_.add(in, {}, {floats(out, m->cols)});
  }
  return Status::Ok();
}

Status CudaBackend::rms_norm(const float* x, const Tensor& w, int64_t n_rows, int64_t n, float eps, float* out) {
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* m, dev(w, "rms_norm"));
  if (m->type != DType::F32) {
    return Status(StatusCode::kUnsupported, fmt::format("cuda rms_norm: weight {} is {}, not F32", w.name, dtype_name(m->type)));
  }
  LAYA_CUDA_TRY(cuda::rms_norm(x, reinterpret_cast<const float*>(m->data), n_rows, n, eps, out, stream_),
                "rms_norm {} rows of {}", n_rows, n);
  if (capturing_) {
    cuda::StepInstr in;
    in.op = cuda::StepOp::kRmsNormRows;
    in.x = x;
    in.w = reinterpret_cast<const float*>(m->data);
    in.n_rows = n_rows;
    in.n = n;
    in.eps = eps;
    in.out = out;
    tape_.add(in, {floats(x, n_rows * n)}, {floats(out, n_rows * n)});
  }
  return Status::Ok();
}

Status CudaBackend::add_bias(float* y, const Tensor& b, int64_t n_rows, int64_t n) {
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* m, dev(b, "add_bias"));
  if (m->type != DType::F32) {
    return Status(StatusCode::kUnsupported, fmt::format("cuda add_bias: bias {} is {}, not F32", b.name, dtype_name(m->type)));
  }
  LAYA_CUDA_TRY(cuda::add_bias(y, reinterpret_cast<const float*>(m->data), n_rows, n, stream_), "add_bias {} rows of {}",
                n_rows, n);
  if (capturing_ && (n_rows != 1 || !tape_.fold_bias(y, reinterpret_cast<const float*>(m->data), n))) {
    tape_.refuse("a bias not right after its matmul");
  }
  return Status::Ok();
}

Status CudaBackend::add(float* y, const float* x, int64_t n) {
  LAYA_CUDA_TRY(cuda::add(y, x, n, stream_), "add of {} values", n);
  tape_refuse("add");
  return Status::Ok();
}

Status CudaBackend::scale(float* x, int64_t n, float s) {
  LAYA_CUDA_TRY(cuda::scale(x, n, s, stream_), "scale of {} values", n);
  tape_refuse("scale");
  return Status::Ok();
}

Status CudaBackend::softcap(float* x, int64_t n, float cap) {
  LAYA_CUDA_TRY(cuda::softcap(x, n, cap, stream_), "softcap of {} values", n);
  tape_refuse("softcap");
  return Status::Ok();
}

Status CudaBackend::mul(float* y, const float* x, int64_t n) {
  LAYA_CUDA_TRY(cuda::mul(y, x, n, stream_), "mul of {} values", n);
  tape_refuse("mul");
  return Status::Ok();
}

Status CudaBackend::gelu(float* x, int64_t n) {
  LAYA_CUDA_TRY(cuda::gelu(x, n, stream_), "gelu of {} values", n);
  tape_refuse("gelu");
  return Status::Ok();
}

Status CudaBackend::layer_norm(const float* x, const Tensor& w, const Tensor& b, int64_t n_rows, int64_t n, float eps,
                               float* out) {
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* mw, dev(w, "layer_norm"));
  LAYA_ASSIGN_OR_RETURN(const cuda::DevMat* mb, dev(b, "layer_norm"));
  if (mw->type != DType::F32 || mb->type != DType::F32) {
    return Status(StatusCode::kUnsupported, fmt::format("cuda layer_norm: {} / {} not F32", w.name, b.name));
  }
  LAYA_CUDA_TRY(cuda::layer_norm(x, reinterpret_cast<const float*>(mw->data), reinterpret_cast<const float*>(mb->data),
                                 n_rows, n, eps, out, stream_),
                "layer_norm {} rows of {}", n_rows, n);
  tape_refuse("layer_norm");
  return Status::Ok();
}

Status CudaBackend::rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const RopeTable& rt) {
  if (pos0 + n_tok > rt.n_pos) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("cuda rope: positions up to {} past the table's {}", pos0 + n_tok, rt.n_pos));
  }
  LAYA_CUDA_TRY(cuda::rope(x, n_tok, n_heads, head_dim, pos0, rt.cos, rt.sin, rt.half, rt.interleaved,
                           n_tok == 1 ? dyn() : nullptr, stream_),
                "rope {} tokens x {} heads x {} at {}", n_tok, n_heads, head_dim, pos0);
  tape_refuse("rope");
  return Status::Ok();
}

Result<cuda::KvArgs> CudaBackend::kv_args(const KvLayerView& kv, const char* op) {
  const KvLayout& L = *kv.layout;
  if (kv.n_blocks > ids_cap_) {
    return Status(StatusCode::kOutOfRange, fmt::format("cuda {}: {} KV blocks, more than the {} this backend was made for",
                                                       op, kv.n_blocks, ids_cap_));
  }
  const size_t n = static_cast<size_t>(kv.n_blocks);
  // In a capture, step_begin() has uploaded the table (a copy from host
  // memory cannot be recorded).
  if (!capturing_ && (ids_host_.size() != n || !std::equal(ids_host_.begin(), ids_host_.end(), kv.ids))) {
    ids_host_.assign(kv.ids, kv.ids + n);
    // Pageable source: the call returns once ids_host_ is read, in stream order.
    LAYA_CUDA_TRY(cudaMemcpyAsync(ids_dev_, ids_host_.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
                  "{}: upload of the block table ({} blocks)", op, n);
  }
  cuda::KvArgs a;
  a.pool = kv.pool;
  a.ids = ids_dev_;
  a.n_blocks = kv.n_blocks;
  a.block_bytes = L.block_bytes();
  a.k_off = L.k_offset(kv.layer, 0);
  a.v_off = L.v_offset(kv.layer, 0);
  a.head_bytes = L.head_bytes();
  a.block_pos = L.block_pos;
  a.n_head_kv = L.n_head_kv;
  a.head_dim = L.head_dim;
  a.type = L.type;
  return a;
}

Status CudaBackend::kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0) {
  LAYA_ASSIGN_OR_RETURN(const cuda::KvArgs a, kv_args(kv, "kv_store"));
  if (a.type == DType::Q8_0 && a.head_dim % 32 != 0) {
    return Status(StatusCode::kUnsupported, fmt::format("cuda kv_store: a Q8_0 cache needs head_dim % 32 == 0, not {}", a.head_dim));
  }
  LAYA_CUDA_TRY(cuda::kv_store(a, k, v, n_tok, pos0, n_tok == 1 ? dyn() : nullptr, stream_), "kv_store {} tokens at {} ({} cache, layer {})", n_tok, pos0,
                dtype_name(a.type), kv.layer);
  tape_refuse("kv_store");
  return Status::Ok();
}

Status CudaBackend::attention(const KvLayerView& kv, const float* q, int64_t n_tok, int64_t pos0, const AttentionShape& s,
                              float* out) {
  if (!cuda::attention_supported(s.head_dim)) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("cuda attention: head_dim {} (supported: 32, 64, 96, 128, 256)", s.head_dim));
  }
  LAYA_ASSIGN_OR_RETURN(const cuda::KvArgs a, kv_args(kv, "attention"));
  const cuda::AttnSplit split = attention_split(s);
  LAYA_CUDA_TRY(cuda::attention(a, q, n_tok, pos0, s.n_head, s.scale, s.window, s.softcap, out,
                                n_tok == 1 ? dyn() : nullptr, split, launch_.chained, stream_),
                "attention {} tokens at {} ({} heads, {} KV heads, head_dim {}, {} cache)", n_tok, pos0, s.n_head,
                s.n_head_kv, s.head_dim, dtype_name(a.type));
  if (capturing_) {
    cuda::StepInstr in;
    in.op = cuda::StepOp::kAttention;
    in.kv = a;
    in.q = const_cast<float*>(q);
    in.n_head = s.n_head;
    in.group = s.n_head / s.n_head_kv;
    in.scale = s.scale;
    in.softcap = s.softcap;
    in.window = s.window;
    in.out = out;
    in.split = split;
    const cuda::DevRange scratch{split.scratch, 1};
    tape_.add(in, {floats(q, s.n_head * s.head_dim), pool_token(a), scratch},
              {floats(out, s.n_head * s.head_dim), scratch});
  }
  return Status::Ok();
}

cuda::AttnSplit CudaBackend::attention_split(const AttentionShape& s) const {
  // About 64 blocks for the step's attention: 8 KV heads split 8 ways, 2 split 32 ways.
  cuda::AttnSplit sp;
  const int64_t head_groups = s.n_head_kv * ((s.n_head / s.n_head_kv + 7) / 8);
  int n = static_cast<int>(std::clamp<int64_t>(64 / std::max<int64_t>(head_groups, 1), 1, 32));
  if (attn_split_ > 0) n = attn_split_;  // CudaTuning::attn_split (measuring variants)
  while (n > 1 && static_cast<size_t>(s.n_head * n * (s.head_dim + 2)) > split_scratch_floats_) n /= 2;
  if (static_cast<size_t>(head_groups) > split_counters_n_) n = 1;
  sp.n = n;
  sp.scratch = split_scratch_;
  sp.counters = split_counters_;
  return sp;
}

// ---- decode-step graphs --------------------------------------------------------------------------

void CudaBackend::drop_graphs() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  programs_.clear();
}

Status CudaBackend::step_begin(const KvLayerView& kv, int32_t token, int64_t pos, const float* logits, bool* replayed) {
  *replayed = false;
  if (!use_graphs_) return Status::Ok();
  // What changes between steps goes in first, in stream order: the block
  // table (when a block was added) and the token and position.
  LAYA_TRY(kv_args(kv, "step_begin").status());
  step_host_[0] = token;
  step_host_[1] = pos;
  LAYA_CUDA_TRY(cudaMemcpyAsync(step_dev_, step_host_, sizeof step_host_, cudaMemcpyHostToDevice, stream_),
                "step_begin: upload of the token and position");
  if (auto it = programs_.find(logits); it != programs_.end()) {
    LAYA_CUDA_TRY(it->second.launch(launch_, step_dev_, stream_), "the persistent decode kernel (token {} at {})", token, pos);
    if (it->second.profiling())
      LAYA_CUDA_TRY(it->second.collect(stream_), "the persistent decode kernel's clocks (token {} at {})", token, pos);
    *replayed = true;
    return Status::Ok();
  }
  if (auto it = graphs_.find(logits); it != graphs_.end()) {
    LAYA_CUDA_TRY(cudaGraphLaunch(it->second, stream_), "replay of a decode step (token {} at {})", token, pos);
    *replayed = true;
    return Status::Ok();
  }
  LAYA_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "step_begin: cudaStreamBeginCapture");
  capturing_ = true;
  capture_key_ = logits;
  tape_ = cuda::StepProgram();
  if (!use_persistent_) tape_.refuse("not asked for (LAYA_CUDA_PERSISTENT=1)");
  return Status::Ok();
}

std::string CudaBackend::decode_step_profile() const {
  std::string out;
  for (const auto& [key, prog] : programs_) out += prog.profile_report(launch_.clock_khz);
  return out;
}

Status CudaBackend::step_end(bool ok) {
  if (!capturing_) return Status::Ok();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  if (!ok) {  // an op failed: the caller reports it; nothing of the step runs
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return Status::Ok();
  }
  LAYA_CUDA_TRY(e, "step_end: cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  LAYA_CUDA_TRY(ie, "step_end: cudaGraphInstantiate");
  if (graphs_.size() >= kMaxGraphs) drop_graphs();  // many sequences came and went: start over
  graphs_.emplace(capture_key_, exec);
  // The same step as the persistent kernel's instructions, where it has them all.
  cuda::StepProgram prog = std::move(tape_);
  if (!prog.refused()) {
    if (cudaError_t pe = prog.upload(launch_, stream_); pe != cudaSuccess && !prog.refused()) {
      cudaGetLastError();
      prog.refuse(fmt::format("uploading its program: {}", cudaGetErrorString(pe)));
    }
  }
  if (prog.refused()) {
    step_note_ = fmt::format("decode steps replay a CUDA graph; the persistent kernel is not used: {}", prog.why_refused());
  } else {
    step_note_ = fmt::format("decode steps run the persistent kernel: {} instructions, {} grid-wide waits",
                             prog.size(), prog.waits());
    if (programs_.size() >= kMaxGraphs) programs_.clear();
    const cuda::StepProgram& p = programs_.emplace(capture_key_, std::move(prog)).first->second;
    // The capture recorded the step without running it.
    LAYA_CUDA_TRY(p.launch(launch_, step_dev_, stream_), "step_end: first launch of the persistent decode kernel");
    return Status::Ok();
  }
  // The capture recorded the step without running it.
  LAYA_CUDA_TRY(cudaGraphLaunch(exec, stream_), "step_end: first launch of a decode step");
  return Status::Ok();
}

}  // namespace laya
