// The only place outside src/backend/cpu/ that names a backend's type: the
// engine and the tools ask for a backend by name.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>

namespace laya {

std::vector<std::string> backend_names() { return {"cpu"}; }

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, const BackendOptions& opt,
                                              const ForwardLimits& lim) {
  if (name == "cpu" || name.empty()) return CpuBackend::create(opt, lim);
  std::string known;
  for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  return Status(StatusCode::kInvalidArgument,
                fmt::format("backend '{}' is not available in this build (available: {})", name, known));
}

}  // namespace laya
