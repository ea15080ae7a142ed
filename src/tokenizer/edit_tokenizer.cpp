// EditTokenizer: incremental re-tokenization for typing.
//
// The text is held as "units": level-1 pre-token pieces (and added tokens),
// each with its ids. Level-1 pieces are found by a left-to-right regex scan
// whose state is only the cursor (the patterns have no look-behind), and BPE
// never merges across pieces, so after an edit it is enough to
//   1. back up to a unit boundary that the edit cannot have influenced: one unit
//      before the edited one, and further while the unit before ends in
//      whitespace (whitespace runs are where the regexes look ahead: `\s+(?!\S)`,
//      `\s*[\r\n]+`);
//   2. re-scan pieces from there until a new piece starts at the (shifted)
//      start of an old unit past the edit: from there on, everything is equal.
// Cases that cannot be localised (SentencePiece merges over whole fragments, a
// normalizer that changed the text, added tokens near the edit) fall back to a
// full tokenization, so the ids always equal encode(text).
#include <algorithm>

#include <fmt/format.h>

#include "tokenizer/internal.h"
#include "tokenizer/tokenizer.h"

namespace laya::tok {

namespace {
bool is_space_byte_end(std::string_view s, uint32_t end) {
  // Whether the code point that ends at `end` is whitespace (ASCII + common Unicode spaces).
  if (end == 0) return false;
  uint8_t c = uint8_t(s[end - 1]);
  if (c < 0x80) return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  // Non-ASCII: find the lead byte and decode.
  uint32_t b = end - 1;
  while (b > 0 && (uint8_t(s[b]) & 0xC0) == 0x80 && end - b < 4) --b;
  size_t n;
  uint32_t cp = utf8_decode(s, b, &n);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
bool all_ascii(std::string_view s) {
  for (char c : s)
    if (uint8_t(c) >= 0x80) return false;
  return true;
}
}  // namespace

bool EditTokenizer::window_normalization_stable(std::string_view text, size_t b, size_t e) const {
  auto prev_cp = [&](size_t i) {
    size_t j = i - 1;
    while (j > 0 && (uint8_t(text[j]) & 0xC0) == 0x80 && i - j < 4) --j;
    return j;
  };
  size_t lo = b, hi = e;
  // one code point before, then back over combining marks to their starter
  if (lo > 0) lo = prev_cp(lo);
  while (lo > 0) {
    size_t n;
    uint32_t cp = utf8_decode(text, lo, &n);
    if (!is_nonstarter(cp)) break;
    lo = prev_cp(lo);
  }
  // one code point after, then over following combining marks
  if (hi < text.size()) hi += utf8_len_at(text, hi);
  while (hi < text.size()) {
    size_t n;
    uint32_t cp = utf8_decode(text, hi, &n);
    if (!is_nonstarter(cp)) break;
    hi += n;
  }
  std::string_view ext = text.substr(lo, hi - lo);
  if (all_ascii(ext)) return true;
  return tok_->normalize(ext, false) == ext;
}

EditTokenizer::EditTokenizer(const Tokenizer& tok, bool parse_special) : tok_(&tok), parse_special_(parse_special) {}

Status EditTokenizer::set_text(std::string_view text) {
  text_.assign(text);
  return full();
}

bool EditTokenizer::incremental_ok() const { return tok_->supports_incremental() && !units_.empty(); }

Status EditTokenizer::full() {
  last_full_ = true;
  last_bytes_ = text_.size();
  first_changed_ = 0;
  // The ids are made in a member scratch vector, compared with the old ones,
  // then copied: both keep their capacity, so once warm nothing is allocated.
  std::vector<int32_t>& ids = new_ids_;
  ids.clear();
  units_.clear();
  if (!tok_->supports_incremental()) {
    LAYA_TRY(tok_->encode_append(text_, parse_special_, &ids));
  } else if (tok_->model_type() == ModelType::kSpm) {
    // SentencePiece: units are the raw pieces between uncrossable boundaries.
    std::vector<Tokenizer::Fragment>& frags = frags_;
    frags.clear();
    tok_->split_added(text_, parse_special_, &frags);
    for (const auto& f : frags) {
      if (f.token >= 0) {
        units_.push_back({f.begin, f.end, uint32_t(ids.size()), 1, true});
        ids.push_back(f.token);
        continue;
      }
      std::string_view subject = std::string_view(text_).substr(0, f.end);
      for (size_t c = f.begin; c < f.end;) {
        Span p = tok_->next_level1_piece(subject, c);
        uint32_t t0 = uint32_t(ids.size());
        tok_->encode_unit(subject.substr(p.begin, p.end - p.begin), p.begin == f.begin, &ids);
        units_.push_back({p.begin, p.end, t0, uint32_t(ids.size()) - t0, false});
        c = p.end;
      }
    }
  } else {
    std::vector<Tokenizer::Fragment>& frags = frags_;
    frags.clear();
    tok_->split_added(text_, parse_special_, &frags);
    std::vector<Span>& spans = spans_;
    bool norm_changed = false;
    for (const auto& f : frags) {
      if (f.token >= 0) {
        units_.push_back({f.begin, f.end, uint32_t(ids.size()), 1, true});
        ids.push_back(f.token);
        continue;
      }
      std::string_view raw = std::string_view(text_).substr(f.begin, f.end - f.begin);
      std::string norm = tok_->normalize(raw, true);
      if (norm != raw) norm_changed = true;
      spans.clear();
      tok_->pre_split(norm, &spans);
      for (const Span& s : spans) {
        uint32_t t0 = uint32_t(ids.size());
        tok_->encode_piece(std::string_view(norm).substr(s.begin, s.end - s.begin), &ids);
        units_.push_back({f.begin + s.begin, f.begin + s.end, t0, uint32_t(ids.size()) - t0, false});
      }
    }
    if (norm_changed) units_.clear();  // offsets of normalized text ≠ raw: no incremental edits
  }
  size_t i = 0;
  while (i < ids_.size() && i < ids.size() && ids_[i] == ids[i]) ++i;
  first_changed_ = i;
  ids_.assign(ids.begin(), ids.end());
  return Status::Ok();
}

Status EditTokenizer::edit_codepoints(size_t pos, size_t del_cps, std::string_view insert) {
  size_t b = utf8_offset_of_cp(text_, pos);
  size_t e = b;
  for (size_t k = 0; k < del_cps && e < text_.size(); ++k) e += utf8_len_at(text_, e);
  return edit(b, e - b, insert);
}

Status EditTokenizer::edit(size_t pos, size_t del, std::string_view ins) {
  if (pos > text_.size() || del > text_.size() - pos)
    return Status(StatusCode::kOutOfRange, fmt::format("edit: range [{}, {}) is outside the text of {} bytes", pos,
                                                       pos + del, text_.size()));
  if (text_.size() - del + ins.size() > 0xFFFFFFF0u)
    return Status(StatusCode::kInvalidArgument, "edit: text too long");
  text_.replace(pos, del, ins);
  if (!incremental_ok()) return full();
  const int64_t delta = int64_t(ins.size()) - int64_t(del);
  const size_t ins_end = pos + ins.size();  // end of the edit in new coordinates

  // Added tokens: any near the edit in the new text, or an old added-token unit
  // touching the edited range → full re-tokenization.
  const size_t maxlen = tok_->max_added_token_len();
  if (maxlen > 0) {
    size_t from = pos > maxlen ? pos - maxlen : 0;
    size_t to = std::min(text_.size(), ins_end + 1);
    for (size_t i = from; i < to; ++i)
      if (tok_->is_added_first_byte(uint8_t(text_[i])) && tok_->added_match_at(text_, i, parse_special_)) return full();
  }

  // k: the unit containing old byte `pos` (or the last one).
  size_t k;
  {
    auto it = std::upper_bound(units_.begin(), units_.end(), uint32_t(pos),
                               [](uint32_t p, const Unit& u) { return p < u.begin; });
    k = it == units_.begin() ? 0 : size_t(it - units_.begin()) - 1;
  }
  auto is_special = [&](size_t u) { return units_[u].added; };
  // Old units that are added tokens and touch the edit → full.
  for (size_t u = (k > 0 ? k - 1 : 0); u < units_.size() && units_[u].begin <= pos + del + 1; ++u)
    if (maxlen > 0 && is_special(u)) return full();

  size_t k0 = k > 0 ? k - 1 : 0;
  // text_ is already edited; bytes before `pos` are unchanged, so old units before k stay readable.
  while (k0 > 0 && is_space_byte_end(text_, units_[k0 - 1].end) && !is_special(k0 - 1)) --k0;
  if (k0 < units_.size() && is_special(k0)) ++k0;
  if (maxlen > 0) {
    // Stop at a fragment start: do not back up over an added token.
    for (size_t u = k0; u < k; ++u)
      if (is_special(u)) k0 = u + 1;
  }
  const uint32_t S = k0 < units_.size() ? units_[k0].begin : uint32_t(pos);
  const size_t frag_start = k0 == 0 ? 0 : units_[k0 - 1].added ? size_t(units_[k0 - 1].end) : size_t(-1);
  // Fragment end in new coordinates: the next added-token unit after the edit, or the text end.
  size_t frag_end_unit = units_.size();
  if (maxlen > 0)
    for (size_t u = k; u < units_.size(); ++u)
      if (units_[u].begin >= pos + del && is_special(u)) {
        frag_end_unit = u;
        break;
      }
  const size_t F_end = frag_end_unit < units_.size() ? size_t(int64_t(units_[frag_end_unit].begin) + delta)
                                                      : text_.size();
  // The regex scan sees the fragment text; its start is irrelevant (no look-behind),
  // so the subject may begin at S.
  std::string_view subject = std::string_view(text_).substr(0, F_end);
  std::vector<Unit>& new_units = new_units_;  // members: their capacity is kept from edit to edit
  std::vector<int32_t>& new_ids = new_ids_;
  new_units.clear();
  new_ids.clear();
  size_t cursor = S;
  size_t j = k0;  // old unit index scanning for resync
  bool synced = false;
  while (cursor < F_end) {
    if (cursor >= ins_end) {
      // Resync: an old unit starts at cursor - delta (old coordinates)?
      int64_t oldc = int64_t(cursor) - delta;
      while (j < frag_end_unit && int64_t(units_[j].begin) < oldc) ++j;
      // (a unit that started its fragment carries SentencePiece's "▁" prefix:
      // it only matches a piece that starts the fragment now too)
      const bool old_start = j == 0 || units_[j - 1].added;
      if (j < frag_end_unit && int64_t(units_[j].begin) == oldc && old_start == (cursor == frag_start)) {
        synced = true;
        break;
      }
    }
    Span p = tok_->next_level1_piece(subject, cursor);
    if (p.end <= p.begin) break;
    uint32_t t0 = uint32_t(new_ids.size());
    tok_->encode_unit(subject.substr(p.begin, p.end - p.begin), p.begin == frag_start, &new_ids);
    new_units.push_back({p.begin, p.end, t0, uint32_t(new_ids.size()) - t0, false});
    cursor = p.end;
  }
  if (!synced) j = frag_end_unit;
  const size_t resync_new = synced ? cursor : F_end;
  if (tok_->has_normalizer()) {
    // The rest of the text was invariant under the normalizer (full() checks);
    // the edited window must be too, together with its neighbours: one starter
    // before and after it, and any combining marks next to them.
    if (!window_normalization_stable(text_, S, resync_new)) return full();
  }
  // Splice ids and units: old units [k0, j) → new_units.
  const uint32_t tok_from = k0 < units_.size() ? units_[k0].tok_begin : uint32_t(ids_.size());
  const uint32_t tok_to = j < units_.size() ? units_[j].tok_begin : uint32_t(ids_.size());
  // First changed id.
  size_t same = 0;
  while (same < new_ids.size() && tok_from + same < tok_to && ids_[tok_from + same] == new_ids[same]) ++same;
  first_changed_ = tok_from + same;
  const int64_t tok_delta = int64_t(new_ids.size()) - int64_t(tok_to - tok_from);
  ids_.erase(ids_.begin() + tok_from, ids_.begin() + tok_to);
  ids_.insert(ids_.begin() + tok_from, new_ids.begin(), new_ids.end());
  for (auto& u : new_units) u.tok_begin += tok_from;
  for (size_t u = j; u < units_.size(); ++u) {
    units_[u].begin = uint32_t(int64_t(units_[u].begin) + delta);
    units_[u].end = uint32_t(int64_t(units_[u].end) + delta);
    units_[u].tok_begin = uint32_t(int64_t(units_[u].tok_begin) + tok_delta);
  }
  units_.erase(units_.begin() + k0, units_.begin() + j);
  units_.insert(units_.begin() + k0, new_units.begin(), new_units.end());
  last_full_ = false;
  last_bytes_ = resync_new - S;
  if (units_.empty() && !text_.empty()) return full();
  return Status::Ok();
}

}  // namespace laya::tok

namespace laya::tok {

size_t EditTokenizer::last_piece_tokens() const {
  if (ids_.empty()) return 0;
  if (units_.empty()) return 1;
  const Unit& u = units_.back();
  return u.added ? 0 : u.n_tok;
}

}  // namespace laya::tok
