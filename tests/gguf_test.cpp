// GGUF reader: valid files round-trip; every malformed file gives a non-ok
// Status whose message names the key/tensor and the problem; real fixture
// files parse with the expected tensor types.
#include "format/gguf.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_writer.h"
#include "test_util.h"

namespace laya {
namespace {

using test::Bytes;
using test::GgufWriter;
namespace gt = test::gt;

Result<std::unique_ptr<gguf::File>> parse(const std::vector<uint8_t>& b, const std::string& name = "test.gguf") {
  return gguf::File::parse(MappedFile::borrow(b.data(), b.size(), name));
}

// Checks the error code and that the message contains every fragment.
void expect_error(const Result<std::unique_ptr<gguf::File>>& r, StatusCode code,
                  std::initializer_list<const char*> fragments) {
  ASSERT_FALSE(r.ok()) << "expected an error, the file parsed";
  test::expect_status(r.status(), code, fragments);
}

// A small valid file with metadata of several kinds and three tensors.
GgufWriter small_file() {
  GgufWriter w;
  w.kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 2)
      .kv_f32("llama.rope.freq_base", 10000.0f)
      .kv_arr_str("tokenizer.ggml.tokens", {"a", "bc", ""})
      .kv_arr_f32("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f})
      .kv_bool("x.flag", true);
  w.tensor("a.weight", {4, 2});
  w.tensor("b.bias", {3});
  std::vector<uint8_t> q(34, 0x11);  // one Q8_0 block
  w.tensor("c.q8", {32}, 8, std::nullopt, q);
  return w;
}

// ---- valid files ---------------------------------------------------------------

TEST(GgufValid, EmptyFileHeaderOnly) {
  GgufWriter w;
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->version(), 3u);
  EXPECT_TRUE((*r)->tensors().empty());
  EXPECT_TRUE((*r)->metadata().empty());
}

TEST(GgufValid, Version2Parses) {
  GgufWriter w = small_file();
  w.version = 2;
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->version(), 2u);
}

TEST(GgufValid, TensorsPointIntoTheMapping) {
  GgufWriter w = small_file();
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& f = **r;
  ASSERT_EQ(f.tensors().size(), 3u);
  const gguf::TensorInfo* a = f.find_tensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DType::F32);
  EXPECT_EQ(a->n_dims, 2);
  EXPECT_EQ(a->ne[0], 4);
  EXPECT_EQ(a->ne[1], 2);
  EXPECT_EQ(a->n_elements(), 8);
  EXPECT_EQ(a->nbytes, 32u);
  EXPECT_EQ(a->shape_string(), "[4, 2]");
  EXPECT_EQ(a->data, b.data() + w.data_start() + a->offset);
  const float* af = reinterpret_cast<const float*>(a->data);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(af[i], static_cast<float>(i));
  const gguf::TensorInfo* bb = f.find_tensor("b.bias");
  ASSERT_NE(bb, nullptr);
  EXPECT_EQ(bb->offset, 32u);
  EXPECT_EQ(bb->nbytes, 12u);
  EXPECT_EQ(reinterpret_cast<const float*>(bb->data)[2], 2.0f);
  const gguf::TensorInfo* c = f.find_tensor("c.q8");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, DType::Q8_0);
  EXPECT_EQ(c->nbytes, 34u);
  EXPECT_EQ(c->data[0], 0x11);
  EXPECT_EQ(c->data + c->nbytes, b.data() + b.size());
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(GgufValid, CustomAlignment) {
  GgufWriter w;
  w.alignment = 64;
  w.kv_u32("general.alignment", 64);
  w.tensor("t0", {3});
  w.tensor("t1", {5});
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->alignment(), 64u);
  EXPECT_EQ(w.data_start() % 64, 0u);
  EXPECT_EQ((*r)->find_tensor("t1")->offset, 64u);
  EXPECT_EQ(reinterpret_cast<const float*>((*r)->find_tensor("t1")->data)[4], 4.0f);
}

TEST(GgufValid, ZeroSizedTensor) {
  GgufWriter w;
  w.tensor("empty", {0, 7});
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->tensors()[0].nbytes, 0u);
}

TEST(GgufValid, EveryValueTypeRoundTrips) {
  GgufWriter w;
  w.kv_u8("v.u8", 200).kv_i8("v.i8", -100).kv_u16("v.u16", 60000).kv_i16("v.i16", -30000);
  w.kv_u32("v.u32", 4000000000u).kv_i32("v.i32", -2000000000).kv_u64("v.u64", 1ull << 40);
  w.kv_i64("v.i64", -(1ll << 50)).kv_f32("v.f32", 1.5f).kv_f64("v.f64", -2.25);
  w.kv_f32("v.f32big", 1e30f).kv_f64("v.f64nan", std::nan(""));
  w.kv_bool("v.true", true).kv_bool("v.false", false);
  w.kv_str("v.str", "héllo wörld").kv_str("v.empty", "");
  w.kv_arr_i32("v.ints", {1, -2, 3});
  w.kv_arr_f32("v.floats", {0.25f, 1e30f, -4.0f});
  w.kv_arr_str("v.strings", {"x", "", "yz"});
  w.kv_arr_i32("v.empty_arr", {});
  {
    Bytes p;
    p.arr(gt::U8, 3).u8(1).u8(2).u8(255);
    w.kv_raw("v.u8s", gt::ARRAY, p);
  }
  {
    Bytes p;
    p.arr(gt::U64, 2).u64(~0ull).u64(7);
    w.kv_raw("v.u64s", gt::ARRAY, p);
  }
  {
    Bytes p;
    p.arr(gt::F64, 1).f64(3.5);
    w.kv_raw("v.f64s", gt::ARRAY, p);
  }
  {  // [[1, 2], ["s"], [[9.5]]]
    Bytes p;
    p.arr(gt::ARRAY, 3);
    p.arr(gt::I16, 2).i16(1).i16(2);
    p.arr(gt::STRING, 1).str("s");
    p.arr(gt::ARRAY, 1).arr(gt::F32, 1).f32(9.5f);
    w.kv_raw("v.nested", gt::ARRAY, p);
  }
  w.kv_u8("v.after", 42);  // parsing continues correctly after the nested array
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& f = **r;
  EXPECT_EQ(f.metadata().size(), 25u);
  EXPECT_EQ(f.get_int("v.u8").value(), 200);
  EXPECT_EQ(f.get_int("v.i8").value(), -100);
  EXPECT_EQ(f.get_int("v.u16").value(), 60000);
  EXPECT_EQ(f.get_int("v.i16").value(), -30000);
  EXPECT_EQ(f.get_int("v.u32").value(), 4000000000ll);
  EXPECT_EQ(f.get_int("v.i32").value(), -2000000000);
  EXPECT_EQ(f.get_int("v.u64").value(), 1ll << 40);
  EXPECT_EQ(f.find("v.u64")->u, 1ull << 40);
  EXPECT_EQ(f.get_int("v.i64").value(), -(1ll << 50));
  EXPECT_EQ(f.get_float("v.f32").value(), 1.5);
  EXPECT_EQ(f.get_float("v.f64").value(), -2.25);
  EXPECT_EQ(f.get_float("v.f32big").value(), static_cast<double>(1e30f));
  EXPECT_TRUE(std::isnan(f.get_float("v.f64nan").value()));
  EXPECT_EQ(f.get_float("v.i32").value(), -2000000000.0);  // ints widen to float
  EXPECT_EQ(f.get_bool("v.true").value(), true);
  EXPECT_EQ(f.get_bool("v.false").value(), false);
  EXPECT_EQ(f.get_string("v.str").value(), "héllo wörld");
  EXPECT_EQ(f.get_string("v.empty").value(), "");
  EXPECT_EQ(f.find("v.u8")->type, gguf::ValueType::kU8);
  EXPECT_EQ(f.find("v.f64")->type, gguf::ValueType::kF64);

  auto ints = f.get_numeric_array("v.ints");
  ASSERT_TRUE(ints.ok()) << ints.status().to_string();
  ASSERT_EQ((*ints)->count, 3u);
  EXPECT_EQ((*ints)->elem_type, gguf::ValueType::kI32);
  EXPECT_EQ((*ints)->array_i64(1), -2);
  EXPECT_EQ((*ints)->array_f64(2), 3.0);
  auto floats = f.get_numeric_array("v.floats");
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ((*floats)->array_f64(0), 0.25);
  EXPECT_EQ((*floats)->array_i64(1), std::numeric_limits<int64_t>::max());  // saturated, not UB
  EXPECT_EQ((*floats)->array_i64(2), -4);
  auto u8s = f.get_numeric_array("v.u8s");
  ASSERT_TRUE(u8s.ok());
  EXPECT_EQ((*u8s)->array_i64(2), 255);
  auto u64s = f.get_numeric_array("v.u64s");
  ASSERT_TRUE(u64s.ok());
  EXPECT_EQ((*u64s)->array_i64(1), 7);
  EXPECT_EQ(f.get_numeric_array("v.f64s").value()->array_f64(0), 3.5);
  EXPECT_EQ(f.get_numeric_array("v.empty_arr").value()->count, 0u);

  auto strs = f.get_string_array("v.strings");
  ASSERT_TRUE(strs.ok()) << strs.status().to_string();
  ASSERT_EQ((*strs)->size(), 3u);
  EXPECT_EQ((**strs)[0], "x");
  EXPECT_EQ((**strs)[1], "");
  EXPECT_EQ((**strs)[2], "yz");

  const gguf::Value* n = f.find("v.nested");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->elem_type, gguf::ValueType::kArray);
  ASSERT_EQ(n->items.size(), 3u);
  EXPECT_EQ(n->items[0].elem_type, gguf::ValueType::kI16);
  EXPECT_EQ(n->items[0].count, 2u);
  EXPECT_EQ(n->items[0].array_i64(1), 2);
  ASSERT_EQ(n->items[1].strings.size(), 1u);
  EXPECT_EQ(n->items[1].strings[0], "s");
  ASSERT_EQ(n->items[2].items.size(), 1u);
  EXPECT_EQ(n->items[2].items[0].array_f64(0), 9.5);
  EXPECT_EQ(f.get_int("v.after").value(), 42);

  // Getter errors: absent → NotFound, wrong type → Corrupt naming key and types.
  auto missing = f.get_int("v.missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("v.missing"), std::string::npos);
  auto wrong = f.get_int("v.str");
  EXPECT_EQ(wrong.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(wrong.status().message().find("'v.str' has type string"), std::string::npos) << wrong.status().message();
  EXPECT_FALSE(f.get_string("v.u8").ok());
  EXPECT_FALSE(f.get_bool("v.u8").ok());
  EXPECT_FALSE(f.get_float("v.str").ok());
  EXPECT_FALSE(f.get_string_array("v.ints").ok());
  EXPECT_FALSE(f.get_numeric_array("v.strings").ok());
  EXPECT_FALSE(f.get_numeric_array("v.nested").ok());
  EXPECT_FALSE(f.get_numeric_array("v.u8").ok());
}

// ---- truncation ----------------------------------------------------------------

TEST(GgufTruncated, EveryCutPointFailsCleanly) {
  GgufWriter w = small_file();
  const auto full = w.build();
  ASSERT_TRUE(parse(full).ok());
  for (size_t cut = 0; cut < full.size(); ++cut) {
    // An exactly-sized heap copy, so a sanitizer sees any read past the end.
    std::vector<uint8_t> part(full.begin(), full.begin() + static_cast<long>(cut));
    auto r = parse(part, "cut.gguf");
    ASSERT_FALSE(r.ok()) << "a " << cut << "-byte prefix of a " << full.size() << "-byte file parsed";
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
    EXPECT_EQ(r.status().message().rfind("cut.gguf: ", 0), 0u) << r.status().message();
    const std::string& m = r.status().message();
    EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("exceeds") != std::string::npos ||
                m.find("cannot fit") != std::string::npos || m.find("too small") != std::string::npos ||
                m.find("left") != std::string::npos)
        << "cut " << cut << ": " << m;
  }
}

TEST(GgufTruncated, MessagesNameWhatWasBeingRead) {
  GgufWriter w = small_file();
  const auto full = w.build();
  std::vector<uint8_t> part(full.begin(), full.begin() + 6);
  expect_error(parse(part), StatusCode::kCorrupt, {"truncated", "version"});
  part.assign(full.begin(), full.end() - 1);
  expect_error(parse(part), StatusCode::kCorrupt, {"c.q8", "runs past the end"});
}

// ---- header ----------------------------------------------------------------------

TEST(GgufBadHeader, TooSmall) {
  for (size_t n = 0; n < 4; ++n) {
    std::vector<uint8_t> b(n, 'G');
    expect_error(parse(b), StatusCode::kCorrupt, {"too small"});
  }
}

TEST(GgufBadHeader, WrongMagic) {
  GgufWriter w;
  w.magic = 0x46554746;  // "FGUF"
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"not a GGUF file", "0x46554746"});
  std::vector<uint8_t> st = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}'};  // a safetensors file
  expect_error(parse(st), StatusCode::kCorrupt, {"not a GGUF file"});
}

TEST(GgufBadHeader, UnsupportedVersion) {
  for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
    GgufWriter w;
    w.version = v;
    auto b = w.build();
    std::string frag = "version " + std::to_string(v);
    expect_error(parse(b), StatusCode::kUnsupported, {frag.c_str(), "expected 2 or 3"});
  }
}

TEST(GgufBadHeader, CountsLargerThanTheFile) {
  {
    GgufWriter w;
    w.n_kv_override = 1ull << 40;
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"metadata count", "1099511627776"});
  }
  {
    GgufWriter w;
    w.n_tensors_override = ~0ull;
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor count"});
  }
  {  // claims 2 tensors, has 1
    GgufWriter w;
    w.kv_u32("k", 1);
    w.tensor("only", {8});
    w.n_tensors_override = 2;
    auto b = w.build();
    EXPECT_FALSE(parse(b).ok());
  }
}

// ---- tensors ---------------------------------------------------------------------

TEST(GgufBadTensor, DataPastTheEnd) {
  {  // offset beyond the file
    GgufWriter w;
    w.tensor("a", {4});
    w.tensor("far", {4}, 0, 1ull << 20, std::vector<uint8_t>{});
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'far'", "runs past the end", "1048576"});
  }
  {  // data cut short
    GgufWriter w;
    w.tensor("short", {16});
    auto b = w.build();
    b.resize(b.size() - 4);
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'short'", "F32 [16]", "64 bytes"});
  }
  {  // offset near 2^64 (offset + nbytes would wrap)
    GgufWriter w;
    w.tensor("wrap", {4}, 0, ~0ull - 31, std::vector<uint8_t>{});
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'wrap'", "runs past the end"});
  }
  {  // header ends where the data section would start: no room for padding
    GgufWriter w;
    w.tensor("t", {1}, 0, 0, std::vector<uint8_t>{});
    auto b = w.build();
    while (!b.empty() && b.back() == 0 && b.size() % 32 != 1) b.pop_back();
    EXPECT_FALSE(parse(b).ok());
  }
}

TEST(GgufBadTensor, DimensionProductOverflows) {
  {
    GgufWriter w;
    w.tensor("big", {1ull << 32, 1ull << 32}, 0, std::nullopt, std::vector<uint8_t>{});
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'big'", "overflow"});
  }
  {
    GgufWriter w;
    w.tensor("neg", {1ull << 63}, 0, std::nullopt, std::vector<uint8_t>{});
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'neg'", "overflow"});
  }
  {  // elements fit int64, bytes (x4 for F32) do not
    GgufWriter w;
    w.tensor("bytes", {1ull << 31, 1ull << 31}, 0, std::nullopt, std::vector<uint8_t>{});
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'bytes'", "overflows"});
  }
  {  // four dims multiplying to 2^64
    GgufWriter w;
    w.tensor("four", {1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16}, 0, std::nullopt, std::vector<uint8_t>{});
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'four'", "overflow"});
  }
}

TEST(GgufBadTensor, UnknownDtype) {
  for (uint32_t t : {4u, 5u, 16u, 99u, 0xffffffffu}) {
    GgufWriter w;
    w.tensor("odd", {32}, t, std::nullopt, std::vector<uint8_t>(256, 0));
    auto b = w.build();
    std::string frag = "unknown ggml type " + std::to_string(t);
    expect_error(parse(b), StatusCode::kUnsupported, {"tensor 'odd'", frag.c_str()});
  }
}

TEST(GgufBadTensor, NDimsOutOfRange) {
  for (uint32_t nd : {0u, 5u, 1000u}) {
    Bytes tail;  // hand-written tensor info: name, n_dims, (dims), type, offset
    tail.str("dims").u32(nd);
    for (uint32_t d = 0; d < std::min(nd, 5u); ++d) tail.u64(1);
    tail.u32(0).u64(0);
    GgufWriter w;
    w.alignment = 1;  // no padding: the hand-written info follows the header
    w.n_tensors_override = 1;
    auto b = w.build();
    b.insert(b.end(), tail.b.begin(), tail.b.end());
    b.resize(b.size() + 64, 0);
    std::string frag = "n_dims = " + std::to_string(nd);
    expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'dims'", frag.c_str(), "expected 1..4"});
  }
}

TEST(GgufBadTensor, RowNotMultipleOfBlock) {
  GgufWriter w;
  w.tensor("q", {33}, 2, std::nullopt, std::vector<uint8_t>(64, 0));  // Q4_0
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'q'", "33", "Q4_0", "block size 32"});
}

TEST(GgufBadTensor, UnalignedOffset) {
  GgufWriter w;
  w.tensor("a", {2});
  w.tensor("b", {2}, 0, 8);  // alignment 32
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"tensor 'b'", "offset 8", "alignment 32"});
}

TEST(GgufBadTensor, DuplicateName) {
  GgufWriter w;
  w.tensor("same", {2});
  w.tensor("same", {2});
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"duplicate tensor name 'same'"});
}

TEST(GgufBadTensor, NameLengthPastTheEnd) {
  GgufWriter w;
  w.alignment = 1;
  w.n_tensors_override = 1;
  auto b = w.build();
  Bytes t;
  t.u64(1ull << 50);
  b.insert(b.end(), t.b.begin(), t.b.end());
  b.resize(b.size() + 40, 'x');
  expect_error(parse(b), StatusCode::kCorrupt, {"tensor name", "string length 1125899906842624"});
}

// ---- metadata --------------------------------------------------------------------

TEST(GgufBadMetadata, HugeArrayFailsFastWithoutAllocating) {
  for (uint32_t et : {gt::U8, gt::F32, gt::STRING, gt::ARRAY, gt::U64}) {
    GgufWriter w;
    Bytes p;
    p.arr(et, 1000000000000ull);
    p.u64(0).u64(0);
    w.kv_raw("big.array", gt::ARRAY, p);
    auto b = w.build();
    auto t0 = std::chrono::steady_clock::now();
    auto r = parse(b);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    expect_error(r, StatusCode::kCorrupt, {"key 'big.array'", "1000000000000 elements"});
    EXPECT_LT(secs, 0.5);
  }
}

TEST(GgufBadMetadata, ArrayElementsTruncated) {
  GgufWriter w;
  w.alignment = 1;  // no zero padding that would read as an empty third string
  Bytes p;
  p.arr(gt::STRING, 3).str("one").str("two");  // third string missing
  w.kv_raw("toks", gt::ARRAY, p);
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"toks"});
}

Bytes nested(int levels) {  // `levels` arrays, the innermost holding one i32
  Bytes p;
  for (int i = 1; i < levels; ++i) p.arr(gt::ARRAY, 1);
  p.arr(gt::I32, 1).i32(5);
  return p;
}

TEST(GgufBadMetadata, NestedArraysParseUpToTheDepthLimit) {
  GgufWriter w;
  w.kv_raw("deep", gt::ARRAY, nested(8));
  auto b = w.build();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const gguf::Value* v = (*r)->find("deep");
  for (int i = 1; i < 8; ++i) {
    ASSERT_EQ(v->items.size(), 1u);
    v = &v->items[0];
  }
  EXPECT_EQ(v->array_i64(0), 5);
}

TEST(GgufBadMetadata, DepthBombRejected) {
  for (int levels : {9, 100, 100000}) {
    GgufWriter w;
    w.kv_raw("bomb", gt::ARRAY, nested(levels));
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"key 'bomb'", "nested deeper than 8"});
  }
}

TEST(GgufBadMetadata, DuplicateKey) {
  GgufWriter w;
  w.kv_u32("dup.key", 1).kv_str("other", "x").kv_u32("dup.key", 2);
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"duplicate metadata key 'dup.key'"});
}

TEST(GgufBadMetadata, UnknownValueType) {
  {
    GgufWriter w;
    w.kv_raw("weird", 13, Bytes().u32(0));
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"key 'weird'", "unknown value type 13"});
  }
  {
    GgufWriter w;
    w.kv_raw("weird.arr", gt::ARRAY, Bytes().arr(77, 1).u32(0));
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"key 'weird.arr'", "unknown array element type 77"});
  }
}

TEST(GgufBadMetadata, BoolOtherThanZeroOrOne) {
  GgufWriter w;
  w.kv_raw("b", gt::BOOL, Bytes().u8(2));
  auto b = w.build();
  expect_error(parse(b), StatusCode::kCorrupt, {"key 'b'", "bool value 2"});
}

TEST(GgufBadMetadata, StringLengthPastTheEnd) {
  {
    GgufWriter w;
    w.kv_raw("s", gt::STRING, Bytes().u64(1000).u32(0));
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"s: string length 1000 exceeds"});
  }
  {  // the key itself
    GgufWriter w;
    w.alignment = 1;
    w.n_kv_override = 1;
    auto b = w.build();
    Bytes k;
    k.u64(~0ull).u32(0).u32(0);
    b.insert(b.end(), k.b.begin(), k.b.end());
    expect_error(parse(b), StatusCode::kCorrupt, {"metadata key", "string length"});
  }
}

TEST(GgufBadMetadata, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 21}) {
    GgufWriter w;
    w.kv_u32("general.alignment", a);
    w.tensor("t", {1});
    auto b = w.build();
    std::string frag = "general.alignment = " + std::to_string(a);
    expect_error(parse(b), StatusCode::kCorrupt, {frag.c_str(), "power of two"});
  }
  {
    GgufWriter w;
    w.kv_str("general.alignment", "32");
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"general.alignment has type string"});
  }
  {
    GgufWriter w;
    w.kv_i32("general.alignment", -32);
    auto b = w.build();
    expect_error(parse(b), StatusCode::kCorrupt, {"general.alignment"});
  }
  {  // alignment 1 is a legal power of two: any offset is aligned
    GgufWriter w;
    w.alignment = 1;
    w.kv_u32("general.alignment", 1);
    w.tensor("t", {1}, 0, 0);
    w.tensor("u", {1}, 0, 4);
    auto b = w.build();
    auto r = parse(b);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ((*r)->alignment(), 1u);
  }
}

TEST(GgufBadMetadata, FileNameInEveryError) {
  GgufWriter w;
  w.kv_raw("x", gt::BOOL, Bytes().u8(7));
  auto b = w.build();
  auto r = parse(b, "/models/my-model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("/models/my-model.gguf: ", 0), 0u) << r.status().message();
}

// ---- real files ------------------------------------------------------------------

TEST(GgufFixtures, RefModelFilesParseAndMatchTypesJson) {
  LAYA_REQUIRE_FIXTURES(dir);
  namespace fs = std::filesystem;
  fs::path models = fs::path(dir) / "ref-models";
  if (!fs::is_directory(models)) GTEST_SKIP() << models << " not found";
  int n_files = 0, n_checked = 0;
  for (const auto& m : fs::directory_iterator(models)) {
    fs::path gdir = m.path() / "gguf";
    if (!fs::is_directory(gdir)) continue;
    for (const auto& g : fs::directory_iterator(gdir)) {
      if (g.path().extension() != ".gguf") continue;
      ++n_files;
      auto r = gguf::File::open(g.path().string());
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const auto& f = **r;
      EXPECT_FALSE(f.tensors().empty()) << g.path();
      EXPECT_TRUE(f.get_string("general.architecture").ok()) << g.path();
      const uint8_t* lo = f.mapping().data();
      const uint8_t* hi = lo + f.mapping().size();
      for (const auto& t : f.tensors()) {
        EXPECT_GE(t.data, lo);
        EXPECT_LE(t.data + t.nbytes, hi) << t.name;
        EXPECT_EQ(t.nbytes, row_bytes(t.type, t.ne[0]) * static_cast<size_t>(t.ne[1] * t.ne[2] * t.ne[3])) << t.name;
      }
    }
    // dequant/<type>/types.json describes gguf/<file>.
    fs::path ddir = m.path() / "dequant";
    if (!fs::is_directory(ddir)) continue;
    for (const auto& d : fs::directory_iterator(ddir)) {
      fs::path tj = d.path() / "types.json";
      if (!fs::exists(tj)) continue;
      auto j = nlohmann::json::parse(test::read_text_file(tj.string()), nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << tj;
      fs::path gpath = gdir / j.at("file").get<std::string>();
      auto r = gguf::File::open(gpath.string());
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const auto& f = **r;
      EXPECT_EQ(f.mapping().size(), j.at("size").get<size_t>()) << gpath;
      const auto& tensors = j.at("tensors");
      EXPECT_EQ(f.tensors().size(), tensors.size()) << gpath;
      std::map<std::string, int> counts;
      for (const auto& t : f.tensors()) counts[dtype_name(t.type)]++;
      for (auto it = j.at("type_counts").begin(); it != j.at("type_counts").end(); ++it) {
        EXPECT_EQ(counts[it.key()], it.value().get<int>()) << gpath << " type " << it.key();
      }
      for (auto it = tensors.begin(); it != tensors.end(); ++it) {
        const gguf::TensorInfo* t = f.find_tensor(it.key());
        ASSERT_NE(t, nullptr) << gpath << ": tensor " << it.key() << " missing";
        EXPECT_EQ(dtype_name(t->type), it.value().at("type").get<std::string>()) << it.key();
        auto ne = it.value().at("ne").get<std::vector<int64_t>>();
        ASSERT_EQ(static_cast<size_t>(t->n_dims), ne.size()) << it.key();
        for (size_t k = 0; k < ne.size(); ++k) EXPECT_EQ(t->ne[k], ne[k]) << it.key() << " dim " << k;
      }
      ++n_checked;
    }
  }
  EXPECT_GT(n_files, 0) << "no .gguf files under " << models;
  RecordProperty("gguf_files", n_files);
  RecordProperty("types_json_checked", n_checked);
}

TEST(GgufFixtures, DemoModelParses) {
  LAYA_REQUIRE_FIXTURES(dir);
  namespace fs = std::filesystem;
  fs::path demo = fs::path(dir) / "demo-model";
  if (!fs::is_directory(demo)) GTEST_SKIP() << demo << " not found";
  for (const auto& g : fs::directory_iterator(demo)) {
    if (g.path().extension() != ".gguf") continue;
    auto r = gguf::File::open(g.path().string());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_FALSE((*r)->tensors().empty());
  }
}

TEST(GgufFixtures, MissingFileIsNotFound) {
  auto r = gguf::File::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace laya
