#include "format/safetensors.h"

#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"

namespace laya::safetensors {

namespace {
// A header larger than this is not a real safetensors file (HF caps at 100 MB).
constexpr uint64_t kMaxHeader = 100ull << 20;

bool dtype_from_string(const std::string& s, DType* t, size_t* elem) {
  if (s == "F32") { *t = DType::F32; *elem = 4; return true; }
  if (s == "F16") { *t = DType::F16; *elem = 2; return true; }
  if (s == "BF16") { *t = DType::BF16; *elem = 2; return true; }
  // MLX's packed quantized weights; the model loader types them (MLX_Q*) from
  // their scales and config.json, and refuses a U32 array that is not one.
  if (s == "U32") { *t = DType::U32; *elem = 4; return true; }
  return false;
}
}  // namespace

Result<std::unique_ptr<File>> File::parse(MappedFile map) {
  auto f = std::make_unique<File>();
  f->map_ = std::move(map);
  const std::string& name = f->map_.path();
  const uint8_t* p = f->map_.data();
  const size_t size = f->map_.size();
  if (size < 8) {
    return Status(StatusCode::kCorrupt,
                  fmt::format("{}: file is {} bytes, too small for a safetensors header", name, size));
  }
  uint64_t hlen;
  std::memcpy(&hlen, p, 8);
  if (hlen > kMaxHeader || hlen > size - 8) {
    return Status(
        StatusCode::kCorrupt,
        fmt::format(
            "{}: header length {} exceeds the file ({} bytes) or the 100 MB limit; truncated or not a safetensors file",
            name, hlen, size));
  }
  const char* hdr = reinterpret_cast<const char*>(p + 8);
  Result<nlohmann::json> parsed = parse_json(std::string_view(hdr, static_cast<size_t>(hlen)), name + " header");
  if (!parsed.ok() || !parsed->is_object()) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: header is not a valid JSON object", name));
  }
  const nlohmann::json& j = *parsed;
  const uint64_t data_start = 8 + hlen;
  const uint64_t data_size = size - data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "__metadata__") {
      if (v.is_object()) {
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (m.value().is_string()) f->metadata_[m.key()] = m.value().get<std::string>();
        }
      }
      continue;
    }
    auto bad = [&](const std::string& what) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: tensor '{}': {}", name, key, what));
    };
    if (!v.is_object()) return bad("entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return bad("missing or non-string \"dtype\"");
    if (sh == v.end() || !sh->is_array()) return bad("missing or non-array \"shape\"");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
      return bad("\"data_offsets\" must be [begin, end] with non-negative integers");
    }
    TensorInfo t;
    t.name = key;
    t.dtype_str = dt->get<std::string>();
    size_t elem = 0;
    if (!dtype_from_string(t.dtype_str, &t.type, &elem)) {
      return Status(StatusCode::kUnsupported, fmt::format("{}: tensor '{}': dtype {} is not supported (expected F32, "
                                                          "F16, BF16, or U32 for MLX-packed weights)",
                                                          name, key, t.dtype_str));
    }
    if (sh->size() > 8) return bad(fmt::format("{} dimensions (at most 8 supported)", sh->size()));
    uint64_t n = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      uint64_t dv = d.get<uint64_t>();
      if (dv > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (dv != 0 && n > std::numeric_limits<uint64_t>::max() / 8 / dv)) {
        return bad("shape product overflows 64 bits");
      }
      n *= dv;
      t.shape.push_back(static_cast<int64_t>(dv));
    }
    uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e || e > data_size) {
      return bad(fmt::format("data_offsets [{}, {}] run past the end of the data ({} bytes); file truncated?", b, e,
                             data_size));
    }
    if (e - b != n * elem) {
      return bad(fmt::format("data_offsets span {} bytes but shape × {} needs {}", e - b, t.dtype_str, n * elem));
    }
    t.data = p + data_start + b;
    t.nbytes = static_cast<size_t>(e - b);
    f->index_[t.name] = f->tensors_.size();
    f->tensors_.push_back(std::move(t));
  }
  return f;
}

Result<std::unique_ptr<File>> File::open(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path));
  return parse(std::move(m));
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::vector<std::string>> read_index(const std::string& index_path) {
  LAYA_ASSIGN_OR_RETURN(std::string text, read_file(index_path));
  Result<nlohmann::json> parsed = parse_json(text, index_path);
  if (!parsed.ok() || !parsed->is_object()) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: not valid JSON", index_path));
  }
  const nlohmann::json& j = *parsed;
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: missing object \"weight_map\"", index_path));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: weight_map[\"{}\"] is not a string", index_path, it.key()));
    }
    std::string s = it.value().get<std::string>();
    if (s.find('/') != std::string::npos || s.find("..") != std::string::npos) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: shard name \"{}\" must be a plain file name", index_path, s));
    }
    if (seen.insert(s).second) out.push_back(s);
  }
  return out;
}

}  // namespace laya::safetensors
