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
  if (stop_ || n_indent_ > 0) {
    cut_ = acc_;
    if (apply_stops(&cut_, stop_ ? *stop_ : std::vector<std::string>{}, n_indent_)) {
      stopped_ = true;
      acc_.resize(cut_.size());
      flush_to(acc_.size());
      return false;
    }
  }
  return flush_to(acc_.size() > hold_ ? acc_.size() - hold_ : 0);
}

void StopStream::finish() {
  if (stopped_) return;
  acc_.erase(acc_.size() - std::min(acc_.size(), utf8::incomplete_tail(acc_)));  // erase, not resize: GCC 12 warns falsely (-Wrestrict) on a shrinking resize
  flush_to(acc_.size());
}

void StopStream::finish_with(std::string_view final_text) {
  acc_.assign(final_text);
  if (apply_stops(&acc_, stop_ ? *stop_ : std::vector<std::string>{}, n_indent_)) stopped_ = true;
  if (emitted_ > acc_.size()) emitted_ = acc_.size();
  flush_to(acc_.size());
}

}  // namespace laya
