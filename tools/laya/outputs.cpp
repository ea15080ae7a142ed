#include "outputs.h"

#include "report_html.h"

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"

namespace laya::cli {

namespace {

// An output larger than this is not one of ours worth parsing: kept.
constexpr size_t kMaxJudged = size_t{256} << 20;

bool has_keys(const nlohmann::json& j, const std::vector<std::string>& keys) {
  if (!j.is_object()) return false;
  for (const std::string& k : keys)
    if (!j.contains(k)) return false;
  return true;
}

bool is_our_json(const std::string& path, const std::vector<std::string>& keys,
                 const std::vector<std::string>& array_keys) {
  auto text = read_file(path, kMaxJudged);
  if (!text.ok()) return false;
  auto j = parse_json(*text, path);
  if (!j.ok()) return false;
  if (j->is_array() && !array_keys.empty()) {
    for (const auto& e : *j)
      if (!has_keys(e, array_keys)) return false;
    return true;
  }
  return has_keys(*j, keys);
}

bool is_number_lines(const std::string& path) {
  auto text = read_file(path, kMaxJudged);
  if (!text.ok()) return false;
  size_t i = 0;
  while (i < text->size()) {
    size_t j = text->find('\n', i);
    if (j == std::string::npos) j = text->size();
    const std::string line = text->substr(i, j - i);
    char* end = nullptr;
    std::strtod(line.c_str(), &end);
    if (line.empty() || end != line.c_str() + line.size()) return false;
    i = j + 1;
  }
  return true;
}

OutputOptions base(const std::string& option, std::vector<std::string> inputs) {
  OutputOptions o;
  o.option = option;
  o.inputs = std::move(inputs);
  return o;
}

}  // namespace

OutputOptions npy_output(const std::string& option, std::vector<std::string> inputs) {
  OutputOptions o = base(option, std::move(inputs));
  o.kind = "a .npy file";
  o.replaceable = [](const std::string& p) { return file_starts_with(p, "\x93NUMPY"); };
  return o;
}

OutputOptions json_output(const std::string& option, std::vector<std::string> inputs, std::vector<std::string> keys,
                          std::vector<std::string> array_keys) {
  OutputOptions o = base(option, std::move(inputs));
  o.kind = "a JSON result of this command";
  o.replaceable = [keys, array_keys](const std::string& p) { return is_our_json(p, keys, array_keys); };
  return o;
}

OutputOptions html_report_output(const std::string& option, std::vector<std::string> inputs) {
  OutputOptions o = base(option, std::move(inputs));
  o.kind = "an HTML report of laya";
  o.replaceable = [](const std::string& p) { return file_starts_with(p, kReportHtmlHead); };
  return o;
}

OutputOptions lines_output(const std::string& option, std::vector<std::string> inputs) {
  OutputOptions o = base(option, std::move(inputs));
  o.kind = "a file of one number per line";
  o.replaceable = is_number_lines;
  return o;
}

Status write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape,
                 const OutputOptions& opt) {
  std::string dims;
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dims += ",";
    if (i + 1 < shape.size()) dims += " ";
    n *= shape[i];
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t total = 10 + header.size() + 1;  // magic, version, length, header, '\n': a multiple of 64
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const uint16_t hl = static_cast<uint16_t>(header.size());
  std::string head("\x93NUMPY\x01\x00", 8);
  head += static_cast<char>(hl & 0xff);
  head += static_cast<char>(hl >> 8);
  head += header;
  LAYA_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path, opt));
  LAYA_TRY(f.write(head));
  LAYA_TRY(f.write(data, static_cast<size_t>(n) * sizeof(float)));
  return f.commit();
}

}  // namespace laya::cli
