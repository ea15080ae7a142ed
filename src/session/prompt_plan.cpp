#include "session/prompt_plan.h"

#include <algorithm>

#include "core/utf8.h"

namespace laya {

namespace {
// Whole lines of the suffix: at most this many bytes are looked at per token
// of the bound (a line longer than that is cut).
constexpr size_t kSuffixBytesPerToken = 8;
// Token healing takes back the last token of the last pre-token piece: with
// healed tokens allowed only where a token starts with all their bytes, two
// healed tokens often match no token at all (697 of 2,863 positions of the
// public traces showed no suggestion), one always matches (itself).
constexpr size_t kMaxHealTokens = 1;
}  // namespace

PromptTraits PromptTraits::of(const tok::Tokenizer& tok, const SessionOptions& opt) {
  PromptTraits tr;
  if (tok.add_bos_default() && tok.bos_id() >= 0) tr.bos = tok.bos_id();
  if (opt.fim != FimOrder::kOff) {
    const auto f = tok.fim_tokens();
    if (f.complete()) {
      tr.fim_pre = f.prefix;
      tr.fim_suf = f.suffix;
      tr.fim_mid = f.middle;
    }
  }
  return tr;
}

int64_t window_room(const PromptTraits& tr, const SessionOptions& opt, int64_t n_ctx, int max_tokens) {
  int64_t ctx = n_ctx;
  if (opt.context_tokens > 0) ctx = std::min(ctx, opt.context_tokens);
  const int64_t fim = tr.fim() ? 3 + opt.fim_suffix_tokens : 0;
  return ctx - max_tokens - (tr.bos >= 0 ? 1 : 0) - fim;
}

// Half the room, so typing adds room / 2 tokens before the next move.
size_t choose_window_start(const tok::Tokenizer& tok, std::string_view t, size_t c, int64_t room) {
  std::vector<int32_t> ids;
  auto tokens = [&](size_t s) -> int64_t {
    ids.clear();
    (void)tok.encode_append(t.substr(s, c - s), false, &ids);
    return static_cast<int64_t>(ids.size());
  };
  const int64_t target = room / 2;
  // Bytes bound tokens; a long text is not tokenized whole just to find out.
  if (static_cast<int64_t>(c) < room || (c <= static_cast<size_t>(16 * room) && tokens(0) <= room)) return 0;
  // Candidates: line starts within 16 bytes per token of room before the cursor.
  const size_t lo_byte = c > static_cast<size_t>(16 * room) ? c - static_cast<size_t>(16 * room) : 0;
  std::vector<size_t> starts;
  for (size_t b = lo_byte; b < c; ++b)
    if (b == 0 || t[b - 1] == '\n') starts.push_back(b);
  // Smallest index whose text holds <= target tokens (token counts fall as the start moves right).
  auto first_fitting = [&](const std::vector<size_t>& cand) {
    size_t lo = 0, hi = cand.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (tokens(cand[mid]) <= target) hi = mid; else lo = mid + 1;
    }
    return lo;
  };
  size_t k = first_fitting(starts);
  if (k < starts.size() && tokens(starts[k]) >= room / 4) return starts[k];
  // A code point start between the last line start that does not fit and the cursor.
  const size_t from = k == 0 ? lo_byte : starts[k - 1];
  std::vector<size_t> cps;
  for (size_t b = from; b < c; ++b)
    if (!utf8::is_continuation(static_cast<unsigned char>(t[b]))) cps.push_back(b);
  k = first_fitting(cps);
  return k < cps.size() ? cps[k] : c;
}

std::string_view suffix_lines(std::string_view t, size_t cursor_byte, const SessionOptions& opt) {
  const size_t cap = kSuffixBytesPerToken * static_cast<size_t>(std::max(opt.fim_suffix_tokens, 1));
  size_t end = cursor_byte;
  for (int line = 0; line < opt.fim_suffix_lines && end < t.size(); ++line) {
    const size_t nl = t.find('\n', end);
    end = nl == std::string_view::npos ? t.size() : nl + 1;
  }
  if (end - cursor_byte > cap) {
    end = cursor_byte + cap;
    while (end > cursor_byte && utf8::is_continuation(static_cast<unsigned char>(t[end]))) --end;
  }
  return t.substr(cursor_byte, end - cursor_byte);
}

void assemble_prompt(const PromptTraits& tr, const SessionOptions& opt, const tok::Tokenizer& tok,
                     std::span<const int32_t> ids, size_t last_piece_tokens, std::span<const int32_t> suffix_ids,
                     Prompt* out) {
  out->ids.clear();
  const bool bos = tr.bos >= 0;
  const bool fim = tr.fim() && !suffix_ids.empty();
  size_t heal_n = opt.heal ? std::min(last_piece_tokens, kMaxHealTokens) : 0;
  heal_n = std::min(heal_n, ids.size());
  if (!bos && !fim && heal_n == ids.size() && heal_n > 0) --heal_n;  // keep one token to start from
  const size_t keep = ids.size() - heal_n;
  out->heal.clear();
  for (size_t i = keep; i < ids.size(); ++i) out->heal += tok.token_bytes(ids[i]);
  std::vector<int32_t>& p = out->ids;
  if (bos) p.push_back(tr.bos);
  const auto prefix = ids.first(keep);
  if (!fim) {
    p.insert(p.end(), prefix.begin(), prefix.end());
    out->prefix_end = p.size();
  } else if (opt.fim == FimOrder::kSpm) {
    p.push_back(tr.fim_suf);
    p.insert(p.end(), suffix_ids.begin(), suffix_ids.end());
    p.push_back(tr.fim_pre);
    p.insert(p.end(), prefix.begin(), prefix.end());
    out->prefix_end = p.size();
    p.push_back(tr.fim_mid);
  } else {
    p.push_back(tr.fim_pre);
    p.insert(p.end(), prefix.begin(), prefix.end());
    out->prefix_end = p.size();
    p.push_back(tr.fim_suf);
    p.insert(p.end(), suffix_ids.begin(), suffix_ids.end());
    p.push_back(tr.fim_mid);
  }
  out->fim = fim;
}

// ---- PromptBuilder ----------------------------------------------------------------

PromptBuilder::PromptBuilder(const tok::Tokenizer& tok, const SessionOptions& opt)
    : tok_(&tok),
      opt_(opt),
      traits_(PromptTraits::of(tok, opt)),
      window_tok_(tok, /*parse_special=*/false),  // typed "<|endoftext|>" is text, not a control token
      suffix_tok_(tok, /*parse_special=*/false) {}

void PromptBuilder::rebind(const tok::Tokenizer& tok) {
  tok_ = &tok;
  traits_ = PromptTraits::of(tok, opt_);
  window_tok_ = tok::EditTokenizer(tok, /*parse_special=*/false);
  suffix_tok_ = tok::EditTokenizer(tok, /*parse_special=*/false);
  suffix_text_.clear();
  suffix_ids_.clear();
  suffix_valid_ = false;
  dirty_ = true;
}

void PromptBuilder::on_edit(const Document& doc, const Document::Change& c) {
  // An edit that starts before the window (its line start may be gone, and
  // the cursor ends before it) makes the next suggest choose it again.
  if (c.begin < win_byte_) dirty_ = true;
  if (dirty_) return;
  // The window's text changes from min(edit, old cursor) on: the old text's
  // tail there is replaced by the new text up to the new cursor. This covers
  // an edit before, at, across or after the cursor.
  const size_t a = std::min(c.begin, c.old_cursor);
  const std::string_view now = std::string_view(doc.text()).substr(a, doc.cursor_byte() - a);
  if (!window_tok_.edit(a - win_byte_, c.old_cursor - a, now).ok()) dirty_ = true;  // re-tokenized at suggest
}

void PromptBuilder::on_move(const Document& doc, size_t old_cursor) {
  const size_t nb = doc.cursor_byte();
  if (nb < win_byte_) dirty_ = true;
  if (dirty_) return;
  const std::string_view t(doc.text());
  Status st = nb > old_cursor ? window_tok_.edit(old_cursor - win_byte_, 0, t.substr(old_cursor, nb - old_cursor))
                              : window_tok_.edit(nb - win_byte_, old_cursor - nb, {});
  if (!st.ok()) dirty_ = true;
}

Status PromptBuilder::set_window(const Document& doc, size_t start_byte) {
  win_byte_ = start_byte;
  win_cp_ = doc.count_cp(0, start_byte);
  dirty_ = false;
  return window_tok_.set_text(std::string_view(doc.text()).substr(start_byte, doc.cursor_byte() - start_byte));
}

Status PromptBuilder::update_window(const Document& doc, int64_t room, bool* moved) {
  *moved = false;
  const size_t before = win_cp_;
  const bool was_dirty = dirty_;
  if (!dirty_) {
    const auto n = static_cast<int64_t>(window_tok_.ids().size());
    if (n <= room && (win_byte_ == 0 || n >= room / 4)) return Status::Ok();
  }
  LAYA_TRY(set_window(doc, choose_window_start(*tok_, doc.text(), doc.cursor_byte(), room)));
  if (!was_dirty || win_cp_ != before) {
    *moved = true;
    ++moves_;
  }
  return Status::Ok();
}

// The bounded suffix: suffix_lines(), then whole lines dropped from the end
// until its tokens fit; a single line too long is cut to its first tokens.
// Re-tokenized only when that text changed (typing at the cursor leaves it
// as it was), by editing suffix_tok_ from its last text into this one (its
// ids always equal encode_append's): no allocation once warm, little work.
Status PromptBuilder::build_suffix(const Document& doc) {
  std::string_view suffix = suffix_lines(doc.text(), doc.cursor_byte(), opt_);
  if (suffix_valid_ && suffix == suffix_text_) return Status::Ok();
  suffix_text_.assign(suffix);
  suffix_ids_.clear();
  suffix_valid_ = true;
  if (suffix.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::Ok();  // blank: no FIM
  const auto bound = static_cast<size_t>(opt_.fim_suffix_tokens);
  auto tokenize = [&](std::string_view s) {
    const std::string_view old = suffix_tok_.text();
    size_t p = 0, q = 0;
    while (p < old.size() && p < s.size() && old[p] == s[p]) ++p;
    while (p > 0 && p < s.size() && utf8::is_continuation(static_cast<unsigned char>(s[p]))) --p;
    while (q < old.size() - p && q < s.size() - p && old[old.size() - 1 - q] == s[s.size() - 1 - q]) ++q;
    while (q > 0 && utf8::is_continuation(static_cast<unsigned char>(s[s.size() - q]))) --q;
    return suffix_tok_.edit(p, old.size() - p - q, s.substr(p, s.size() - p - q));
  };
  while (true) {
    LAYA_TRY(tokenize(suffix));
    if (suffix_tok_.ids().size() <= bound) break;
    const size_t last_nl = suffix.substr(0, suffix.size() - 1).rfind('\n');
    if (last_nl == std::string_view::npos) break;  // one line too long: cut to its first tokens
    suffix = suffix.substr(0, last_nl + 1);
  }
  const auto& ids = suffix_tok_.ids();
  suffix_ids_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), bound)));
  return Status::Ok();
}

Status PromptBuilder::build(const Document& doc, Prompt* out) {
  if (traits_.fim()) LAYA_TRY(build_suffix(doc));
  assemble_prompt(traits_, opt_, *tok_, window_tok_.ids(), window_tok_.last_piece_tokens(), suffix_ids_, out);
  return Status::Ok();
}

}  // namespace laya
