// SHA-256 against the FIPS 180 test vectors (and a padding edge: 55/56/64 bytes).
#include <gtest/gtest.h>

#include <string>

#include "core/sha256.h"

namespace laya {
namespace {

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  const std::string s(200, 'x');
  const std::string whole = sha256_hex(s);
  for (size_t split : {size_t{0}, size_t{1}, size_t{55}, size_t{56}, size_t{64}, size_t{130}}) {
    Sha256 h;
    h.update(std::string_view(s).substr(0, split));
    h.update(std::string_view(s).substr(split));
    const auto d = h.finish();
    static const char* kHex = "0123456789abcdef";
    std::string hex;
    for (uint8_t b : d) {
      hex.push_back(kHex[b >> 4]);
      hex.push_back(kHex[b & 15]);
    }
    EXPECT_EQ(hex, whole) << "split " << split;
  }
  // 55, 56 and 64 bytes: the padding fits in one block, or needs a second.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

}  // namespace
}  // namespace laya
