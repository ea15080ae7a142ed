// Tokenizer: encode / decode on top of the normalizer, pre-tokenizer and BPE
// engine (internal.h). Loaders live in load_gguf.cpp and load_hf.cpp.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "tokenizer/internal.h"

namespace laya::tok {

Tokenizer::Tokenizer()
    : normalizer_(std::make_unique<Normalizer>()), pre_(std::make_unique<PreTokenizer>()),
      bpe_(std::make_unique<BpeModel>()) {}
Tokenizer::~Tokenizer() = default;

int32_t Tokenizer::n_vocab() const { return int32_t(text_.size()); }

bool Tokenizer::has_normalizer() const { return normalizer_->has_unicode_normalization(); }
bool Tokenizer::pieces_independent() const { return type_ == ModelType::kByteBpe || !pre_->steps.empty(); }

bool Tokenizer::supports_incremental() const {
  if (type_ == ModelType::kByteBpe)
    return !pre_->steps.empty() && pre_->steps[0].behavior == SplitBehavior::kIsolated && !pre_->steps[0].invert;
  return spm_local_ && pre_->steps.empty() && bpe_->has_inner_pairs;
}

static inline uint32_t spm_map(uint32_t cp) { return cp == ' ' ? 0x2581u : cp; }

Span Tokenizer::next_level1_piece(std::string_view raw, size_t start) const {
  if (type_ == ModelType::kSpm) {
    size_t n, i = start;
    uint32_t prev = spm_map(utf8_decode(raw, i, &n));
    i += n;
    while (i < raw.size()) {
      uint32_t cp = spm_map(utf8_decode(raw, i, &n));
      if (!bpe_->pair_inside_token(prev, cp)) break;
      prev = cp;
      i += n;
    }
    return {uint32_t(start), uint32_t(i)};
  }
  size_t mb, me;
  if (!pre_->steps[0].re->find(raw, start, &mb, &me)) return {uint32_t(start), uint32_t(raw.size())};
  if (mb > start) return {uint32_t(start), uint32_t(mb)};
  return {uint32_t(mb), uint32_t(me)};
}

void Tokenizer::encode_unit(std::string_view raw, bool fragment_start, std::vector<int32_t>* out) const {
  if (type_ != ModelType::kSpm) {
    encode_piece(raw, out);
    return;
  }
  thread_local std::string norm;
  norm.clear();
  if (fragment_start && spm_prefix_ && !raw.empty()) norm += "\xE2\x96\x81";
  for (char c : raw) {
    if (c == ' ') norm += "\xE2\x96\x81";
    else norm.push_back(c);
  }
  bpe_->encode(norm, out);
}

size_t Tokenizer::added_match_at(std::string_view text, size_t i, bool parse_special) const {
  if (i >= text.size() || !added_first_byte_[uint8_t(text[i])]) return 0;
  for (const auto& a : added_) {
    if (a.special && !parse_special) continue;
    if (a.content[0] != text[i] || a.content.size() > text.size() - i) continue;
    if (text.compare(i, a.content.size(), a.content) == 0) return a.content.size();
  }
  return 0;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || size_t(id) >= bytes_.size()) return kEmpty;
  return bytes_[size_t(id)];
}
const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || size_t(id) >= text_.size()) return kEmpty;
  return text_[size_t(id)];
}
TokenKind Tokenizer::token_kind(int32_t id) const {
  if (id < 0 || size_t(id) >= kind_.size()) return TokenKind::kUnused;
  return kind_[size_t(id)];
}
std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  for (const auto& a : added_)
    if (a.content == text) return a.id;
  int32_t id = bpe_->find(text);
  if (id >= 0) return id;
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == text) return int32_t(i);
  return std::nullopt;
}

bool Tokenizer::is_eog(int32_t id) const {
  if (id < 0) return false;
  if (id == eos_id_ || id == eot_id_ || id == eom_id_) return true;
  return token_kind(id) == TokenKind::kControl && eog_token_text(token_text(id));
}

// Runs on a vocabulary that TokenizerBuilder::check_vocabulary has accepted.
Status Tokenizer::finish_init() {
  // Added tokens, longest first; index by first byte.
  std::stable_sort(added_.begin(), added_.end(),
                   [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });
  for (const auto& a : added_) {
    added_first_byte_[uint8_t(a.content[0])] = true;
    max_added_len_ = std::max(max_added_len_, a.content.size());
  }
  // SentencePiece-style models merge over whole fragments: find where merges can never cross.
  if (!bpe_->byte_level && pre_->steps.empty()) bpe_->build_inner_pairs();
  // Character-local SentencePiece normalization (for incremental edits)?
  if (type_ == ModelType::kSpm) {
    using Op = Normalizer::Op;
    const auto& st = normalizer_->steps;
    const std::string kSp = "\xE2\x96\x81";
    if (spm_escape_) {
      spm_local_ = true;
      spm_prefix_ = add_space_prefix_;
    } else if (st.empty()) {
      spm_local_ = false;  // no space mapping at all: not the SentencePiece layout
    } else {
      bool ok = true, rep = false, pre = false;
      for (const auto& x : st) {
        if (x.op == Op::kReplace && x.a == " " && x.b == kSp) rep = true;
        else if (x.op == Op::kPrepend && x.a == kSp) pre = true;
        else ok = false;
      }
      spm_local_ = ok && rep;
      spm_prefix_ = pre;
    }
  }
  for (int32_t id = 0; id < n_vocab(); ++id) {
    const std::string& t = text_[size_t(id)];
    if (kind_[size_t(id)] != TokenKind::kControl) continue;
    if (eot_id_ < 0 && (t == "<|eot_id|>" || t == "<|im_end|>" || t == "<|end|>" || t == "<end_of_turn>"))
      eot_id_ = id;
    if (eom_id_ < 0 && t == "<|eom_id|>") eom_id_ = id;
  }
  return Status::Ok();
}

// ---- encode ------------------------------------------------------------------------------------
// Which added tokens are cut out of raw text — the rule, as llama.cpp's
// tokenizer_st_partition (llama-vocab.cpp) applies it:
//  - with parse_special, every control, unknown and user-defined token;
//  - without it, user-defined tokens only: text a user typed never becomes a
//    control token ("</s>" in a code sample stays four characters).
// "Control" is the kind after the loaders' fix-ups (mark_control_tokens):
// llama.cpp makes end-of-generation and fill-in-the-middle texts control even
// where a GGUF says user-defined (phi-3's "</s>", qwen2's "<|fim_prefix|>").
// tokenizer.json: an added token is control when it is "special": true or
// convert_hf_to_gguf.py would make it so ("<|...|>", ...); the others are
// user-defined and always matched, as Hugging Face matches every added token.
// Hugging Face's encode() is the parse_special case.
// Where tokens overlap, the leftmost match wins, the longest at one position
// (Hugging Face's rule; llama.cpp takes the longest token over the whole text
// first, which differs only for text like ">>TITLE<<|endoftext|>").
// lstrip / rstrip absorb the whitespace beside a token, as in both references.
void Tokenizer::split_added(std::string_view text, bool parse_special, std::vector<Fragment>* out) const {
  size_t last = 0;
  if (!added_.empty()) {
    for (size_t i = 0; i < text.size();) {
      if (!added_first_byte_[uint8_t(text[i])]) {
        ++i;
        continue;
      }
      const Added* hit = nullptr;
      for (const auto& a : added_) {
        if (a.special && !parse_special) continue;
        if (a.content[0] != text[i] || a.content.size() > text.size() - i) continue;
        if (text.compare(i, a.content.size(), a.content) == 0) {
          hit = &a;
          break;
        }
      }
      if (!hit) {
        ++i;
        continue;
      }
      auto is_ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
      size_t b = i, e = i + hit->content.size();
      if (hit->lstrip)
        while (b > last && is_ws(text[b - 1])) --b;
      if (hit->rstrip)
        while (e < text.size() && is_ws(text[e])) ++e;
      if (b > last) out->push_back({uint32_t(last), uint32_t(b), -1});
      out->push_back({uint32_t(b), uint32_t(e), hit->id});
      i = e;
      last = i;
    }
  }
  if (text.size() > last) out->push_back({uint32_t(last), uint32_t(text.size()), -1});
}

std::string Tokenizer::normalize(std::string_view frag, bool first) const {
  if (type_ == ModelType::kSpm && spm_escape_) {
    // llama.cpp's SentencePiece path: optional leading space, then ' ' → "▁".
    std::string s;
    s.reserve(frag.size() * 3 + 3);
    if (add_space_prefix_ && first && !frag.empty()) s += "\xE2\x96\x81";
    for (char c : frag) {
      if (c == ' ') s += "\xE2\x96\x81";
      else s.push_back(c);
    }
    return s;
  }
  if (normalizer_->empty()) return std::string(frag);
  return normalizer_->apply(frag, first);
}

void Tokenizer::pre_split(std::string_view norm, std::vector<Span>* out) const { pre_->split_level1(norm, out); }

void Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (pre_->steps.empty() && bpe_->has_inner_pairs) {
    bpe_->encode_chunked(piece, out);
    return;
  }
  if (pre_->steps.size() <= 1) {
    bpe_->encode(piece, out);
    return;
  }
  thread_local std::vector<Span> sub;
  sub.clear();
  pre_->split_rest(piece, {0, uint32_t(piece.size())}, &sub);
  for (const Span& s : sub) bpe_->encode(piece.substr(s.begin, s.end - s.begin), out);
}

Status Tokenizer::encode_append(std::string_view text, bool parse_special, std::vector<int32_t>* out) const {
  std::vector<Fragment> frags;
  split_added(text, parse_special, &frags);
  std::vector<Span> spans;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out->push_back(f.token);
      continue;
    }
    std::string norm = normalize(text.substr(f.begin, f.end - f.begin), true);
    spans.clear();
    pre_split(norm, &spans);
    std::string_view nv(norm);
    for (const Span& s : spans) encode_piece(nv.substr(s.begin, s.end - s.begin), out);
  }
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, const EncodeOptions& opt) const {
  if (text.size() > 0xFFFFFFF0u)
    return Status(StatusCode::kInvalidArgument, fmt::format("tokenize: text of {} bytes is too long", text.size()));
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  bool bos = opt.add_bos.value_or(add_bos_);
  bool eos = opt.add_eos.value_or(add_eos_);
  if (bos) {
    if (!prefix_ids_.empty()) out.insert(out.end(), prefix_ids_.begin(), prefix_ids_.end());
    else if (bos_id_ >= 0) out.push_back(bos_id_);
  }
  LAYA_TRY(encode_append(text, opt.parse_special, &out));
  if (eos) {
    if (!suffix_ids_.empty()) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
    else if (eos_id_ >= 0) out.push_back(eos_id_);
  }
  return out;
}

// ---- decode ------------------------------------------------------------------------------------
std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& opt) const {
  std::string out;
  for (int32_t id : ids) {
    if (opt.skip_special && is_control(id)) continue;
    out += token_bytes(id);
  }
  if (spm_decode_strip_ && opt.strip_leading_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

// ---- streaming detokenizer ---------------------------------------------------------------------
StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, DecodeOptions opt) : tok_(tok), opt_(opt) {}

void StreamingDetokenizer::reset() {
  pending_.clear();
  at_start_ = true;
}

std::string StreamingDetokenizer::push(int32_t id) {
  if (opt_.skip_special && tok_.is_control(id)) return {};
  const std::string& bytes = tok_.token_bytes(id);
  if (at_start_ && !bytes.empty()) {
    // The SentencePiece leading-space rule applies to the first byte of the text only.
    at_start_ = false;
    if (opt_.strip_leading_space && tok_.decode_strips_leading_space() && bytes[0] == ' ') {
      pending_.append(bytes, 1, std::string::npos);
    } else {
      pending_ += bytes;
    }
  } else {
    pending_ += bytes;
  }
  size_t tail = utf8_incomplete_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - tail);
  pending_.erase(0, pending_.size() - tail);
  return ready;
}

std::string StreamingDetokenizer::finish() {
  std::string r = std::move(pending_);
  pending_.clear();
  return r;
}

// ---- loading by path -----------------------------------------------------------------------------
Result<std::unique_ptr<Tokenizer>> Tokenizer::from_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return from_hf_json((fs::path(path) / "tokenizer.json").string());
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return from_gguf_path(path);
  return from_hf_json(path);
}

}  // namespace laya::tok
