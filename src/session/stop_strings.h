// Stop strings over streamed text: the one flusher that /infill, the OpenAI
// routes and chat use.
//
// Text arrives in pieces (whole UTF-8 characters). A tail that could still
// become a stop string is held back (the longest stop string less one byte),
// so a client never sees text that a stop string later takes back; the text
// ends before the first stop string, or (llama.cpp's n_indent) before the
// first line after the first that is indented less than n_indent.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace laya {

// Cuts `text` before the first stop string or the first under-indented line
// (see above); true when it cut.
bool apply_stops(std::string* text, const std::vector<std::string>& stop, int64_t n_indent);

// A long suggestion that starts repeating itself (seen with llama.vim's 128
// tokens: the same line a dozen times) ends before the first whole line —
// one after a newline, ended by a newline — that equals, spaces at either end
// aside and not empty, an earlier whole line of it or `line_above` (the line
// above the cursor's); the newline before it goes too. True when it cut.
bool cut_repeated_line(std::string* text, std::string_view line_above);

class StopStream {
 public:
  // Receives text as it becomes final; false: the reader went away (stop).
  struct Sink {
    bool (*fn)(void* ctx, std::string_view text) = nullptr;
    void* ctx = nullptr;
    bool operator()(std::string_view t) const { return !fn || fn(ctx, t); }
    // A sink calling `f` (which must outlive it; empty: accepts everything).
    static Sink of(const std::function<bool(std::string_view)>& f) {
      return {[](void* p, std::string_view t) {
                const auto& g = *static_cast<const std::function<bool(std::string_view)>*>(p);
                return !g || g(t);
              },
              const_cast<std::function<bool(std::string_view)>*>(&f)};
    }
  };

  // Starts a new text (the stop strings are referenced, not copied).
  void reset(const std::vector<std::string>* stop, int64_t n_indent, Sink sink);
  // After reset: the text also ends before a repeated line (cut_repeated_line;
  // `line_above` is copied). Text is then passed on a whole line at a time.
  void stop_repeated_lines(std::string_view line_above);
  // Adds a piece; false when the text has ended (a stop string or the indent
  // rule cut it: stopped() is true; or the sink went away).
  bool push(std::string_view piece);
  // The text so far is complete: what was held back is passed on. Nothing
  // when a stop already ended it.
  void finish();
  // Replaces the text by `final_text` (a longer or equal version of what was
  // pushed, e.g. a suggestion's text once made), applies the stops to it and
  // passes on what was not yet.
  void finish_with(std::string_view final_text);

  const std::string& text() const { return acc_; }
  bool stopped() const { return stopped_; }

 private:
  bool flush_to(size_t end);

  const std::vector<std::string>* stop_ = nullptr;
  int64_t n_indent_ = 0;
  bool repeats_ = false;
  std::string line_above_;
  Sink sink_;
  size_t hold_ = 0;
  std::string acc_, cut_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace laya
