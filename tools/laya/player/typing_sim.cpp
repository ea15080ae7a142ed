#include "player/typing_sim.h"

#include <chrono>

#include "player/trace.h"
#include "player/typing_accept.h"

namespace laya::player {

Status type_document(Engine& eng, const tok::Tokenizer& tk, const SessionOptions& so, const SuggestOptions& opt,
                     const std::string& doc, LatencyStats* r, const TypingHooks& hooks) {
  using Clock = std::chrono::steady_clock;
  const std::u32string doc32 = utf8_to_u32(doc);
  const std::string_view text(doc);
  Session s(eng, tk, so);
  const int64_t n_chars = static_cast<int64_t>(doc32.size());
  r->chars += n_chars;
  SuggestClock clock;
  Suggestion sug;
  enum class Key { kNone, kType, kTab } key = Key::kNone;
  int64_t pos = 0, tab_len = 0;
  const auto start = Clock::now();
  while (pos < n_chars) {
    if (hooks.before_keystroke) hooks.before_keystroke(pos);
    clock.start();
    if (key == Key::kTab) {
      LAYA_TRY(s.accept(static_cast<size_t>(tab_len)));
    } else if (key == Key::kType) {
      const size_t b = cp_bytes(text, static_cast<size_t>(pos - 1));
      LAYA_TRY(s.edit(s.cursor(), 0, text.substr(b, cp_bytes(text.substr(b), 1))));
    }
    LAYA_TRY(s.suggest_into(opt, &sug, clock.on_piece()));
    clock.stop(sug, r);
    ++r->events;
    ++r->keystrokes;
    if (!sug.text.empty()) ++r->shown;
    const int64_t L = accept_length(utf8_to_u32(sug.text), doc32.data() + pos, n_chars - pos);
    if (L >= 2) {
      ++r->accepted;
      r->accepted_chars += L;
      if (hooks.on_accept) {
        const size_t b = cp_bytes(text, static_cast<size_t>(pos));
        hooks.on_accept(pos, L, text.substr(b, cp_bytes(text.substr(b), static_cast<size_t>(L))));
      }
      key = Key::kTab;
      tab_len = L;
      pos += L;
    } else {
      key = Key::kType;
      pos += 1;
    }
  }
  r->seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

}  // namespace laya::player
