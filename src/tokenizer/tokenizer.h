// Tokenizers identical to the references: byte-level BPE (GPT-2 / Llama 3 /
// Qwen) and SentencePiece-style BPE (Llama 2 / Mistral / Phi-3), loaded from
// GGUF metadata (tokenizer.ggml.*) or a Hugging Face tokenizer.json.
//
// Pipeline of encode():
//   1. split out added / special tokens (control tokens only with parse_special),
//   2. normalize each remaining fragment (NFC/NFKC, Prepend, Replace, SPM space escape),
//   3. pre-tokenize (regex splits, Metaspace, ByteLevel),
//   4. BPE-merge every pre-token (merge ranks, or SentencePiece scores), byte fallback,
//   5. add BOS/EOS per the model's own default unless the caller overrides.
//
// The vocabulary is held as raw bytes: byte-level tokens are mapped back from
// GPT-2's byte↔unicode alphabet at load time, so decode() is a concatenation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace laya::gguf {
class File;
}

namespace laya::tok {

enum class ModelType { kByteBpe, kSpm };

// What merges adjacent symbols: the merge list's rank (tokenizer.json, GGUF
// "gpt2") or the merged token's score (GGUF "llama", as SentencePiece does).
enum class MergeMode { kRank, kScore };

enum class TokenKind : uint8_t { kNormal, kUnknown, kControl, kUserDefined, kUnused, kByte };

struct EncodeOptions {
  bool parse_special = false;       // match control tokens' text like "<|endoftext|>" (see split_added)
  std::optional<bool> add_bos;      // default: the tokenizer's own (GGUF add_bos_token / post-processor)
  std::optional<bool> add_eos;
};

struct DecodeOptions {
  bool skip_special = false;        // drop control tokens (BOS/EOS/...) from the text
  bool strip_leading_space = true;  // SentencePiece: drop the space of the first "▁" (HF Strip decoder)
};

// One piece of the pre-tokenized text, in bytes of the (normalized) fragment.
struct Span {
  uint32_t begin = 0, end = 0;
};

class PreTokenizer;
class Normalizer;
class TokenPrefixIndex;
class BpeModel;

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& file);
  static Result<std::unique_ptr<Tokenizer>> from_gguf_path(const std::string& path);
  // tokenizer.json (+ tokenizer_config.json in the same directory when present).
  static Result<std::unique_ptr<Tokenizer>> from_hf_json(const std::string& path);
  // The same from memory; `name` is used in error messages.
  static Result<std::unique_ptr<Tokenizer>> from_hf_json_text(std::string_view tokenizer_json,
                                                              std::string_view tokenizer_config_json,
                                                              const std::string& name);
  // Either: a .gguf file, a tokenizer.json, or a directory holding tokenizer.json.
  static Result<std::unique_ptr<Tokenizer>> from_path(const std::string& path);

  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& opt = {}) const;
  // Appends to `out` (no BOS/EOS); used by the incremental path.
  Status encode_append(std::string_view text, bool parse_special, std::vector<int32_t>* out) const;

  std::string decode(std::span<const int32_t> ids, const DecodeOptions& opt = {}) const;
  // The bytes of one token as they appear in decoded text (byte-level bytes,
  // "▁" → " ", <0xNN> → the byte, control tokens → their text). Empty for bad ids.
  const std::string& token_bytes(int32_t id) const;
  // The vocabulary string of a token as stored (e.g. "Ġhello", "▁hello").
  const std::string& token_text(int32_t id) const;
  TokenKind token_kind(int32_t id) const;
  bool is_control(int32_t id) const { return token_kind(id) == TokenKind::kControl; }
  std::optional<int32_t> find_token(std::string_view text) const;  // by vocabulary string

  int32_t n_vocab() const;
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos_default() const { return add_bos_; }
  bool add_eos_default() const { return add_eos_; }
  bool is_eog(int32_t id) const;
  ModelType model_type() const { return type_; }
  const std::string& pre_name() const { return pre_name_; }
  // True when normalization can change text (NFC etc.), which the incremental path must respect.
  bool has_normalizer() const;
  // Whether decode() drops the first leading space (SentencePiece decoders).
  bool decode_strips_leading_space() const { return spm_decode_strip_; }
  // Longest special/added token in bytes (0 if none).
  size_t max_added_token_len() const { return max_added_len_; }
  // Fill-in-the-middle markers found by their usual texts ("<|fim_prefix|>",
  // "<fim_prefix>", "<PRE>", ...); -1 where the vocabulary has none.
  struct FimTokens {
    int32_t prefix = -1, suffix = -1, middle = -1;
    bool complete() const { return prefix >= 0 && suffix >= 0 && middle >= 0; }
  };
  FimTokens fim_tokens() const;
  // The vocabulary sorted by bytes (token healing); built on first use, shared
  // by every user of this tokenizer; thread-safe.
  const TokenPrefixIndex& prefix_index() const;

  // ---- building blocks of encode(), public for EditTokenizer ---------------------
  struct Fragment {
    uint32_t begin = 0, end = 0;  // bytes of the input
    int32_t token = -1;           // >= 0: an added/special token
  };
  void split_added(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;
  // Normalize one raw fragment. `first` tells whether it starts the text / follows a special token.
  std::string normalize(std::string_view frag, bool after_special_or_start) const;
  // Level-1 pre-token boundaries of normalized text (pieces that never interact).
  void pre_split(std::string_view norm, std::vector<Span>* out) const;
  // Tokens of one level-1 piece (further sub-splits applied inside).
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;
  // Whether pre-token pieces are independent (false for SPM: one merge over the fragment).
  bool pieces_independent() const;
  // Whether EditTokenizer can re-tokenize locally: byte-level BPE whose first
  // pre-tokenizer step is an isolating regex split, or SentencePiece-style BPE
  // with a character-local normalization (' ' → "▁", "▁" prepended), cut at
  // boundaries that no vocabulary token spans.
  bool supports_incremental() const;
  // The level-1 piece of raw fragment text that starts at `start`
  // (supports_incremental() only; the text is raw, not normalized).
  Span next_level1_piece(std::string_view raw, size_t start) const;
  // Tokens of one level-1 piece of raw text; `fragment_start` tells whether it
  // starts a fragment (SentencePiece prepends "▁" there).
  void encode_unit(std::string_view raw_piece, bool fragment_start, std::vector<int32_t>* out) const;
  bool is_added_first_byte(uint8_t c) const { return added_first_byte_[c]; }
  // Whether an added token (special ones only with parse_special) starts at text[i].
  size_t added_match_at(std::string_view text, size_t i, bool parse_special) const;

 private:
  Tokenizer();
  friend struct TokenizerBuilder;

  // Indexes the added tokens and SentencePiece boundaries of a checked vocabulary.
  Status finish_init();

  ModelType type_ = ModelType::kByteBpe;
  std::string pre_name_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> bpe_;
  std::vector<std::string> text_;   // vocabulary strings as stored
  std::vector<std::string> bytes_;  // decoded bytes
  std::vector<TokenKind> kind_;
  struct Added {
    std::string content;
    int32_t id;
    bool special;  // a control or unknown token: matched only with parse_special
    bool lstrip = false, rstrip = false;  // absorb whitespace on the left / right
  };
  std::vector<Added> added_;  // sorted by length, longest first
  bool added_first_byte_[256] = {};
  size_t max_added_len_ = 0;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor template (HF)
  mutable std::once_flag prefix_index_once_;
  mutable std::unique_ptr<TokenPrefixIndex> prefix_index_;
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, eot_id_ = -1, eom_id_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  bool add_space_prefix_ = false;  // SPM (GGUF): a leading "▁" on every fragment that starts text / follows a special
  bool spm_escape_ = false;        // SPM (GGUF): ' ' → "▁"
  bool spm_decode_strip_ = false;  // decoder strips the first leading space
  bool ignore_merges_ = false;
  bool spm_local_ = false;   // SPM normalization is ' ' → "▁" plus an optional "▁" prefix
  bool spm_prefix_ = false;  // ... with the prefix
};

// Ids in, text out, never half a UTF-8 character: bytes of an incomplete
// character are held until it completes (or flushed as-is by finish()).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, DecodeOptions opt = {});
  // Feed one id; returns the text that became complete (possibly empty).
  std::string push(int32_t id);
  // The held bytes (an incomplete sequence at the end), emitted as they are.
  std::string finish();
  void reset();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tok_;
  DecodeOptions opt_;
  std::string pending_;
  bool at_start_ = true;
};

// The vocabulary sorted by token bytes, for token healing: which tokens start
// with given bytes (one contiguous range of the sorted order, found by binary
// search) and which tokens' bytes are a prefix of given bytes (one lookup per
// prefix length). Control tokens and tokens with no bytes are left out. Built
// once per tokenizer (about 1 ms per 10k tokens); lookups never allocate.
class TokenPrefixIndex {
 public:
  explicit TokenPrefixIndex(const Tokenizer& tok);
  // Ids whose bytes start with `prefix` (all indexed ids for an empty prefix).
  std::span<const int32_t> starting_with(std::string_view prefix) const;
  // Calls fn(id) for every id whose bytes are a non-empty proper-or-equal
  // prefix of `bytes`.
  template <class Fn>
  void for_each_prefix_of(std::string_view bytes, Fn&& fn) const {
    const size_t n = std::min(bytes.size(), max_len_);
    for (size_t len = 1; len <= n; ++len) {
      for (int32_t id : exact(bytes.substr(0, len))) fn(id);
    }
  }

 private:
  std::span<const int32_t> exact(std::string_view bytes) const;
  const Tokenizer& tok_;
  std::vector<int32_t> sorted_;
  size_t max_len_ = 0;
};

// Incremental tokenization for typing. Holds the text and its ids; an edit
// re-tokenizes only from the last stable pre-token boundary before it and stops
// as soon as the new pre-token boundaries line up with the old ones. The ids
// always equal a full encode(text, {parse_special, add_bos=false}).
class EditTokenizer {
 public:
  explicit EditTokenizer(const Tokenizer& tok, bool parse_special = false);
  Status set_text(std::string_view text);
  // Replace `del_bytes` bytes at byte offset `pos` by `insert`.
  Status edit(size_t pos, size_t del_bytes, std::string_view insert);
  // The same in Unicode code points (as editors and the traces count).
  Status edit_codepoints(size_t pos, size_t del_cps, std::string_view insert);

  const std::string& text() const { return text_; }
  const std::vector<int32_t>& ids() const { return ids_; }
  // Index of the first id that changed in the last edit (ids before it are the same).
  size_t first_changed() const { return first_changed_; }
  // How many bytes the last edit re-tokenized (for tests / benchmarks).
  size_t last_retokenized_bytes() const { return last_bytes_; }
  bool last_was_full() const { return last_full_; }
  // How many of the last ids belong to the text's last pre-token piece (the
  // unit token healing takes back): 0 when the text ends with an added token,
  // 1 when the pieces are unknown (no incremental state).
  size_t last_piece_tokens() const;

 private:
  struct Unit {
    uint32_t begin, end;  // bytes of text_
    uint32_t tok_begin;   // index into ids_
    uint32_t n_tok;
    bool added = false;   // an added / special token
  };
  Status full();
  bool incremental_ok() const;
  bool window_normalization_stable(std::string_view text, size_t b, size_t e) const;

  // A pointer, not a reference, so that the object can be assigned: a
  // session rebinds its state to another model's tokenizer (hot model swap).
  const Tokenizer* tok_;
  bool parse_special_;
  std::string text_;
  std::vector<int32_t> ids_;
  std::vector<Unit> units_;
  size_t first_changed_ = 0, last_bytes_ = 0;
  bool last_full_ = true;
  // Scratch of full() and edit(), kept so that their capacity is reused: once
  // warm, an edit allocates nothing.
  std::vector<int32_t> new_ids_;
  std::vector<Unit> new_units_;
  std::vector<Tokenizer::Fragment> frags_;
  std::vector<Span> spans_;
};

// GPT-2's byte-level alphabet: the UTF-8 of the printable character that
// stands for byte `b` in byte-level BPE vocabularies (for writers of such
// vocabularies, e.g. mkmodel's synthetic one).
const std::string& byte_to_unicode(uint8_t b);

}  // namespace laya::tok
