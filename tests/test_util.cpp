#include "test_util.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/io.h"
#include "tokenizer/tokenizer.h"

namespace laya::test {

std::string fixtures_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("LAYA_FIXTURES"); env && *env) {
    return fs::is_directory(env) ? std::string(env) : std::string();
  }
  fs::path p = fs::path(LAYA_SOURCE_DIR) / ".." / "shared" / "fixtures";
  if (fs::is_directory(p)) return fs::weakly_canonical(p).string();
  return {};
}

std::string read_text_file(const std::string& path) {
  Result<std::string> r = read_file(path);
  return r.ok() ? std::move(r).value() : std::string();
}

bool read_npy_f32(const std::string& path, NpyArray* out, std::string* err) {
  std::string buf = read_text_file(path);
  if (buf.size() < 10 || std::memcmp(buf.data(), "\x93NUMPY", 6) != 0) {
    *err = path + ": not a .npy file";
    return false;
  }
  const int major = static_cast<uint8_t>(buf[6]);
  size_t hlen, hoff;
  if (major == 1) {
    hlen = static_cast<uint8_t>(buf[8]) | (static_cast<uint8_t>(buf[9]) << 8);
    hoff = 10;
  } else {
    hlen = static_cast<uint8_t>(buf[8]) | (static_cast<uint8_t>(buf[9]) << 8) |
           (static_cast<uint8_t>(buf[10]) << 16) | (static_cast<size_t>(static_cast<uint8_t>(buf[11])) << 24);
    hoff = 12;
  }
  if (hoff + hlen > buf.size()) { *err = path + ": truncated header"; return false; }
  std::string header = buf.substr(hoff, hlen);
  if (header.find("'<f4'") == std::string::npos) { *err = path + ": dtype is not <f4: " + header; return false; }
  if (header.find("'fortran_order': True") != std::string::npos) { *err = path + ": fortran order"; return false; }
  auto lp = header.find("'shape': (");
  if (lp == std::string::npos) { *err = path + ": no shape"; return false; }
  auto rp = header.find(')', lp);
  std::string dims = header.substr(lp + 10, rp - lp - 10);
  out->shape.clear();
  std::stringstream ds(dims);
  std::string tok;
  int64_t n = 1;
  while (std::getline(ds, tok, ',')) {
    if (tok.find_first_not_of(' ') == std::string::npos) continue;
    out->shape.push_back(std::stoll(tok));
    n *= out->shape.back();
  }
  size_t off = hoff + hlen;
  if (off + static_cast<size_t>(n) * 4 > buf.size()) { *err = path + ": truncated data"; return false; }
  out->data.resize(static_cast<size_t>(n));
  std::memcpy(out->data.data(), buf.data() + off, static_cast<size_t>(n) * 4);
  return true;
}

const tok::Tokenizer* cached_tokenizer(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<tok::Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  auto r = tok::Tokenizer::from_path(path);
  if (!r.ok()) {
    ADD_FAILURE() << "loading " << path << ": " << r.status().to_string();
    return nullptr;
  }
  auto* p = r.value().get();
  cache[path] = std::move(r).value();
  return p;
}

void expect_status(const Status& st, StatusCode code, std::initializer_list<const char*> fragments) {
  EXPECT_EQ(st.code(), code) << st.to_string();
  for (const char* f : fragments) {
    EXPECT_NE(st.message().find(f), std::string::npos) << "message lacks \"" << f << "\": " << st.message();
  }
}

}  // namespace laya::test
