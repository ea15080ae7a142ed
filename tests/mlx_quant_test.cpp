// MLX-quantized folders (DType::MLX_Q*, model/mlx_quant.h): the affine
// kernels against the scalar reference and against the format's formula
// computed here (w = s·q + z, q at bit i·bits of each row, low bits first),
// and llama-tiny quantized the way mlx-lm's convert does against (a) the same
// weights dequantized here and run as a float32 folder, (b) the transformers
// float32 logits, within the error of the GGUF quantization of as many bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backend/cpu/kernels.h"
#include "core/fp16.h"
#include "engine/engine.h"
#include "format/mlx_quantize.h"
#include "format/safetensors.h"
#include "modelgen/presets.h"
#include "test_util.h"

namespace laya {
namespace {

namespace fs = std::filesystem;
using cpu::AffineRow;
using cpu::Isa;

float param_at(const std::vector<uint8_t>& p, DType type, size_t i) {
  if (type == DType::F32) {
    float f;
    std::memcpy(&f, p.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p.data() + i * 2, 2);
  return type == DType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

// The format's formula, written independently of the kernels: the row as
// uint32 words, value i at bit i·bits of the words' concatenation (low bits
// first), read through a 64-bit window.
std::vector<float> dequantize_here(const MlxQuantizedMatrix& m, int64_t rows, int64_t cols, int bits, int group,
                                   DType type) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const int64_t words = cols * bits / 32;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<uint32_t> w(static_cast<size_t>(words) + 1, 0);
    std::memcpy(w.data(), m.q.data() + r * words * 4, static_cast<size_t>(words) * 4);
    for (int64_t i = 0; i < cols; ++i) {
      const int64_t bit = i * bits;
      const uint64_t window = w[static_cast<size_t>(bit / 32)] | (uint64_t{w[static_cast<size_t>(bit / 32 + 1)]} << 32);
      const auto q = static_cast<float>((window >> (bit % 32)) & ((1u << bits) - 1));
      const size_t g = static_cast<size_t>(r * (cols / group) + i / group);
      const float sq = param_at(m.scales, type, g) * q;
      out[static_cast<size_t>(r * cols + i)] = sq + param_at(m.biases, type, g);
    }
  }
  return out;
}

AffineRow row_of(const MlxQuantizedMatrix& m, int64_t cols, int bits, int group, DType type, int64_t r) {
  const size_t per = static_cast<size_t>(cols / group) * (type == DType::F32 ? 4 : 2);
  return AffineRow{m.q.data() + r * cols * bits / 8, m.scales.data() + r * per, m.biases.data() + r * per, type, group};
}

TEST(MlxKernels, PackingIsLowBitsFirst) {
  // MLX's documented packing: 4 bits, word 0x76543210 holds 0, 1, ..., 7; 3
  // bits, 8 values in 3 bytes (mlx/backend/cpu/quantized.cpp extract_bits).
  const cpu::KernelTable& ref = *cpu::kernels_for(Isa::kScalar);
  const uint16_t one = f32_to_fp16(1.0f), zero = 0;
  uint16_t s[1] = {one}, z[1] = {zero};
  uint32_t w4[4] = {0x76543210u, 0xfedcba98u, 0, 0};
  float out[32];
  ref.affine_dequantize[4](AffineRow{reinterpret_cast<const uint8_t*>(w4), s, z, DType::F16, 32}, out, 32);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], static_cast<float>(i)) << i;
  // 3 bits: values 1..7, 0 then 7, 6, ..., 0 as a 96-bit little-endian stream.
  uint8_t w3[12] = {};
  const int vals[16] = {1, 2, 3, 4, 5, 6, 7, 0, 7, 6, 5, 4, 3, 2, 1, 0};
  for (int i = 0; i < 16; ++i)
    for (int b = 0; b < 3; ++b)
      if (vals[i] >> b & 1) w3[(i * 3 + b) / 8] |= static_cast<uint8_t>(1u << ((i * 3 + b) % 8));
  EXPECT_EQ(w3[0] & 0x7, 1);                                  // MLX: w_out[0] = w_in[0] & 0x7
  EXPECT_EQ(((w3[0] & 0xc0) >> 6) + ((w3[1] & 0x1) << 2), 3);  // w_out[2]
  ref.affine_dequantize[3](AffineRow{w3, s, z, DType::F16, 32}, out, 32);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], static_cast<float>(vals[i])) << i;
}

TEST(MlxKernels, EveryIsaMatchesTheFormula) {
  constexpr int64_t kRows = 4, kCols = 384;  // a multiple of every group size
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(kRows * kCols), x(kCols);
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng) * 20.0f;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const cpu::KernelTable* k = cpu::kernels_for(isa);
    if (!k) continue;
    for (int bits : {2, 3, 4, 5, 6, 8})
      for (int group : {32, 64, 128})
        for (DType type : {DType::F16, DType::BF16, DType::F32}) {
          SCOPED_TRACE(::testing::Message() << cpu::isa_name(isa) << " bits " << bits << " group " << group << " "
                                            << dtype_name(type));
          const MlxQuantizedMatrix m = mlx_quantize(w.data(), kRows, kCols, bits, group, type);
          const std::vector<float> want = dequantize_here(m, kRows, kCols, bits, group, type);
          // Quantization error: half a step of the range (|w| < 0.3 here), plus the
          // rounding of the stored scale and bias (F16 2^-11, BF16 2^-8 relative).
          const float eps = type == DType::BF16 ? 0x1p-8f : type == DType::F16 ? 0x1p-11f : 0.0f;
          const float tol = 0.6f / static_cast<float>((1 << bits) - 1) * 0.5f + 2 * 0.3f * eps + 1e-6f;
          for (int64_t i = 0; i < kRows * kCols; ++i) ASSERT_NEAR(want[i], w[i], tol) << i;
          std::vector<float> got(kCols);
          for (int64_t r = 0; r < kRows; ++r) {
            const AffineRow row = row_of(m, kCols, bits, group, type, r);
            k->affine_dequantize[bits](row, got.data(), kCols);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < kCols; ++i) {
              // F16/BF16 scales: s·q is exact in float32, one rounding of the sum, as here.
              if (type != DType::F32) ASSERT_EQ(got[i], want[r * kCols + i]) << i;
              // F32 scales: a fused s·q + z may differ by the product's rounding (|s·q| < 0.3).
              else ASSERT_NEAR(got[i], want[r * kCols + i], 0.3f * 0x1p-23f) << i;
              exact += static_cast<double>(want[r * kCols + i]) * x[i];
              mag += std::fabs(static_cast<double>(want[r * kCols + i]) * x[i]);
            }
            std::vector<float> x4(kCols), sum32(kCols / 32);
            cpu::affine_prepare(x.data(), kCols, x4.data(), sum32.data());
            const float dot = k->affine_dot[bits](row, cpu::AffineX{x.data(), x4.data(), sum32.data()}, kCols);
            EXPECT_NEAR(dot, exact, 2e-6 * mag) << "row " << r;
          }
        }
  }
}

// ---- llama-tiny as an MLX folder -----------------------------------------------------------

struct Quant {
  int bits, group;
  DType type;
};

// llama-tiny's float32 HF folder with every Linear/Embedding weight whose
// width is a multiple of the group quantized (as mlx-lm's convert decides;
// mlp.down_proj's 688 is no multiple of 32, so it stays float, as there),
// written to `mlx`; the same weights dequantized here to `deq` (float32).
// `edit` may change the arrays and config before they are written.
using Edit = std::function<void(std::vector<SafetensorsArray>&, nlohmann::json&)>;
void make_folders(const std::string& src, const Quant& qz, const std::string& mlx, const std::string& deq,
                  const Edit& edit = nullptr) {
  auto sf = safetensors::File::open(src + "/model.safetensors");
  ASSERT_TRUE(sf.ok()) << sf.status().to_string();
  std::vector<SafetensorsArray> mlx_arrays, deq_arrays;
  const char* tname = qz.type == DType::F16 ? "F16" : qz.type == DType::BF16 ? "BF16" : "F32";
  for (const auto& t : (*sf)->tensors()) {
    ASSERT_EQ(t.type, DType::F32) << t.name;
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    const bool linear = t.shape.size() == 2 && t.name.ends_with(".weight") && t.shape[1] % qz.group == 0;
    if (!linear) {
      mlx_arrays.push_back({t.name, "F32", t.shape, bytes});
      deq_arrays.push_back({t.name, "F32", t.shape, std::move(bytes)});
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const MlxQuantizedMatrix m =
        mlx_quantize(reinterpret_cast<const float*>(t.data), rows, cols, qz.bits, qz.group, qz.type);
    const std::vector<float> d = dequantize_here(m, rows, cols, qz.bits, qz.group, qz.type);
    const std::string mod = t.name.substr(0, t.name.size() - 7);
    mlx_arrays.push_back({mod + ".weight", "U32", {rows, cols * qz.bits / 32}, m.q});
    mlx_arrays.push_back({mod + ".scales", tname, {rows, cols / qz.group}, m.scales});
    mlx_arrays.push_back({mod + ".biases", tname, {rows, cols / qz.group}, m.biases});
    std::vector<uint8_t> db(d.size() * 4);
    std::memcpy(db.data(), d.data(), db.size());
    deq_arrays.push_back({t.name, "F32", t.shape, std::move(db)});
  }
  auto cfg = nlohmann::json::parse(test::read_text_file(src + "/config.json"));
  nlohmann::json qcfg = {{"group_size", qz.group}, {"bits", qz.bits}, {"mode", "affine"}};
  nlohmann::json mcfg = cfg;
  mcfg["quantization"] = qcfg;
  mcfg["quantization_config"] = qcfg;
  if (edit) edit(mlx_arrays, mcfg);
  for (const auto& [dir, arrays, c] : {std::tuple{mlx, &mlx_arrays, &mcfg}, std::tuple{deq, &deq_arrays, &cfg}}) {
    if (dir.empty()) continue;
    fs::create_directories(dir);
    std::ofstream(dir + "/config.json") << c->dump(2);
    OutputOptions replace;
    replace.overwrite = true;
    ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", *arrays, replace).ok());
  }
}

std::vector<std::vector<int32_t>> prompts(const std::string& fx) {
  auto j = nlohmann::json::parse(test::read_text_file(fx + "/ref-models/common/prompts.json"));
  return j["prompts"].get<std::vector<std::vector<int32_t>>>();
}

// Logits at every position of every prompt. LAYA_TEST_BACKEND=cuda runs the
// folders through another backend (same tolerances), as the model logits tests do.
std::vector<float> run(const std::string& path, const std::vector<std::vector<int32_t>>& ps) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return {};
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 512;
  if (const char* b = std::getenv("LAYA_TEST_BACKEND"); b && *b) eo.backend = b;
  auto e = Engine::create(std::move(m).value(), eo);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  std::vector<float> all;
  for (const auto& p : ps) {
    std::vector<float> got(p.size() * static_cast<size_t>((*e)->n_vocab()));
    auto seq = (*e)->new_sequence();
    EXPECT_TRUE((*e)->prefill(*seq, p, 0, got.data()).ok());
    all.insert(all.end(), got.begin(), got.end());
  }
  return all;
}

std::vector<float> reference(const std::string& fx, const std::string& prefix, size_t n_prompts) {
  std::vector<float> all;
  for (size_t i = 0; i < n_prompts; ++i) {
    test::NpyArray a;
    std::string err;
    EXPECT_TRUE(test::read_npy_f32(fx + "/ref-models/llama-tiny/ref/" + prefix + "_p" + std::to_string(i) + ".npy", &a,
                                   &err)) << err;
    all.insert(all.end(), a.data.begin(), a.data.end());
  }
  return all;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size() || a.empty()) return 1e9;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

class MlxModel : public ::testing::TestWithParam<Quant> {};

TEST_P(MlxModel, LogitsWithinQuantizationError) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Quant qz = GetParam();
  const std::string tmp = (fs::temp_directory_path() / fmt::format("laya-mlx-{}-{}", getpid(), qz.bits)).string();
  make_folders(fx + "/ref-models/llama-tiny/hf", qz, tmp + "/mlx", tmp + "/deq");
  const auto ps = prompts(fx);
  const std::vector<float> mlx = run(tmp + "/mlx", ps), deq = run(tmp + "/deq", ps);
  const std::vector<float> f32 = reference(fx, "logits", ps.size());
  // The yardstick: GGUF's quantization of the same float weights, 8 bits
  // (Q8_0) for MLX 8-bit, 4 bits (Q4_0, output Q6_K) for fewer.
  const std::vector<float> gguf = reference(fx, qz.bits == 8 ? "logits_q8_0" : "logits_Q4_0", ps.size());
  const double same_weights = rel_l2(mlx, deq), vs_float = rel_l2(mlx, f32), gguf_vs_float = rel_l2(gguf, f32);
  std::printf("[ measure  ] MLX %d-bit group %d %s: vs its dequantized weights %.2e, vs float32 %.3e (GGUF %s vs "
              "float32: %.3e)\n", qz.bits, qz.group, dtype_name(qz.type), same_weights, vs_float,
              qz.bits == 8 ? "Q8_0" : "Q4_0", gguf_vs_float);
  // The same weights in float32: only the order of float32 sums differs.
  EXPECT_LE(same_weights, 1e-5);
  // Against float32: the quantization's own error. MLX b bits with groups of
  // g spends b + 32/g bits a weight (4.5 at 4/64, like Q4_0; 8.5 at 8/64,
  // like Q8_0) and its step is the group's range / (2^b − 1), about Q4_0's
  // and Q8_0's absmax / 2^(b−1): so within 1.5x of that GGUF's error.
  // Each bit fewer doubles the step (3 bits: 2x Q4_0's bound, 6 bits: 1/4).
  EXPECT_LE(vs_float, 1.5 * gguf_vs_float * (qz.bits == 8 ? 1.0 : std::ldexp(1.0, 4 - qz.bits)));
  fs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Quants, MlxModel,
                         ::testing::Values(Quant{4, 64, DType::F16}, Quant{8, 64, DType::BF16},
                                           Quant{4, 32, DType::BF16}, Quant{8, 128, DType::F16},
                                           Quant{3, 64, DType::F16}, Quant{6, 128, DType::BF16}),
                         [](const auto& info) {
                           return fmt::format("b{}_g{}_{}", info.param.bits, info.param.group,
                                              dtype_name(info.param.type));
                         });

// ---- bad folders: the error names the tensor and what is wrong ----------------------------

struct BadCase {
  const char* name;
  Edit edit;
  StatusCode code;
  std::vector<const char*> fragments;
};

SafetensorsArray* array_named(std::vector<SafetensorsArray>& a, const std::string& n) {
  for (auto& x : a)
    if (x.name == n) return &x;
  return nullptr;
}

const char* kQ = "model.layers.1.self_attn.q_proj";

TEST(MlxModel, BadFoldersAreRefusedByName) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string q = kQ;
  const std::vector<BadCase> cases = {
      {"missing scales", [&](auto& a, auto&) { std::erase_if(a, [&](auto& x) { return x.name == q + ".scales"; }); },
       StatusCode::kNotFound, {"model.layers.1.self_attn.q_proj", "scales' is missing"}},
      {"missing biases", [&](auto& a, auto&) { std::erase_if(a, [&](auto& x) { return x.name == q + ".biases"; }); },
       StatusCode::kNotFound, {"q_proj.biases' is missing"}},
      {"scales too wide", [&](auto& a, auto&) {
         for (const char* k : {".scales", ".biases"}) {
           SafetensorsArray* s = array_named(a, q + k);
           s->shape[1] += 1;
           s->bytes.resize(s->bytes.size() + static_cast<size_t>(s->shape[0]) * 2);
         }
       }, StatusCode::kCorrupt, {"q_proj.weight' has 32 uint32 per row", "5 groups of 64"}},
      {"biases of another shape", [&](auto& a, auto&) {
         SafetensorsArray* b = array_named(a, q + ".biases");
         b->shape = {b->shape[1], b->shape[0]};
       }, StatusCode::kCorrupt, {"q_proj.biases' has shape [4, 256]", "must match"}},
      {"bits 7", [&](auto&, auto& c) { c["quantization"]["bits"] = 7; }, StatusCode::kUnsupported,
       {"quantization.bits = 7", "2, 3, 4, 5, 6 and 8"}},
      {"odd group size", [&](auto&, auto& c) { c["quantization"]["group_size"] = 48; }, StatusCode::kUnsupported,
       {"quantization.group_size = 48", "32, 64 or 128"}},
      {"wrong bits for the arrays", [&](auto&, auto& c) { c["quantization"][q] = {{"bits", 8}, {"group_size", 64}}; },
       StatusCode::kCorrupt, {"q_proj.weight' has 32 uint32 per row", "bits 8 and group_size 64"}},
      {"mxfp4 mode", [&](auto&, auto& c) { c["quantization"]["mode"] = "mxfp4"; }, StatusCode::kUnsupported,
       {"quantization.mode = \"mxfp4\"", "affine"}},
      {"no quantization in config", [&](auto&, auto& c) { c.erase("quantization"); c.erase("quantization_config"); },
       StatusCode::kCorrupt, {"MLX-quantized '", "no \"quantization\""}},
      {"GPTQ config", [&](auto&, auto& c) {
         c.erase("quantization");
         c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
       }, StatusCode::kUnsupported, {"quant_method = \"gptq\""}},
      {"float weight with scales", [&](auto& a, auto&) {
         SafetensorsArray* w = array_named(a, q + ".weight");
         w->dtype = "F32";
       }, StatusCode::kCorrupt, {"q_proj.weight' is F32", "U32"}},
      {"U32 norm", [&](auto& a, auto&) { array_named(a, "model.norm.weight")->dtype = "U32"; },
       StatusCode::kNotFound, {"model.norm.weight' is U32", "model.norm.scales' is missing"}},
  };
  const std::string tmp = (fs::temp_directory_path() / fmt::format("laya-mlx-bad-{}", getpid())).string();
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(tmp);
    make_folders(fx + "/ref-models/llama-tiny/hf", Quant{4, 64, DType::F16}, tmp, "", c.edit);
    auto m = Model::load(tmp);
    ASSERT_FALSE(m.ok());
    std::printf("[ message  ] %s: %s\n", c.name, m.status().message().c_str());
    EXPECT_EQ(m.status().code(), c.code);
    for (const char* f : c.fragments) EXPECT_NE(m.status().message().find(f), std::string::npos) << f;
  }
  fs::remove_all(tmp);
}

TEST(MlxModel, InfoNamesTheQuantizationAndNoCopyIsMade) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string tmp = (fs::temp_directory_path() / fmt::format("laya-mlx-info-{}", getpid())).string();
  make_folders(fx + "/ref-models/llama-tiny/hf", Quant{4, 64, DType::BF16}, tmp, "",
               [](auto&, auto& c) { c["quantization"][kQ] = {{"bits", 4}, {"group_size", 64}}; });
  auto m = Model::load(tmp);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->mlx_quant().describe(), "MLX affine 4-bit, group 64 (+ 1 per-module entries)");
  const Tensor& wq = (*m)->weights().layers[1].wq;
  EXPECT_EQ(wq.type, DType::MLX_Q4);
  EXPECT_EQ(wq.groups.size, 64);
  EXPECT_EQ(wq.groups.type, DType::BF16);
  EXPECT_EQ((*m)->weights().tok_embd.type, DType::MLX_Q4);     // mlx-lm quantizes embeddings too
  EXPECT_EQ((*m)->weights().layers[0].w_down.type, DType::F32);  // 688 columns: no group fits
  // Weights used in place: nothing prepared (no dequantized or repacked copy).
  EngineOptions eo;
  eo.n_threads = 1;
  eo.n_ctx = 64;
  auto e = Engine::create(std::move(m).value(), eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->backend().prepared_bytes(), 0u);
  fs::remove_all(tmp);
}

TEST(MlxModel, ShardedFolderWithScalesInAnotherShard) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string tmp = (fs::temp_directory_path() / fmt::format("laya-mlx-shard-{}", getpid())).string();
  const std::string one = tmp + "/one";
  make_folders(fx + "/ref-models/llama-tiny/hf", Quant{4, 64, DType::F16}, one, "");
  // The same arrays in two shards, every .scales in the second (mlx-lm splits by size, not by module).
  std::vector<SafetensorsArray> a, b;
  auto sf = safetensors::File::open(one + "/model.safetensors");
  ASSERT_TRUE(sf.ok());
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (const auto& t : (*sf)->tensors()) {
    const bool second = t.name.ends_with(".scales");
    (second ? b : a).push_back({t.name, t.dtype_str, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
    index["weight_map"][t.name] = second ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  const std::string two = tmp + "/two";
  fs::create_directories(two);
  fs::copy_file(one + "/config.json", two + "/config.json");
  OutputOptions o;
  ASSERT_TRUE(write_safetensors(two + "/model-00001-of-00002.safetensors", a, o).ok());
  ASSERT_TRUE(write_safetensors(two + "/model-00002-of-00002.safetensors", b, o).ok());
  std::ofstream(two + "/model.safetensors.index.json") << index.dump();
  const auto ps = prompts(fx);
  const std::vector<std::vector<int32_t>> first(ps.begin(), ps.begin() + 3);
  EXPECT_EQ(run(one, first), run(two, first));  // bit for bit
  fs::remove_all(tmp);
}

TEST(MlxModel, MkmodelWritesAnMlxFolderThatRuns) {
  const std::string tmp = (fs::temp_directory_path() / fmt::format("laya-mlx-mk-{}", getpid())).string();
  MkModelOptions opt;
  opt.type = MkType::kMlx8;
  opt.tokenizer_json = "";
  opt.output.overwrite = true;
  auto r = make_random_model(*find_preset("test-tiny"), opt, tmp);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto m = Model::load(tmp);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->mlx_quant().describe(), "MLX affine 8-bit, group 64");
  EXPECT_EQ((*m)->weights().layers[0].wq.type, DType::MLX_Q8);
  EXPECT_EQ((*m)->weights().tok_embd.type, DType::MLX_Q8);
  EngineOptions eo;
  eo.n_threads = 1;
  eo.n_ctx = 64;
  auto e = Engine::create(std::move(m).value(), eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  // A pass of a few tokens (the affine dot kernels, activations prepared once
  // per matmul) gives each row the bits of decoding that token alone
  // (Backend::exact_rows), as for every other weight type.
  const int64_t nv = (*e)->n_vocab();
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5};
  std::vector<float> pass(toks.size() * static_cast<size_t>(nv));
  auto seq = (*e)->new_sequence();
  ASSERT_TRUE((*e)->prefill(*seq, toks, 0, pass.data()).ok());
  auto one = (*e)->new_sequence();
  for (size_t t = 0; t < toks.size(); ++t) {
    ASSERT_TRUE((*e)->decode(*one, toks[t]).ok());
    for (int64_t i = 0; i < nv; ++i) {
      ASSERT_TRUE(std::isfinite(one->logits()[i])) << i;
      ASSERT_EQ(one->logits()[i], pass[t * static_cast<size_t>(nv) + static_cast<size_t>(i)]) << "token " << t << ", id "
                                                                                            << i;
    }
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace laya
