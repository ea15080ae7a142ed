// Internal building blocks of the tokenizer: UTF-8 helpers, GPT-2's
// byte↔unicode alphabet, normalizers, regex pre-tokenizers (PCRE2 with UCP)
// and the BPE merge engine. Not a public API.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace laya::gguf {
class File;
}

namespace laya::tok {

struct GgufKeys;

// Builds a Tokenizer from a file's description (load_gguf.cpp, load_hf.cpp);
// the one friend of Tokenizer, so that loading stays out of its public API.
struct TokenizerBuilder {
  static Result<std::unique_ptr<Tokenizer>> gguf(const gguf::File& f);
  // `cfg_name` names tokenizer_config.json in messages.
  static Result<std::unique_ptr<Tokenizer>> hf(std::string_view tj, std::string_view cfg, const std::string& name,
                                               const std::string& cfg_name);

 private:
  // GGUF steps.
  static Status gguf_tokens(const GgufKeys& k, Tokenizer* t);
  static Status gguf_spm(const GgufKeys& k, Tokenizer* t);
  static Status gguf_bpe(const GgufKeys& k, Tokenizer* t);
  static Status gguf_special_ids(const GgufKeys& k, Tokenizer* t);
  static void gguf_added_tokens(const GgufKeys& k, Tokenizer* t);
  // tokenizer.json steps.
  // `owner` of each id: -2 none, -1 model.vocab, else the index in added_tokens.
  static Status hf_vocab(const nlohmann::json& model, const std::string& name, size_t n, Tokenizer* t,
                         std::vector<int32_t>* owner);
  static Status hf_merges(const nlohmann::json& model, const std::string& name, Tokenizer* t);
  static Status hf_added_tokens(const nlohmann::json& added, const std::string& name, Tokenizer* t,
                                std::vector<int32_t>* owner);
  static Status hf_post_processor(const nlohmann::json& tj, const nlohmann::json& cfg, const std::string& name,
                                  const std::string& cfg_name, Tokenizer* t);
  // The checks every vocabulary passes, whatever its file (validate.cpp):
  // special ids and post-processor ids inside the vocabulary, added tokens
  // with text. (Dense ids: a GGUF's are by construction; tokenizer.json's are
  // checked while its ids are counted, before anything is allocated.)
  static Status check_vocabulary(const Tokenizer& t, const std::string& name);
};

// ---- control tokens (special_tokens.cpp) ---------------------------------------------
// Fill-in-the-middle roles, as bits of mark_control_tokens' fim_roles_given:
// prefix, suffix, middle, pad, repo, file separator.
constexpr unsigned kFimRoles = 6;
// llama.cpp's load-time fix-ups of token kinds: end-of-generation and
// fill-in-the-middle texts become control tokens whatever the file says (a
// FIM role only when the file does not name its token by id), gpt-oss's
// message markers user-defined, and the o200k / gemma 4 exceptions.
void mark_control_tokens(const std::vector<std::string>& text, unsigned fim_roles_given,
                         std::vector<TokenKind>* kind);
// Whether convert_hf_to_gguf.py makes a non-special added token CONTROL
// ("<|...|>", "<｜...｜>", "<pad>", "<mask>", "<unused...>", ...).
bool hf_added_token_looks_special(std::string_view text);
// Whether llama.cpp counts a (control) token with this text as end of generation.
bool eog_token_text(std::string_view text);

// ---- UTF-8 ---------------------------------------------------------------------
// Length of the UTF-8 sequence starting at s[i] (1 for an invalid byte).
size_t utf8_len_at(std::string_view s, size_t i);
// Code point at s[i] (or the byte value | 0x80000000 for invalid input); advances *len.
uint32_t utf8_decode(std::string_view s, size_t i, size_t* len);
void utf8_append(uint32_t cp, std::string* out);
bool utf8_valid(std::string_view s);
// Byte offset of code point `cp` (clamped to s.size()).
size_t utf8_offset_of_cp(std::string_view s, size_t cp);
// Bytes of the incomplete UTF-8 sequence at the end of s (0 if it ends complete).
size_t utf8_incomplete_tail(std::string_view s);

// Canonical combining class != 0, or a Hangul medial/final jamo (composes backwards).
bool is_nonstarter(uint32_t cp);

// GPT-2 byte-level alphabet.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the mapped char
// Maps a byte-level string back to bytes; false if some char is not in the alphabet.
bool byte_level_decode(std::string_view s, std::string* out);

// ---- normalizer -------------------------------------------------------------------
class Normalizer {
 public:
  enum class Op { kNFC, kNFKC, kNFD, kNFKD, kPrepend, kReplace, kLowercase, kPrependIfFirst };
  struct Step {
    Op op;
    std::string a, b;  // Prepend: a; Replace: a → b
  };
  std::vector<Step> steps;
  bool empty() const { return steps.empty(); }
  // Whether the steps can change text other than by a fixed prefix / replacement.
  bool has_unicode_normalization() const;
  std::string apply(std::string_view s, bool first) const;
};

// ---- pre-tokenizer -----------------------------------------------------------------
class Regex {
 public:
  ~Regex();
  static Result<std::unique_ptr<Regex>> compile(const std::string& pattern, bool literal);
  // Next match in subject at or after `start`; false if none. Empty matches are skipped.
  bool find(std::string_view subject, size_t start, size_t* mb, size_t* me) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  struct Step {
    std::unique_ptr<Regex> re;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  std::vector<Step> steps;
  // Pieces of `s` after step 0 only (level-1), or all steps.
  void split_level1(std::string_view s, std::vector<Span>* out) const;
  void split_rest(std::string_view s, Span piece, std::vector<Span>* out) const;

  static void apply_step(const Step& st, std::string_view s, Span piece, std::vector<Span>* out);
};

// Regexes of llama.cpp's pre-tokenizer types (as in llama-vocab.cpp).
Status pre_tokenizer_for_gguf(const std::string& pre, PreTokenizer* out);
extern const char* const kGpt2Regex;

// ---- BPE ---------------------------------------------------------------------------
struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};
struct StrEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
};

class BpeModel {
 public:
  MergeMode mode = MergeMode::kRank;
  bool byte_level = true;     // symbols start as single bytes (else UTF-8 chars)
  bool byte_fallback = false; // unknown chars → <0xNN>
  bool fuse_unk = false;
  bool ignore_merges = false; // a piece that is a whole token is emitted as it is
  int32_t unk_id = -1;
  int32_t byte_ids[256];
  std::unordered_map<std::string, int32_t, StrHash, StrEq> vocab;  // piece → id (merge alphabet)
  std::vector<float> scores;                                        // kScore
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  std::unordered_map<uint64_t, Merge> merges;  // (left id << 32 | right id) → merge

  BpeModel();
  uint64_t uid;
  // Non-byte-level models: adjacent code-point pairs that occur inside some
  // vocabulary token. A boundary between two characters that form no such pair
  // can never be crossed by a merge, so text can be cut there exactly.
  void build_inner_pairs();
  bool pair_inside_token(uint32_t a, uint32_t b) const;
  // Encode a long piece by cutting it at uncrossable boundaries first.
  void encode_chunked(std::string_view piece, std::vector<int32_t>* out) const;
  bool has_inner_pairs = false;
  std::vector<uint64_t> small_pairs;  // bitmap over 129×129 (ASCII + U+2581)
  std::unordered_set<uint64_t> big_pairs;  // identifies this model in the per-thread piece cache
  int32_t find(std::string_view s) const {
    auto it = vocab.find(s);
    return it == vocab.end() ? -1 : it->second;
  }
  void encode(std::string_view piece, std::vector<int32_t>* out) const;  // cached
  void encode_uncached(std::string_view piece, std::vector<int32_t>* out) const;

 private:
  void encode_rank(std::string_view piece, std::vector<int32_t>* out) const;
  void encode_score(std::string_view piece, std::vector<int32_t>* out) const;
  void emit_unknown(std::string_view chr, std::vector<int32_t>* out, bool* last_unk) const;
};

}  // namespace laya::tok
