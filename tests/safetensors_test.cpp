// safetensors reader: valid files give correct data pointers; malformed
// headers give a non-ok Status naming the tensor and the problem; the
// fixture models' model.safetensors parse.
#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unistd.h>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "test_util.h"

namespace laya {
namespace {

// u64 header length + header + data. `hlen` overrides the length field.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data = {},
                               std::optional<uint64_t> hlen = std::nullopt) {
  std::vector<uint8_t> b(8 + header.size() + data.size());
  const uint64_t n = hlen.value_or(header.size());
  std::memcpy(b.data(), &n, 8);
  std::copy(header.begin(), header.end(), b.begin() + 8);
  std::copy(data.begin(), data.end(), b.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
  return b;
}

Result<std::unique_ptr<safetensors::File>> parse(const std::vector<uint8_t>& b,
                                                 const std::string& name = "model.safetensors") {
  return safetensors::File::parse(MappedFile::borrow(b.data(), b.size(), name));
}

void expect_error(const Result<std::unique_ptr<safetensors::File>>& r, StatusCode code,
                  std::initializer_list<const char*> fragments) {
  ASSERT_FALSE(r.ok()) << "expected an error, the file parsed";
  test::expect_status(r.status(), code, fragments);
}

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i);
  return v;
}

TEST(SafetensorsValid, F32F16BF16WithMetadata) {
  const std::string h =
      R"({"__metadata__":{"format":"pt","note":"hi"},)"
      R"("w.f32":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("w.f16":{"dtype":"F16","shape":[4],"data_offsets":[24,32]},)"
      R"("w.bf16":{"dtype":"BF16","shape":[1,2,2],"data_offsets":[32,40]},)"
      R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[40,44]},)"
      R"("empty":{"dtype":"F16","shape":[0,5],"data_offsets":[44,44]}})";
  auto data = iota_bytes(44);
  auto b = make_file(h, data);
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& f = **r;
  EXPECT_EQ(f.tensors().size(), 5u);
  const uint8_t* base = b.data() + 8 + h.size();
  const auto* t = f.find_tensor("w.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::F32);
  EXPECT_EQ(t->dtype_str, "F32");
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->data, base);
  EXPECT_EQ(t->nbytes, 24u);
  t = f.find_tensor("w.f16");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::F16);
  EXPECT_EQ(t->data, base + 24);
  EXPECT_EQ(t->data[0], 24);
  EXPECT_EQ(t->nbytes, 8u);
  t = f.find_tensor("w.bf16");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::BF16);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(t->data, base + 32);
  t = f.find_tensor("scalar");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->shape.empty());
  EXPECT_EQ(t->nbytes, 4u);
  t = f.find_tensor("empty");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->nbytes, 0u);
  EXPECT_EQ(f.find_tensor("__metadata__"), nullptr);
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "hi");
}

TEST(SafetensorsValid, EmptyHeaderObject) {
  auto b = make_file("{}");
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE((*r)->tensors().empty());
}

TEST(SafetensorsValid, HeaderPaddedWithSpaces) {
  // Writers pad the header with spaces to an 8-byte boundary.
  auto b = make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}   )", iota_bytes(4));
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
}

TEST(SafetensorsBadHeader, FileTooSmall) {
  for (size_t n = 0; n < 8; ++n) {
    std::vector<uint8_t> b(n, 0);
    expect_error(parse(b), StatusCode::kCorrupt, {"too small"});
  }
}

TEST(SafetensorsBadHeader, HeaderLengthPastTheEnd) {
  auto b = make_file("{}", {}, 100);
  expect_error(parse(b), StatusCode::kCorrupt, {"header length 100 exceeds the file"});
  auto b2 = make_file("{}", {}, 3);  // one byte past
  expect_error(parse(b2), StatusCode::kCorrupt, {"header length 3"});
}

TEST(SafetensorsBadHeader, HeaderLengthHuge) {
  for (uint64_t h : {1ull << 40, ~0ull, (100ull << 20) + 1}) {
    auto b = make_file("{}", {}, h);
    std::string frag = "header length " + std::to_string(h);
    expect_error(parse(b), StatusCode::kCorrupt, {frag.c_str(), "100 MB"});
  }
}

TEST(SafetensorsBadHeader, MalformedJson) {
  for (const char* h : {"{", "{\"a\":", "not json", "[1,2,3]", "\"str\"", "", "{\"a\":{}}}", "{\"a\" 1}"}) {
    auto b = make_file(h);
    auto r = parse(b);
    ASSERT_FALSE(r.ok()) << "parsed: " << h;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find("model.safetensors"), std::string::npos);
  }
  expect_error(parse(make_file("[1]")), StatusCode::kCorrupt, {"not a valid JSON object"});
}

TEST(SafetensorsBadTensor, EntryNotAnObject) {
  expect_error(parse(make_file(R"({"t":[1,2]})")), StatusCode::kCorrupt, {"tensor 't'", "not an object"});
}

TEST(SafetensorsBadTensor, MissingFields) {
  expect_error(parse(make_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", iota_bytes(4))), StatusCode::kCorrupt,
               {"tensor 't'", "\"dtype\""});
  expect_error(parse(make_file(R"({"t":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", iota_bytes(4))),
               StatusCode::kCorrupt, {"tensor 't'", "\"dtype\""});
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", iota_bytes(4))), StatusCode::kCorrupt,
               {"tensor 't'", "\"shape\""});
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", iota_bytes(4))),
               StatusCode::kCorrupt, {"tensor 't'", "\"shape\""});
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":[1]}})", iota_bytes(4))), StatusCode::kCorrupt,
               {"tensor 't'", "data_offsets"});
  for (const char* off : {"[0]", "[0,4,8]", "[-4,0]", "[0,4.5]", "\"0,4\"", "[0,\"4\"]"}) {
    std::string h = std::string(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":)") + off + "}}";
    expect_error(parse(make_file(h, iota_bytes(8))), StatusCode::kCorrupt, {"tensor 't'", "data_offsets"});
  }
}

TEST(SafetensorsBadTensor, BadShapeEntries) {
  for (const char* sh : {"[-1]", "[1.5]", "[\"2\"]", "[null]", "[[1]]"}) {
    std::string h = std::string(R"({"t":{"dtype":"F32","shape":)") + sh + R"(,"data_offsets":[0,4]}})";
    expect_error(parse(make_file(h, iota_bytes(4))), StatusCode::kCorrupt, {"tensor 't'", "shape"});
  }
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})",
                               iota_bytes(4))),
               StatusCode::kCorrupt, {"tensor 't'", "9 dimensions"});
}

TEST(SafetensorsBadTensor, DataOffsetsPastTheEnd) {
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", iota_bytes(12))),
               StatusCode::kCorrupt, {"tensor 't'", "[0, 16]", "past the end", "12 bytes"});
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", iota_bytes(12))),
               StatusCode::kCorrupt, {"tensor 't'", "[8, 4]"});
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})",
                               iota_bytes(12))),
               StatusCode::kCorrupt, {"tensor 't'", "past the end"});
}

TEST(SafetensorsBadTensor, SizeMismatchWithShape) {
  expect_error(parse(make_file(R"({"t":{"dtype":"F16","shape":[2,3],"data_offsets":[0,8]}})", iota_bytes(16))),
               StatusCode::kCorrupt, {"tensor 't'", "span 8 bytes", "F16", "needs 12"});
  expect_error(parse(make_file(R"({"t":{"dtype":"BF16","shape":[0],"data_offsets":[0,2]}})", iota_bytes(16))),
               StatusCode::kCorrupt, {"tensor 't'", "needs 0"});
}

TEST(SafetensorsBadTensor, UnsupportedDtype) {
  for (const char* dt : {"I8", "U8", "I32", "F64", "BOOL", "F8_E4M3", "f32", ""}) {
    std::string h = std::string(R"({"t":{"dtype":")") + dt + R"(","shape":[4],"data_offsets":[0,4]}})";
    std::string frag = std::string("dtype ") + dt + " is not supported";
    expect_error(parse(make_file(h, iota_bytes(4))), StatusCode::kUnsupported, {"tensor 't'", frag.c_str()});
  }
}

TEST(SafetensorsBadTensor, OverflowingShape) {
  for (const char* sh : {"[4294967296,4294967296]", "[18446744073709551615]", "[9223372036854775808]",
                         "[3037000500,3037000500]", "[1,2305843009213693952]", "[65536,65536,65536,65536]"}) {
    std::string h = std::string(R"({"t":{"dtype":"F32","shape":)") + sh + R"(,"data_offsets":[0,4]}})";
    expect_error(parse(make_file(h, iota_bytes(4))), StatusCode::kCorrupt, {"tensor 't'"});
  }
  expect_error(parse(make_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
                               iota_bytes(4))),
               StatusCode::kCorrupt, {"overflows"});
}

TEST(SafetensorsBadTensor, MetadataOfOtherShapesIsIgnored) {
  auto r = parse(make_file(R"({"__metadata__":{"a":"x","n":5,"o":{}},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           iota_bytes(4)));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->metadata().size(), 1u);
  auto r2 = parse(make_file(R"({"__metadata__":[1,2]})"));
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
}

TEST(SafetensorsTruncated, EveryCutPointFailsOrParses) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]}})";
  const auto full = make_file(h, iota_bytes(14));
  ASSERT_TRUE(parse(full).ok());
  for (size_t cut = 0; cut < full.size(); ++cut) {
    std::vector<uint8_t> part(full.begin(), full.begin() + static_cast<long>(cut));
    auto r = parse(part);
    ASSERT_FALSE(r.ok()) << "a " << cut << "-byte prefix parsed";
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  }
}

TEST(SafetensorsIndex, ReadsShardNames) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("laya_st_index_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) {
    FILE* f = std::fopen((dir / name).string().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  write("ok.json", R"({"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors","c":"m-1.safetensors"}})");
  auto r = safetensors::read_index((dir / "ok.json").string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value(), (std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"}));
  write("escape.json", R"({"weight_map":{"a":"../../etc/passwd"}})");
  auto e = safetensors::read_index((dir / "escape.json").string());
  EXPECT_EQ(e.status().code(), StatusCode::kCorrupt);
  write("nomap.json", R"({"metadata":{}})");
  EXPECT_NE(safetensors::read_index((dir / "nomap.json").string()).status().message().find("weight_map"),
            std::string::npos);
  write("bad.json", "{");
  EXPECT_FALSE(safetensors::read_index((dir / "bad.json").string()).ok());
  EXPECT_EQ(safetensors::read_index((dir / "none.json").string()).status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(SafetensorsFixtures, RefModelFilesParse) {
  LAYA_REQUIRE_FIXTURES(dir);
  namespace fs = std::filesystem;
  fs::path models = fs::path(dir) / "ref-models";
  if (!fs::is_directory(models)) GTEST_SKIP() << models << " not found";
  int n = 0;
  for (const auto& m : fs::directory_iterator(models)) {
    fs::path p = m.path() / "hf" / "model.safetensors";
    if (!fs::exists(p)) continue;
    ++n;
    auto r = safetensors::File::open(p.string());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto& f = **r;
    EXPECT_FALSE(f.tensors().empty()) << p;
    for (const auto& t : f.tensors()) {
      size_t n_el = 1;
      for (int64_t d : t.shape) n_el *= static_cast<size_t>(d);
      EXPECT_EQ(t.nbytes, n_el * (t.type == DType::F32 ? 4 : 2)) << p << ": " << t.name;
      ASSERT_NE(t.data, nullptr);
      volatile uint8_t touch = t.nbytes ? t.data[t.nbytes - 1] : 0;  // inside the mapping
      (void)touch;
    }
    // The README: vocab 512, hidden 256; llama-tiny is F32, qwen2/qwen3-tiny BF16.
    const auto* emb = f.find_tensor("model.embed_tokens.weight");
    ASSERT_NE(emb, nullptr) << p;
    EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 256}));
    const std::string model = m.path().filename().string();
    if (model == "llama-tiny") {
      EXPECT_EQ(emb->type, DType::F32);
    }
    if (model == "qwen2-tiny" || model == "qwen3-tiny") {
      EXPECT_EQ(emb->type, DType::BF16);
    }
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace laya
