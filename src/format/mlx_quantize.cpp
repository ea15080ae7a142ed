#include "format/mlx_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/fp16.h"

namespace laya {

namespace {

uint16_t to_bf16(float f) {  // round to nearest even, as MLX's astype
  uint32_t b = f32_to_bits(f);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

void store_param(std::vector<uint8_t>& out, size_t i, float v, DType type) {
  if (type == DType::F32) {
    std::memcpy(out.data() + i * 4, &v, 4);
    return;
  }
  const uint16_t h = type == DType::F16 ? f32_to_fp16(v) : to_bf16(v);
  std::memcpy(out.data() + i * 2, &h, 2);
}

// Value q at bit offset i·bits of a little-endian bit stream (bytes zeroed first).
void put_bits(uint8_t* row, int64_t i, int bits, uint32_t q) {
  const int64_t bit = i * bits;
  const uint32_t shifted = q << (bit % 8);
  row[bit / 8] |= static_cast<uint8_t>(shifted & 0xffu);
  if (bit % 8 + bits > 8) row[bit / 8 + 1] |= static_cast<uint8_t>(shifted >> 8);
}

}  // namespace

MlxQuantizedMatrix mlx_quantize(const float* w, int64_t rows, int64_t cols, int bits, int group, DType type) {
  MlxQuantizedMatrix m;
  const int64_t ng = cols / group, row_bytes = cols * bits / 8;
  const size_t pb = type == DType::F32 ? 4 : 2;
  m.q.assign(static_cast<size_t>(rows * row_bytes), 0);
  m.scales.assign(static_cast<size_t>(rows * ng) * pb, 0);
  m.biases.assign(static_cast<size_t>(rows * ng) * pb, 0);
  const float n_bins = static_cast<float>((1 << bits) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < ng; ++g) {
      const float* x = w + r * cols + g * group;
      const float w_max = *std::max_element(x, x + group), w_min = *std::min_element(x, x + group);
      const bool mask = std::fabs(w_min) > std::fabs(w_max);
      float scale = std::max((w_max - w_min) / n_bins, 1e-7f);
      scale = mask ? scale : -scale;
      const float edge = mask ? w_min : w_max;
      const float q0 = std::nearbyint(edge / scale);
      if (q0 != 0.0f) scale = edge / q0;
      const float bias = q0 == 0.0f ? 0.0f : edge;
      uint8_t* qrow = m.q.data() + r * row_bytes;
      for (int j = 0; j < group; ++j) {
        const float q = std::clamp(std::nearbyint((x[j] - bias) / scale), 0.0f, n_bins);
        put_bits(qrow, g * group + j, bits, static_cast<uint32_t>(q));
      }
      store_param(m.scales, static_cast<size_t>(r * ng + g), scale, type);
      store_param(m.biases, static_cast<size_t>(r * ng + g), bias, type);
    }
  }
  return m;
}

Status write_safetensors(const std::string& path, const std::vector<SafetensorsArray>& arrays, const OutputOptions& opt) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "mlx"}};
  uint64_t off = 0;
  for (const SafetensorsArray& a : arrays) {
    header[a.name] = {{"dtype", a.dtype}, {"shape", a.shape}, {"data_offsets", {off, off + a.bytes.size()}}};
    off += a.bytes.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data 8-byte aligned, as the reference writer pads
  const uint64_t n = h.size();
  LAYA_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path, opt));
  LAYA_TRY(f.write(&n, 8));
  LAYA_TRY(f.write(h));
  for (const SafetensorsArray& a : arrays) LAYA_TRY(f.write(a.bytes.data(), a.bytes.size()));
  return f.commit();
}

}  // namespace laya
