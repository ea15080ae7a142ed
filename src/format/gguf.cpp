// GGUF parser. Layout (little-endian):
//   "GGUF" u32 version u64 n_tensors u64 n_kv, n_kv × (string key, u32 type, value),
//   n_tensors × (string name, u32 n_dims, n_dims × u64 ne, u32 type, u64 offset),
//   padding to general.alignment, tensor data.
// A string is u64 length + bytes; an array is u32 elem type + u64 count + elems.
#include "format/gguf.h"

#include "core/tensor.h"

#include <cstring>
#include <fmt/format.h>
#include <limits>

namespace laya::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr int kMaxArrayDepth = 8;

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kF64); }

}  // namespace

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    default: return 0;
  }
}

const char* value_type_name(ValueType t) {
  static const char* const kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : "invalid";
}

bool Value::is_int() const {
  switch (type) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kU16: case ValueType::kI16:
    case ValueType::kU32: case ValueType::kI32: case ValueType::kU64: case ValueType::kI64:
    case ValueType::kBool:
      return true;
    default: return false;
  }
}

static double read_scalar_f64(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::kU8: case ValueType::kBool: return p[0];
    case ValueType::kI8: return static_cast<int8_t>(p[0]);
    case ValueType::kU16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case ValueType::kI16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case ValueType::kU32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case ValueType::kI32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ValueType::kF32: { float v; std::memcpy(&v, p, 4); return v; }
    case ValueType::kU64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case ValueType::kI64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case ValueType::kF64: { double v; std::memcpy(&v, p, 8); return v; }
    default: return 0;
  }
}

static int64_t read_scalar_i64(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::kU64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<int64_t>(v); }
    case ValueType::kI64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case ValueType::kF32: case ValueType::kF64: {
      // Saturate: casting a NaN or out-of-range double to int64 is undefined.
      double d = read_scalar_f64(t, p);
      if (!(d == d)) return 0;
      if (d >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
      if (d < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(d);
    }
    default: return static_cast<int64_t>(read_scalar_f64(t, p));
  }
}

double Value::array_f64(uint64_t idx) const {
  return read_scalar_f64(elem_type, raw + idx * scalar_size(elem_type));
}
int64_t Value::array_i64(uint64_t idx) const {
  return read_scalar_i64(elem_type, raw + idx * scalar_size(elem_type));
}

std::string TensorInfo::shape_string() const { return laya::shape_string(n_dims, ne); }

// Bounds-checked cursor over the mapping.
class Parser {
 public:
  Parser(const uint8_t* data, size_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status fail(StatusCode code, const std::string& what) const {
    return Status(code, fmt::format("{}: at byte {}: {}", name_, pos_, what));
  }
  Status truncated(const char* what) const {
    return fail(StatusCode::kCorrupt,
                fmt::format("file truncated while reading {} ({} bytes left)", what, remaining()));
  }

  template <typename T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return truncated(what);
    std::memcpy(out, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status read_string(std::string_view* out, const char* what) {
    uint64_t len = 0;
    LAYA_TRY(read(&len, what));
    if (len > remaining()) {
      return fail(StatusCode::kCorrupt,
                  fmt::format("{}: string length {} exceeds the {} bytes left in the file", what, len, remaining()));
    }
    *out = std::string_view(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }

  Status read_value(ValueType type, Value* v, const std::string& key, int depth) {
    v->type = type;
    if (type == ValueType::kString) return read_string(&v->str, key.c_str());
    if (type == ValueType::kArray) {
      if (depth >= kMaxArrayDepth) {
        return fail(StatusCode::kCorrupt, fmt::format("key '{}': arrays nested deeper than {}", key, kMaxArrayDepth));
      }
      uint32_t et = 0;
      LAYA_TRY(read(&et, key.c_str()));
      if (!valid_type(et)) {
        return fail(StatusCode::kCorrupt,
                    fmt::format("key '{}': unknown array element type {} (expected 0..12)", key, et));
      }
      v->elem_type = static_cast<ValueType>(et);
      LAYA_TRY(read(&v->count, key.c_str()));
      // Every element takes at least one byte (strings 8, arrays 12): reject
      // a count the rest of the file cannot hold before allocating anything.
      size_t min_elem = scalar_size(v->elem_type);
      if (v->elem_type == ValueType::kString) min_elem = 8;
      if (v->elem_type == ValueType::kArray) min_elem = 12;
      if (v->count > remaining() / min_elem) {
        return fail(StatusCode::kCorrupt,
                    fmt::format("key '{}': array claims {} elements of type {} but only {} bytes are left", key,
                                v->count, value_type_name(v->elem_type), remaining()));
      }
      if (v->elem_type == ValueType::kString) {
        v->strings.resize(static_cast<size_t>(v->count));
        for (auto& s : v->strings) LAYA_TRY(read_string(&s, key.c_str()));
      } else if (v->elem_type == ValueType::kArray) {
        v->items.resize(static_cast<size_t>(v->count));
        for (auto& it : v->items) LAYA_TRY(read_value(ValueType::kArray, &it, key, depth + 1));
      } else {
        v->raw = p_ + pos_;
        pos_ += static_cast<size_t>(v->count) * min_elem;
      }
      return Status::Ok();
    }
    size_t sz = scalar_size(type);
    if (remaining() < sz) return truncated(key.c_str());
    const uint8_t* q = p_ + pos_;
    pos_ += sz;
    v->f = read_scalar_f64(type, q);
    v->i = read_scalar_i64(type, q);
    v->u = static_cast<uint64_t>(v->i);
    if (type == ValueType::kU64) std::memcpy(&v->u, q, 8);
    if (type == ValueType::kBool && q[0] > 1) {
      return fail(StatusCode::kCorrupt, fmt::format("key '{}': bool value {} (expected 0 or 1)", key, q[0]));
    }
    return Status::Ok();
  }

  Status parse(File* f) {
    uint64_t n_tensors = 0, n_kv = 0;
    LAYA_TRY(parse_header(f, &n_tensors, &n_kv));
    for (uint64_t k = 0; k < n_kv; ++k) LAYA_TRY(parse_metadata_entry(f));
    LAYA_TRY(apply_alignment(f));
    f->tensors_.resize(static_cast<size_t>(n_tensors));
    for (uint64_t ti = 0; ti < n_tensors; ++ti) LAYA_TRY(parse_tensor_info(f, static_cast<size_t>(ti)));
    return locate_tensor_data(f);
  }

 private:
  // Magic, version and the two counts (checked against the bytes left).
  Status parse_header(File* f, uint64_t* n_tensors, uint64_t* n_kv) {
    uint32_t magic = 0;
    if (size_ < 4) return fail(StatusCode::kCorrupt, "file too small to be GGUF (no magic)");
    LAYA_TRY(read(&magic, "magic"));
    if (magic != kMagic) {
      return Status(
          StatusCode::kCorrupt,
          fmt::format("{}: not a GGUF file (magic 0x{:08x}, expected 0x{:08x} \"GGUF\")", name_, magic, kMagic));
    }
    LAYA_TRY(read(&f->version_, "version"));
    if (f->version_ != 2 && f->version_ != 3) {
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}: GGUF version {} is not supported (expected 2 or 3)", name_, f->version_));
    }
    LAYA_TRY(read(n_tensors, "tensor count"));
    LAYA_TRY(read(n_kv, "metadata count"));
    // A key/value needs >= 8+4+1 bytes, a tensor info >= 8+4+8+4+8.
    if (*n_kv > remaining() / 13) {
      return fail(StatusCode::kCorrupt,
                  fmt::format("metadata count {} cannot fit in the {} bytes left (file truncated or corrupt)", *n_kv,
                              remaining()));
    }
    if (*n_tensors > remaining() / 32) {
      return fail(StatusCode::kCorrupt,
                  fmt::format("tensor count {} cannot fit in the {} bytes left (file truncated or corrupt)", *n_tensors,
                              remaining()));
    }
    return Status::Ok();
  }

  // One key / value pair into f->kv_ (keys are unique).
  Status parse_metadata_entry(File* f) {
    std::string_view key;
    LAYA_TRY(read_string(&key, "metadata key"));
    uint32_t t = 0;
    LAYA_TRY(read(&t, "metadata value type"));
    std::string keys(key);
    if (!valid_type(t)) {
      return fail(StatusCode::kCorrupt, fmt::format("key '{}': unknown value type {} (expected 0..12)", keys, t));
    }
    Value v;
    LAYA_TRY(read_value(static_cast<ValueType>(t), &v, keys, 0));
    if (f->kv_.count(keys)) {
      return fail(StatusCode::kCorrupt, fmt::format("duplicate metadata key '{}'", keys));
    }
    f->kv_.emplace(std::move(keys), std::move(v));
    return Status::Ok();
  }

  // general.alignment, when present: an integer power of two up to 1 MiB.
  Status apply_alignment(File* f) const {
    auto it = f->kv_.find("general.alignment");
    if (it == f->kv_.end()) return Status::Ok();
    const Value& a = it->second;
    if (!a.is_int() || a.type == ValueType::kBool) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: general.alignment has type {}, expected an integer (u32)",
                                                      name_, value_type_name(a.type)));
    }
    if (a.u == 0 || (a.u & (a.u - 1)) != 0 || a.u > (1u << 20)) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: general.alignment = {}, expected a power of two from 1 to 1048576", name_, a.u));
    }
    f->alignment_ = a.u;
    return Status::Ok();
  }

  // Tensor info `ti`: name, shape, type, offset; its byte size, overflow-checked.
  Status parse_tensor_info(File* f, size_t ti) {
    TensorInfo& t = f->tensors_[ti];
    std::string_view name;
    LAYA_TRY(read_string(&name, "tensor name"));
    t.name = std::string(name);
    uint32_t n_dims = 0;
    LAYA_TRY(read(&n_dims, "tensor n_dims"));
    if (n_dims < 1 || n_dims > 4) {
      return fail(StatusCode::kCorrupt, fmt::format("tensor '{}': n_dims = {}, expected 1..4", t.name, n_dims));
    }
    t.n_dims = static_cast<int>(n_dims);
    uint64_t total = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      LAYA_TRY(read(&ne, "tensor dimension"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && total > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)) {
        return fail(StatusCode::kCorrupt,
                    fmt::format("tensor '{}': dimensions overflow 64 bits (dim {} = {})", t.name, d, ne));
      }
      total *= ne;
      t.ne[d] = static_cast<int64_t>(ne);
    }
    uint32_t type = 0;
    LAYA_TRY(read(&type, "tensor type"));
    const DTypeInfo* info = is_ggml_type(type) ? dtype_info(type) : nullptr;  // laya's own types are not ggml's
    if (!info) {
      return fail(StatusCode::kUnsupported, fmt::format("tensor '{}': unknown ggml type {}", t.name, type));
    }
    t.type = static_cast<DType>(type);
    if (t.ne[0] % info->block_size != 0) {
      return fail(StatusCode::kCorrupt,
                  fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}", t.name, t.ne[0],
                              info->name, info->block_size));
    }
    LAYA_TRY(read(&t.offset, "tensor offset"));
    if (t.offset % f->alignment_ != 0) {
      return fail(StatusCode::kCorrupt, fmt::format("tensor '{}': offset {} is not a multiple of the alignment {}",
                                                    t.name, t.offset, f->alignment_));
    }
    // bytes = total / block_size * block_bytes, overflow-checked.
    uint64_t blocks = total / static_cast<uint64_t>(info->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes) {
      return fail(StatusCode::kCorrupt, fmt::format("tensor '{}': byte size overflows", t.name));
    }
    t.nbytes = static_cast<size_t>(blocks * info->block_bytes);
    if (f->tensor_index_.count(t.name)) {
      return fail(StatusCode::kCorrupt, fmt::format("duplicate tensor name '{}'", t.name));
    }
    f->tensor_index_.emplace(t.name, ti);
    return Status::Ok();
  }

  // The data section starts at the next multiple of the alignment; every
  // tensor must lie inside it.
  Status locate_tensor_data(File* f) const {
    uint64_t data_start = (pos_ + f->alignment_ - 1) / f->alignment_ * f->alignment_;
    if (!f->tensors_.empty() && data_start > size_) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: file truncated: data section would start at {}, file has {} bytes", name_,
                                data_start, size_));
    }
    for (auto& t : f->tensors_) {
      uint64_t avail = size_ - data_start;
      if (t.offset > avail || t.nbytes > avail - t.offset) {
        return Status(StatusCode::kCorrupt,
                      fmt::format("{}: tensor '{}' ({} {}, {} bytes at data offset {}) runs past the end of the file "
                                  "({} data bytes); the file is truncated or corrupt",
                                  name_, t.name, dtype_name(t.type), t.shape_string(), t.nbytes, t.offset, avail));
      }
      t.data = p_ + data_start + t.offset;
    }
    return Status::Ok();
  }

  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

Result<std::unique_ptr<File>> File::parse(MappedFile map) {
  auto f = std::make_unique<File>();
  f->map_ = std::move(map);
  Parser p(f->map_.data(), f->map_.size(), f->map_.path());
  LAYA_TRY(p.parse(f.get()));
  return f;
}

Result<std::unique_ptr<File>> File::open(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path));
  return parse(std::move(m));
}

const Value* File::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

static Status not_found(const File& f, std::string_view key) {
  return Status(StatusCode::kNotFound, fmt::format("{}: metadata key '{}' not found", f.path(), key));
}
static Status wrong_type(const File& f, std::string_view key, const Value& v, const char* expected) {
  return Status(StatusCode::kCorrupt, fmt::format("{}: metadata key '{}' has type {}, expected {}", f.path(), key,
                                                  value_type_name(v.type), expected));
}

Result<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return not_found(*this, key);
  if (v->type != ValueType::kString) return wrong_type(*this, key, *v, "string");
  return std::string(v->str);
}

Result<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return not_found(*this, key);
  if (!v->is_int()) return wrong_type(*this, key, *v, "an integer");
  return v->i;
}

Result<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return not_found(*this, key);
  if (v->type != ValueType::kF32 && v->type != ValueType::kF64 && !v->is_int()) return wrong_type(*this, key, *v, "a number");
  return v->f;
}

Result<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return not_found(*this, key);
  if (v->type != ValueType::kBool) return wrong_type(*this, key, *v, "bool");
  return v->u != 0;
}

Result<const std::vector<std::string_view>*> File::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return not_found(*this, key);
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kString) return wrong_type(*this, key, *v, "array of string");
  return &v->strings;
}

Result<const Value*> File::get_numeric_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return not_found(*this, key);
  if (v->type != ValueType::kArray || scalar_size(v->elem_type) == 0) return wrong_type(*this, key, *v, "numeric array");
  return v;
}

}  // namespace laya::gguf
