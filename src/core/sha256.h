// SHA-256 (FIPS 180-4), for checking that a replayed document equals the one
// a trace recorded (its "final_sha256"). None of laya's dependencies provides
// it (xxHash is not a cryptographic hash), and the inputs are small, so a
// compact portable implementation is enough: no speed work.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace laya {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes
};

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace laya
