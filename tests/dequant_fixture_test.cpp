// Dequantization against ggml's own output: <fixtures>/ref-models/<model>/dequant/<type>/
// holds tensors of <model>-<type>.gguf dequantized by ggml (float32 .npy, numpy
// shape [rows, cols]). The scalar table and every SIMD table must reproduce them.
//
// The GGUF is read by a minimal tensor locator in this file, so the test does
// not depend on the engine's GGUF parser.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/io.h"
#include "core/fp16.h"
#include "test_util.h"

namespace laya::cpu {
namespace {

struct LocatedTensor {
  DType type = DType::Invalid;
  std::vector<int64_t> ne;
  uint64_t offset = 0;  // from the start of the file
};

class MiniGguf {
 public:
  bool open(const std::string& path, std::string* err) {
    Result<std::string> file = read_file(path);
    if (!file.ok()) return fail(err, file.status().to_string());
    bytes_.assign(file->begin(), file->end());
    pos_ = 0;
    uint32_t magic = 0, version = 0;
    if (!rd(&magic) || magic != 0x46554747u) return fail(err, "not a GGUF file");
    if (!rd(&version) || version < 2) return fail(err, "unsupported GGUF version");
    uint64_t n_tensors = 0, n_kv = 0;
    if (!rd(&n_tensors) || !rd(&n_kv)) return fail(err, "truncated header");
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key;
      uint32_t vt = 0;
      if (!rd_str(&key) || !rd(&vt)) return fail(err, "truncated metadata");
      if (key == "general.alignment" && vt == 4) {
        uint32_t a = 0;
        if (!rd(&a)) return fail(err, "truncated metadata");
        alignment = a;
      } else if (!skip_value(vt)) {
        return fail(err, "bad metadata value for " + key);
      }
    }
    std::map<std::string, LocatedTensor> infos;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      std::string name;
      uint32_t n_dims = 0, type = 0;
      if (!rd_str(&name) || !rd(&n_dims) || n_dims > 4) return fail(err, "bad tensor info");
      LocatedTensor t;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t v = 0;
        if (!rd(&v)) return fail(err, "bad tensor info");
        t.ne.push_back(static_cast<int64_t>(v));
      }
      uint64_t off = 0;
      if (!rd(&type) || !rd(&off)) return fail(err, "bad tensor info");
      t.type = static_cast<DType>(type);
      t.offset = off;
      infos[name] = t;
    }
    const uint64_t data_start = (pos_ + alignment - 1) / alignment * alignment;
    for (auto& [name, t] : infos) t.offset += data_start;
    tensors_ = std::move(infos);
    return true;
  }

  const LocatedTensor* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const std::map<std::string, LocatedTensor>& tensors() const { return tensors_; }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  static bool fail(std::string* err, const std::string& m) {
    *err = m;
    return false;
  }
  template <typename T>
  bool rd(T* v) {
    if (pos_ + sizeof(T) > bytes_.size()) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool rd_str(std::string* s) {
    uint64_t n = 0;
    if (!rd(&n) || n > bytes_.size() - pos_) return false;
    s->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  static size_t scalar_size(uint32_t vt) {
    switch (vt) {
      case 0: case 1: case 7: return 1;
      case 2: case 3: return 2;
      case 4: case 5: case 6: return 4;
      case 10: case 11: case 12: return 8;
      default: return 0;
    }
  }
  bool skip_value(uint32_t vt) {
    if (vt == 8) {
      std::string s;
      return rd_str(&s);
    }
    if (vt == 9) {
      uint32_t et = 0;
      uint64_t count = 0;
      if (!rd(&et) || !rd(&count)) return false;
      if (et == 8 || et == 9) {
        for (uint64_t i = 0; i < count; ++i)
          if (!skip_value(et)) return false;
        return true;
      }
      const size_t es = scalar_size(et);
      if (es == 0 || count > (bytes_.size() - pos_) / es) return false;
      pos_ += es * count;
      return true;
    }
    const size_t es = scalar_size(vt);
    if (es == 0 || pos_ + es > bytes_.size()) return false;
    pos_ += es;
    return true;
  }

  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
  std::map<std::string, LocatedTensor> tensors_;
};

TEST(DequantFixture, MatchesGgmlForEveryIsa) {
  LAYA_REQUIRE_FIXTURES(fixtures);
  namespace fs = std::filesystem;
  std::vector<const KernelTable*> tables;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon})
    if (const KernelTable* t = kernels_for(isa)) tables.push_back(t);

  int checked = 0;
  for (const char* model : {"llama-tiny", "qwen3-tiny"}) {
    for (const char* qtype : {"Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
      const fs::path dir = fs::path(fixtures) / "ref-models" / model / "dequant" / qtype;
      const fs::path gguf_path =
          fs::path(fixtures) / "ref-models" / model / "gguf" / (std::string(model) + "-" + qtype + ".gguf");
      SCOPED_TRACE(std::string(model) + " " + qtype);
      ASSERT_TRUE(fs::is_directory(dir)) << dir;
      const auto types = nlohmann::json::parse(test::read_text_file((dir / "types.json").string()));
      MiniGguf gguf;
      std::string err;
      ASSERT_TRUE(gguf.open(gguf_path.string(), &err)) << err;

      int files = 0;
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".npy") continue;
        const std::string name = entry.path().stem().string();
        SCOPED_TRACE(name);
        ++files;
        test::NpyArray npy;
        ASSERT_TRUE(test::read_npy_f32(entry.path().string(), &npy, &err)) << err;
        ASSERT_EQ(npy.shape.size(), 2u);
        const LocatedTensor* t = gguf.find(name);
        ASSERT_NE(t, nullptr) << "tensor not in GGUF";
        ASSERT_NE(dtype_info(static_cast<uint32_t>(t->type)), nullptr);
        EXPECT_EQ(types["tensors"][name]["type"].get<std::string>(), dtype_name(t->type));
        ASSERT_EQ(t->ne.size(), 2u);
        const int64_t cols = t->ne[0], rows = t->ne[1];
        ASSERT_EQ(npy.shape[0], rows);
        ASSERT_EQ(npy.shape[1], cols);
        const size_t rb = row_bytes(t->type, cols);
        ASSERT_LE(t->offset + rb * rows, gguf.size());
        const uint8_t* base = gguf.data() + t->offset;

        for (const KernelTable* tab : tables) {
          const auto fn = tab->dequantize_row[static_cast<uint32_t>(t->type)];
          ASSERT_NE(fn, nullptr) << isa_name(tab->isa);
          std::vector<float> row(static_cast<size_t>(cols));
          int64_t bad = 0;
          double max_rel = 0.0;
          for (int64_t r = 0; r < rows; ++r) {
            fn(base + r * rb, row.data(), cols);
            const float* want = npy.data.data() + r * cols;
            for (int64_t c = 0; c < cols; ++c) {
              const double diff = std::fabs(static_cast<double>(row[c]) - want[c]);
              const double rel = diff / std::max(std::fabs(static_cast<double>(want[c])), 1e-30);
              if (diff > 0) max_rel = std::max(max_rel, rel);
              if (diff > 1e-6 * std::fabs(static_cast<double>(want[c])) && bad++ < 3) {
                ADD_FAILURE() << isa_name(tab->isa) << " row " << r << " col " << c << ": " << row[c]
                              << " vs ggml " << want[c];
              }
            }
          }
          EXPECT_EQ(bad, 0) << isa_name(tab->isa) << " " << dtype_name(t->type) << " max rel " << max_rel;
          ++checked;
        }
      }
      EXPECT_GT(files, 0) << "no .npy in " << dir;
    }
  }
  std::printf("[ info ] %d tensor x ISA dequantizations checked\n", checked);
}

// Q8_0 has no ggml-dequantized fixture; check its layout on real data instead:
// the q8_0 file was quantized from the f16 file's weights, so every element must
// lie within about half a quantization step (d/2, plus d's own fp16 rounding) of
// the f16 value, for every ISA.
TEST(DequantFixture, Q8_0WithinHalfStepOfF16) {
  LAYA_REQUIRE_FIXTURES(fixtures);
  namespace fs = std::filesystem;
  const KernelTable& ref = *kernels_for(Isa::kScalar);
  std::vector<const KernelTable*> tables;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon})
    if (const KernelTable* t = kernels_for(isa)) tables.push_back(t);
  int checked = 0;
  for (const char* model : {"llama-tiny", "qwen3-tiny"}) {
    SCOPED_TRACE(model);
    const fs::path g = fs::path(fixtures) / "ref-models" / model / "gguf";
    MiniGguf q8, f16;
    std::string err;
    ASSERT_TRUE(q8.open((g / (std::string(model) + "-q8_0.gguf")).string(), &err)) << err;
    ASSERT_TRUE(f16.open((g / (std::string(model) + "-f16.gguf")).string(), &err)) << err;
    for (const auto& [name, t] : q8.tensors()) {
      if (t.type != DType::Q8_0) continue;
      SCOPED_TRACE(name);
      const LocatedTensor* f = f16.find(name);
      ASSERT_NE(f, nullptr);
      ASSERT_TRUE(f->type == DType::F16 || f->type == DType::F32);
      ASSERT_EQ(f->ne, t.ne);
      const int64_t cols = t.ne[0];
      int64_t rows = 1;
      for (size_t k = 1; k < t.ne.size(); ++k) rows *= t.ne[k];
      const size_t rbq = row_bytes(DType::Q8_0, cols), rbf = row_bytes(f->type, cols);
      ASSERT_LE(t.offset + rbq * rows, q8.size());
      ASSERT_LE(f->offset + rbf * rows, f16.size());
      std::vector<float> want(cols), got(cols);
      for (const KernelTable* tab : tables) {
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* qrow = q8.data() + t.offset + r * rbq;
          ref.dequantize_row[static_cast<uint32_t>(f->type)](f16.data() + f->offset + r * rbf, want.data(), cols);
          tab->dequantize_row[static_cast<uint32_t>(DType::Q8_0)](qrow, got.data(), cols);
          for (int64_t c = 0; c < cols; ++c) {
            uint16_t dbits;
            std::memcpy(&dbits, qrow + (c / 32) * sizeof(BlockQ8_0), 2);
            const double step = std::fabs(static_cast<double>(fp16_to_f32(dbits)));
            if (std::fabs(static_cast<double>(got[c]) - want[c]) > 0.6 * step && bad++ < 3) {
              ADD_FAILURE() << isa_name(tab->isa) << " row " << r << " col " << c << ": " << got[c]
                            << " vs f16 " << want[c] << " (step " << step << ")";
            }
          }
        }
        EXPECT_EQ(bad, 0) << isa_name(tab->isa);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace laya::cpu
