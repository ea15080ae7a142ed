#include "session/stop_strings.h"

#include <algorithm>

#include "core/utf8.h"

namespace laya {

bool apply_stops(std::string* text, const std::vector<std::string>& stop, int64_t n_indent) {
  size_t cut = std::string::npos;
  for (const std::string& s : stop) {
    if (s.empty()) continue;
    const size_t p = text->find(s);
    if (p < cut) cut = p;
  }
  if (n_indent > 0) {
    // llama.cpp: every line after the first must be indented at least n_indent
    // (spaces or tabs) when anything follows its indentation (an empty line
    // too); the first one that is not ends the suggestion, keeping its new
    // line and indentation.
    for (size_t nl = text->find('\n'); nl != std::string::npos && nl < cut; nl = text->find('\n', nl + 1)) {
      size_t p = nl + 1;
      int64_t ind = 0;
      while (p < text->size() && ((*text)[p] == ' ' || (*text)[p] == '\t')) ++p, ++ind;
      if (p < text->size() && ind < n_indent) {
        cut = std::min(cut, p);
        break;
      }
    }
  }
  if (cut == std::string::npos) return false;
  text->resize(cut);
  return true;
}

namespace {
std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}
}  // namespace

bool cut_repeated_line(std::string* text, std::string_view line_above) {
  const std::string_view t(*text), above = trimmed(line_above);
  std::vector<std::string_view> seen;
  for (size_t nl = t.find('\n'); nl != std::string_view::npos;) {
    const size_t start = nl + 1, end = t.find('\n', start);
    if (end == std::string_view::npos) break;  // the last line is not whole yet
    const std::string_view line = trimmed(t.substr(start, end - start));
    if (!line.empty() && (line == above || std::find(seen.begin(), seen.end(), line) != seen.end())) {
      text->resize(nl);
      return true;
    }
    if (!line.empty()) seen.push_back(line);
    nl = end;
  }
  return false;
}

void StopStream::stop_repeated_lines(std::string_view line_above) {
  repeats_ = true;
  line_above_.assign(line_above);
}

void StopStream::reset(const std::vector<std::string>* stop, int64_t n_indent, Sink sink) {
  stop_ = stop;
  n_indent_ = n_indent;
  sink_ = sink;
  hold_ = 0;
  if (stop_)
    for (const std::string& s : *stop_) hold_ = std::max(hold_, s.empty() ? 0 : s.size() - 1);
  acc_.clear();
  emitted_ = 0;
  stopped_ = false;
  repeats_ = false;
}

// Passes on acc_[emitted_, end), never cutting a character.
bool StopStream::flush_to(size_t end) {
  const size_t tail = utf8::incomplete_tail(std::string_view(acc_).substr(0, end));
  end = end > emitted_ + tail ? end - tail : emitted_;
  if (end <= emitted_) return true;
  const bool ok = sink_(std::string_view(acc_).substr(emitted_, end - emitted_));
  emitted_ = end;
  return ok;
}

bool StopStream::push(std::string_view piece) {
  if (stopped_) return false;
  acc_.append(piece);
  if (stop_ || n_indent_ > 0 || repeats_) {
    cut_ = acc_;
    bool cut = apply_stops(&cut_, stop_ ? *stop_ : std::vector<std::string>{}, n_indent_);
    cut = (repeats_ && cut_repeated_line(&cut_, line_above_)) || cut;
    if (cut) {
      stopped_ = true;
      acc_.resize(cut_.size());
      flush_to(acc_.size());
      return false;
    }
  }
  size_t ready = acc_.size() > hold_ ? acc_.size() - hold_ : 0;
  if (repeats_) ready = std::min(ready, acc_.rfind('\n') == std::string::npos ? 0 : acc_.rfind('\n'));  // whole lines
  return flush_to(ready);
}

void StopStream::finish() {
  if (stopped_) return;
  acc_.erase(acc_.size() - std::min(acc_.size(), utf8::incomplete_tail(acc_)));  // erase, not resize: GCC 12 warns falsely (-Wrestrict) on a shrinking resize
  flush_to(acc_.size());
}

void StopStream::finish_with(std::string_view final_text) {
  acc_.assign(final_text);
  if (apply_stops(&acc_, stop_ ? *stop_ : std::vector<std::string>{}, n_indent_)) stopped_ = true;
  if (repeats_ && cut_repeated_line(&acc_, line_above_)) stopped_ = true;
  if (emitted_ > acc_.size()) emitted_ = acc_.size();
  flush_to(acc_.size());
}

}  // namespace laya
