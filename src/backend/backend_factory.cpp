// The only place outside src/backend/cpu/ and src/backend/cuda/ that names a
// backend's type: the engine and the tools ask for a backend by name.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#if defined(LAYA_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

#include <fmt/format.h>

namespace laya {

// Every backend compiled in; "cuda" is listed where the build has it, with
// or without a GPU (make_backend then says why it cannot be made).
std::vector<std::string> backend_names() {
#if defined(LAYA_HAVE_CUDA)
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, const BackendOptions& opt,
                                              const ForwardLimits& lim) {
  if (name == "cpu" || name.empty()) return CpuBackend::create(opt, lim);
#if defined(LAYA_HAVE_CUDA)
  if (name == "cuda") return CudaBackend::create(opt, lim);
#endif
  std::string known;
  for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  return Status(StatusCode::kInvalidArgument,
                fmt::format("backend '{}' is not available in this build (available: {})", name, known));
}

}  // namespace laya
