// GGUF v3 streaming writer (see gguf_writer.h).
#include "format/gguf_writer.h"

#include <cstring>
#include <fmt/format.h>

namespace laya::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"

template <typename T>
void append(std::vector<uint8_t>& b, T v) {
  const size_t o = b.size();
  b.resize(o + sizeof(T));
  std::memcpy(b.data() + o, &v, sizeof(T));
}

void append_string(std::vector<uint8_t>& b, std::string_view s) {
  append<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}


uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

template <typename T>
std::vector<uint8_t> scalar_payload(ValueType t, T v) {
  std::vector<uint8_t> p;
  append<uint32_t>(p, static_cast<uint32_t>(t));
  append<T>(p, v);
  return p;
}

}  // namespace

Writer::~Writer() = default;  // an unfinished file is discarded by out_

void Writer::add_kv(std::string_view key, std::vector<uint8_t> payload) {
  for (auto& kv : kvs_) {
    if (kv.key == key) {  // replace: keys are unique in a GGUF file
      kv.payload = std::move(payload);
      return;
    }
  }
  kvs_.push_back({std::string(key), std::move(payload)});
}

bool Writer::has_key(std::string_view key) const {
  for (auto& kv : kvs_)
    if (kv.key == key) return true;
  return false;
}

void Writer::set_u8(std::string_view k, uint8_t v) { add_kv(k, scalar_payload(ValueType::kU8, v)); }
void Writer::set_i8(std::string_view k, int8_t v) { add_kv(k, scalar_payload(ValueType::kI8, v)); }
void Writer::set_u16(std::string_view k, uint16_t v) { add_kv(k, scalar_payload(ValueType::kU16, v)); }
void Writer::set_i16(std::string_view k, int16_t v) { add_kv(k, scalar_payload(ValueType::kI16, v)); }
void Writer::set_u32(std::string_view k, uint32_t v) { add_kv(k, scalar_payload(ValueType::kU32, v)); }
void Writer::set_i32(std::string_view k, int32_t v) { add_kv(k, scalar_payload(ValueType::kI32, v)); }
void Writer::set_u64(std::string_view k, uint64_t v) { add_kv(k, scalar_payload(ValueType::kU64, v)); }
void Writer::set_i64(std::string_view k, int64_t v) { add_kv(k, scalar_payload(ValueType::kI64, v)); }
void Writer::set_f32(std::string_view k, float v) { add_kv(k, scalar_payload(ValueType::kF32, v)); }
void Writer::set_f64(std::string_view k, double v) { add_kv(k, scalar_payload(ValueType::kF64, v)); }
void Writer::set_bool(std::string_view k, bool v) {
  add_kv(k, scalar_payload(ValueType::kBool, static_cast<uint8_t>(v ? 1 : 0)));
}

void Writer::set_string(std::string_view k, std::string_view v) {
  std::vector<uint8_t> p;
  append<uint32_t>(p, static_cast<uint32_t>(ValueType::kString));
  append_string(p, v);
  add_kv(k, std::move(p));
}

void Writer::set_string_array(std::string_view k, const std::vector<std::string>& v) {
  std::vector<uint8_t> p;
  size_t total = 4 + 4 + 8;
  for (auto& s : v) total += 8 + s.size();
  p.reserve(total);
  append<uint32_t>(p, static_cast<uint32_t>(ValueType::kArray));
  append<uint32_t>(p, static_cast<uint32_t>(ValueType::kString));
  append<uint64_t>(p, v.size());
  for (auto& s : v) append_string(p, s);
  add_kv(k, std::move(p));
}

void Writer::set_array(std::string_view k, ValueType elem_type, const void* data, uint64_t count) {
  const size_t es = scalar_size(elem_type);
  std::vector<uint8_t> p;
  p.reserve(16 + es * count);
  append<uint32_t>(p, static_cast<uint32_t>(ValueType::kArray));
  append<uint32_t>(p, static_cast<uint32_t>(elem_type));
  append<uint64_t>(p, count);
  const uint8_t* d = static_cast<const uint8_t*>(data);
  p.insert(p.end(), d, d + es * count);
  add_kv(k, std::move(p));
}

Result<size_t> Writer::add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne) {
  if (begun_) return Status(StatusCode::kInternal, "gguf writer: add_tensor after begin()");
  const DTypeInfo* info = dtype_info(static_cast<uint32_t>(type));
  if (!info) return Status(StatusCode::kInvalidArgument, fmt::format("tensor '{}': unknown type", name));
  if (ne.empty() || ne.size() > 4)
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("tensor '{}': {} dimensions, expected 1..4", name, ne.size()));
  int64_t total = 1;
  for (int64_t d : ne) {
    if (d <= 0) return Status(StatusCode::kInvalidArgument, fmt::format("tensor '{}': non-positive dimension", name));
    total *= d;
  }
  if (ne[0] % info->block_size != 0)
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}", name, ne[0],
                              info->name, info->block_size));
  for (auto& t : tensors_)
    if (t.name == name) return Status(StatusCode::kInvalidArgument, fmt::format("duplicate tensor name '{}'", name));
  TensorDecl t;
  t.name = std::string(name);
  t.type = type;
  t.ne = ne;
  t.nbytes = static_cast<size_t>(total / info->block_size) * info->block_bytes;
  t.offset = data_size_;
  data_size_ = align_up(data_size_ + t.nbytes, alignment_);
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

uint64_t Writer::file_size() const {
  uint64_t h = 4 + 4 + 8 + 8;
  for (auto& kv : kvs_) h += 8 + kv.key.size() + kv.payload.size();
  if (alignment_ != 32 && !has_key("general.alignment")) h += 8 + 17 + 4 + 4;
  for (auto& t : tensors_) h += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  return align_up(h, alignment_) + data_size_;
}

Status Writer::put(const void* p, size_t n) {
  if (n == 0) return Status::Ok();
  LAYA_TRY(out_.write(p, n));
  pos_ += n;
  return Status::Ok();
}

Status Writer::pad_to_alignment() {
  static const uint8_t zeros[256] = {};
  uint64_t pad = align_up(pos_, alignment_) - pos_;
  while (pad > 0) {
    size_t k = static_cast<size_t>(pad < sizeof(zeros) ? pad : sizeof(zeros));
    LAYA_TRY(put(zeros, k));
    pad -= k;
  }
  return Status::Ok();
}

Status Writer::begin(const std::string& path, const OutputOptions& opt) {
  if (begun_) return Status(StatusCode::kInternal, "gguf writer: begin() called twice");
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    return Status(StatusCode::kInvalidArgument, "gguf writer: alignment must be a power of two");
  if (alignment_ != 32 && !has_key("general.alignment")) set_u32("general.alignment", static_cast<uint32_t>(alignment_));
  LAYA_ASSIGN_OR_RETURN(out_, AtomicFile::create(path, opt));
  begun_ = true;
  std::vector<uint8_t> h;
  append<uint32_t>(h, kMagic);
  append<uint32_t>(h, 3);
  append<uint64_t>(h, tensors_.size());
  append<uint64_t>(h, kvs_.size());
  LAYA_TRY(put(h.data(), h.size()));
  for (auto& kv : kvs_) {
    h.clear();
    append_string(h, kv.key);
    LAYA_TRY(put(h.data(), h.size()));
    LAYA_TRY(put(kv.payload.data(), kv.payload.size()));
  }
  for (auto& t : tensors_) {
    h.clear();
    append_string(h, t.name);
    append<uint32_t>(h, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) append<uint64_t>(h, static_cast<uint64_t>(d));
    append<uint32_t>(h, static_cast<uint32_t>(t.type));
    append<uint64_t>(h, t.offset);
    LAYA_TRY(put(h.data(), h.size()));
  }
  LAYA_TRY(pad_to_alignment());
  cur_ = 0;
  cur_written_ = 0;
  // Zero-byte tensors cannot exist (dimensions are positive), so nothing to skip.
  return Status::Ok();
}

Status Writer::write(const void* data, size_t n) {
  if (!out_.is_open()) return Status(StatusCode::kInternal, "gguf writer: write() before begin() or after a failure");
  if (cur_ >= tensors_.size())
    return Status(StatusCode::kInternal, fmt::format("gguf writer: {} bytes written after the last tensor", n));
  const TensorDecl& t = tensors_[cur_];
  if (n > t.nbytes - cur_written_)
    return Status(StatusCode::kInternal, fmt::format("gguf writer: tensor '{}': {} bytes written, only {} remain",
                                                     t.name, n, t.nbytes - cur_written_));
  LAYA_TRY(put(data, n));
  cur_written_ += n;
  if (cur_written_ == t.nbytes) {
    LAYA_TRY(pad_to_alignment());
    cur_++;
    cur_written_ = 0;
  }
  return Status::Ok();
}

Status Writer::finish() {
  if (!out_.is_open()) return Status(StatusCode::kInternal, "gguf writer: finish() before begin() or after a failure");
  if (cur_ != tensors_.size()) {
    out_.discard();  // an incomplete GGUF never reaches its name
    return Status(StatusCode::kInternal, fmt::format("gguf writer: tensor '{}' incomplete ({} of {} bytes written)",
                                                     tensors_[cur_].name, cur_written_, tensors_[cur_].nbytes));
  }
  return out_.commit();
}

}  // namespace laya::gguf
