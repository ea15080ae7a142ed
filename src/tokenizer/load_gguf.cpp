// Tokenizer from GGUF metadata (tokenizer.ggml.*), following llama.cpp's
// llama-vocab.cpp: "gpt2" = byte-level BPE by merge rank with the regexes of
// tokenizer.ggml.pre; "llama" = SentencePiece BPE by token score with byte fallback.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "core/shown.h"
#include "format/gguf.h"
#include "tokenizer/internal.h"

namespace laya::tok {

static int parse_byte_token(std::string_view t) {
  // "<0xNN>"
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int a = hex(t[3]), b = hex(t[4]);
  if (a < 0 || b < 0) return -1;
  return a * 16 + b;
}

static std::string spm_piece_bytes(std::string_view t) {
  std::string r;
  r.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
      r.push_back(' ');
      i += 3;
    } else {
      r.push_back(t[i++]);
    }
  }
  return r;
}

// Typed reads of one GGUF file's tokenizer keys; errors name the file and the key.
struct GgufKeys {
  const gguf::File& f;
  std::string name;
  size_t n_tokens = 0;

  std::string ctx(const char* key) const { return name + ": " + key; }
  // A token id, left as it is when the key is absent.
  Status id(const char* key, int32_t* out) const {
    if (!f.find(key)) return Status::Ok();
    auto r = f.get_int(key);
    if (!r.ok()) return r.status().with_context(ctx(key));
    int64_t v = r.value();
    if (v < 0 || v >= int64_t(n_tokens))
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: {} = {} is out of range ({} tokens)", name, key, v, n_tokens));
    *out = int32_t(v);
    return Status::Ok();
  }
  Status flag(const char* key, bool* out) const {
    if (!f.find(key)) return Status::Ok();
    auto r = f.get_bool(key);
    if (!r.ok()) return r.status().with_context(ctx(key));
    *out = r.value();
    return Status::Ok();
  }
  // An optional numeric array with one entry per token (nullptr when absent).
  Result<const gguf::Value*> per_token_array(const char* key) const {
    if (!f.find(key)) return static_cast<const gguf::Value*>(nullptr);
    auto r = f.get_numeric_array(key);
    if (!r.ok()) return r.status().with_context(ctx(key));
    if (r.value()->count != n_tokens)
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: {} has {} entries, tokens has {}", name, key, r.value()->count, n_tokens));
    return r.value();
  }
};

// llama.cpp's llama_token_type: 0 undefined (read as normal, as llama.cpp
// does), 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
static TokenKind kind_of_gguf_type(int64_t type) {
  switch (type) {
    case 2: return TokenKind::kUnknown;
    case 3: return TokenKind::kControl;
    case 4: return TokenKind::kUserDefined;
    case 5: return TokenKind::kUnused;
    case 6: return TokenKind::kByte;
    default: return TokenKind::kNormal;
  }
}

// A type outside 0..6 is not a kind llama.cpp knows: reading it as normal
// would let text become a token the file meant to be special, or the reverse.
static Status check_gguf_token_types(const GgufKeys& k, const gguf::Value* types,
                                     const std::vector<std::string_view>& toks) {
  if (!types) return Status::Ok();
  if (types->elem_type == gguf::ValueType::kF32 || types->elem_type == gguf::ValueType::kF64) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: tokenizer.ggml.token_type is an array of {}, expected integers "
                                                    "(token kinds 0..6)", k.name, gguf::value_type_name(types->elem_type)));
  }
  for (size_t i = 0; i < k.n_tokens; ++i) {
    const int64_t v = types->array_i64(i);
    if (v < 0 || v > 6) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: tokenizer.ggml.token_type[{}] = {} (token {}), expected 0..6 (1 normal, 2 unknown, "
                                "3 control, 4 user-defined, 5 unused, 6 byte): a corrupted or hand-edited vocabulary?",
                                k.name, i, v, shown(toks[i])));
    }
  }
  return Status::Ok();
}

// Vocabulary strings, kinds, decoded bytes and the merge alphabet.
Status TokenizerBuilder::gguf_tokens(const GgufKeys& k, Tokenizer* t) {
  auto toks_r = k.f.get_string_array("tokenizer.ggml.tokens");
  if (!toks_r.ok()) return toks_r.status().with_context(k.ctx("tokenizer.ggml.tokens"));
  const auto& toks = *toks_r.value();
  const size_t n = toks.size();
  LAYA_ASSIGN_OR_RETURN(const gguf::Value* types, k.per_token_array("tokenizer.ggml.token_type"));
  LAYA_TRY(check_gguf_token_types(k, types, toks));
  BpeModel& bpe = *t->bpe_;
  t->text_.resize(n);
  t->bytes_.resize(n);
  t->kind_.resize(n);
  bpe.vocab.reserve(n * 2);
  const bool spm = t->type_ == ModelType::kSpm;
  for (size_t i = 0; i < n; ++i) {
    std::string_view s = toks[i];
    t->text_[i] = std::string(s);
    const TokenKind kind = types ? kind_of_gguf_type(types->array_i64(i)) : TokenKind::kNormal;
    t->kind_[i] = kind;
    std::string& bytes = t->bytes_[i];
    if (spm) {
      if (kind == TokenKind::kByte) {
        int b = parse_byte_token(s);
        if (b < 0)
          return Status(StatusCode::kCorrupt,
                        fmt::format("{}: tokenizer.ggml.tokens[{}] = {} has type BYTE but is not <0xNN>", k.name,
                                    i, shown(s)));
        bytes = std::string(1, char(b));
        if (bpe.byte_ids[b] < 0) bpe.byte_ids[b] = int32_t(i);
      } else if (kind == TokenKind::kNormal || kind == TokenKind::kUserDefined || kind == TokenKind::kUnused) {
        bytes = spm_piece_bytes(s);
      } else {
        bytes = std::string(s);
      }
      bpe.vocab.emplace(std::string(s), int32_t(i));
    } else {
      // Control and user-defined tokens are matched and printed as their text.
      const bool byte_level = kind == TokenKind::kNormal || kind == TokenKind::kUnused || kind == TokenKind::kByte;
      if (!byte_level || !byte_level_decode(s, &bytes)) bytes = std::string(s);
      bpe.vocab.emplace(bytes, int32_t(i));
    }
  }
  return Status::Ok();
}

// SentencePiece ("llama"): merges by score, byte fallback, "▁" for spaces.
Status TokenizerBuilder::gguf_spm(const GgufKeys& k, Tokenizer* t) {
  LAYA_ASSIGN_OR_RETURN(const gguf::Value* scores, k.per_token_array("tokenizer.ggml.scores"));
  BpeModel& bpe = *t->bpe_;
  bpe.mode = MergeMode::kScore;
  bpe.byte_level = false;
  bpe.byte_fallback = true;
  bpe.scores.assign(k.n_tokens, 0.f);
  // Merges go by score: a NaN breaks the ordering the merge queue relies on.
  for (size_t i = 0; scores && i < k.n_tokens; ++i) {
    const double v = scores->array_f64(i);
    if (!std::isfinite(v) || !std::isfinite(float(v)))
      return Status(StatusCode::kCorrupt, fmt::format("{}: tokenizer.ggml.scores[{}] = {}, expected a finite number "
                                                      "(SentencePiece merges by score)", k.name, i, v));
    bpe.scores[i] = float(v);
  }
  t->spm_escape_ = true;
  t->add_space_prefix_ = true;
  LAYA_TRY(k.flag("tokenizer.ggml.add_space_prefix", &t->add_space_prefix_));
  t->spm_decode_strip_ = t->add_space_prefix_;
  t->add_bos_ = true;
  t->bos_id_ = 1;
  t->eos_id_ = 2;
  t->unk_id_ = 0;
  return Status::Ok();
}

// Byte-level BPE ("gpt2"): merges by rank, the regexes of tokenizer.ggml.pre.
Status TokenizerBuilder::gguf_bpe(const GgufKeys& k, Tokenizer* t) {
  BpeModel& bpe = *t->bpe_;
  bpe.mode = MergeMode::kRank;
  bpe.byte_level = true;
  auto merges_r = k.f.get_string_array("tokenizer.ggml.merges");
  if (!merges_r.ok())
    return merges_r.status().with_context(k.name + ": tokenizer.ggml.merges (required for a gpt2 tokenizer)");
  const auto& merges = *merges_r.value();
  bpe.merges.reserve(merges.size() * 2);
  std::string a, b;
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string_view m = merges[r];
    size_t sp = m.find(' ', 1);
    if (sp == std::string_view::npos)
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: tokenizer.ggml.merges[{}] = {} has no space", k.name, r, shown(m)));
    if (!byte_level_decode(m.substr(0, sp), &a)) a = std::string(m.substr(0, sp));
    if (!byte_level_decode(m.substr(sp + 1), &b)) b = std::string(m.substr(sp + 1));
    int32_t la = bpe.find(a), lb = bpe.find(b), lm = bpe.find(a + b);
    if (la < 0 || lb < 0 || lm < 0) continue;  // llama.cpp ignores merges it cannot apply
    bpe.merges.emplace((uint64_t(uint32_t(la)) << 32) | uint32_t(lb), BpeModel::Merge{int32_t(r), lm});
  }
  for (int c = 0; c < 256; ++c) bpe.byte_ids[c] = bpe.find(std::string(1, char(c)));
  LAYA_TRY(pre_tokenizer_for_gguf(t->pre_name_, t->pre_.get()));
  const std::string& p = t->pre_name_;
  const bool llama3 = p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3";
  t->ignore_merges_ = bpe.ignore_merges = llama3;
  t->add_bos_ = llama3;
  t->bos_id_ = 11 < int32_t(k.n_tokens) ? 11 : -1;
  t->eos_id_ = 11 < int32_t(k.n_tokens) ? 11 : -1;
  return Status::Ok();
}

Status TokenizerBuilder::gguf_special_ids(const GgufKeys& k, Tokenizer* t) {
  LAYA_TRY(k.id("tokenizer.ggml.bos_token_id", &t->bos_id_));
  LAYA_TRY(k.id("tokenizer.ggml.eos_token_id", &t->eos_id_));
  LAYA_TRY(k.id("tokenizer.ggml.unknown_token_id", &t->unk_id_));
  LAYA_TRY(k.id("tokenizer.ggml.eot_token_id", &t->eot_id_));
  LAYA_TRY(k.id("tokenizer.ggml.eom_token_id", &t->eom_id_));
  LAYA_TRY(k.flag("tokenizer.ggml.add_bos_token", &t->add_bos_));
  LAYA_TRY(k.flag("tokenizer.ggml.add_eos_token", &t->add_eos_));
  t->bpe_->unk_id = t->type_ == ModelType::kSpm ? t->unk_id_ : -1;
  return Status::Ok();
}

// The tokens cut out of raw text before BPE, after llama.cpp's fix-ups of their
// kinds (see Tokenizer::split_added for which are matched when).
void TokenizerBuilder::gguf_added_tokens(const GgufKeys& k, Tokenizer* t) {
  // A role named by id keeps its token's type (llama.cpp's "deprecated" keys count too).
  static constexpr const char* kFimKeys[kFimRoles][2] = {
      {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
      {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
      {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
      {"tokenizer.ggml.fim_pad_token_id", nullptr},
      {"tokenizer.ggml.fim_rep_token_id", nullptr},
      {"tokenizer.ggml.fim_sep_token_id", nullptr}};
  unsigned fim_given = 0;
  for (unsigned r = 0; r < kFimRoles; ++r)
    if (k.f.find(kFimKeys[r][0]) || (kFimKeys[r][1] && k.f.find(kFimKeys[r][1]))) fim_given |= 1u << r;
  mark_control_tokens(t->text_, fim_given, &t->kind_);
  const bool spm = t->type_ == ModelType::kSpm;
  for (size_t i = 0; i < k.n_tokens; ++i) {
    const TokenKind kind = t->kind_[i];
    if (kind != TokenKind::kControl && kind != TokenKind::kUserDefined && kind != TokenKind::kUnknown) continue;
    // An empty token cannot be cut out of text; llama.cpp keeps it as an id only.
    if ((spm ? t->text_[i] : t->bytes_[i]).empty()) continue;
    t->added_.push_back({spm ? t->text_[i] : t->bytes_[i], int32_t(i), kind != TokenKind::kUserDefined});
  }
  // Token attributes llama.cpp sets by model name: Phi-3's special tokens eat the whitespace after them.
  if (!k.f.find("general.name")) return;
  auto r = k.f.get_string("general.name");
  if (!r.ok()) return;
  std::string nm = r.value();
  for (auto& c : nm) c = char(std::tolower(uint8_t(c)));
  if (nm.find("phi-3") == std::string::npos && nm.find("phi3") == std::string::npos) return;
  for (auto& a : t->added_)
    a.rstrip = !(a.content == "<unk>" || a.content == "<s>" || a.content == "<|endoftext|>");
}

Result<std::unique_ptr<Tokenizer>> TokenizerBuilder::gguf(const gguf::File& f) {
  GgufKeys k{f, f.path()};
  auto model_r = f.get_string("tokenizer.ggml.model");
  if (!model_r.ok()) return model_r.status().with_context(k.ctx("tokenizer.ggml.model"));
  const std::string model = model_r.value();
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (model == "gpt2") t->type_ = ModelType::kByteBpe;
  else if (model == "llama") t->type_ = ModelType::kSpm;
  else
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}: tokenizer.ggml.model = {} is not supported (supported: gpt2, llama)", k.name,
                              shown(model)));
  auto toks_r = f.get_string_array("tokenizer.ggml.tokens");
  if (!toks_r.ok()) return toks_r.status().with_context(k.ctx("tokenizer.ggml.tokens"));
  k.n_tokens = toks_r.value()->size();
  if (k.n_tokens == 0) return Status(StatusCode::kCorrupt, k.ctx("tokenizer.ggml.tokens") + " is empty");
  t->pre_name_ = "default";
  if (f.find("tokenizer.ggml.pre")) {
    auto r = f.get_string("tokenizer.ggml.pre");
    if (!r.ok()) return r.status().with_context(k.ctx("tokenizer.ggml.pre"));
    t->pre_name_ = r.value();
  }
  LAYA_TRY(gguf_tokens(k, t.get()));
  LAYA_TRY(t->type_ == ModelType::kSpm ? gguf_spm(k, t.get()) : gguf_bpe(k, t.get()));
  gguf_added_tokens(k, t.get());
  LAYA_TRY(gguf_special_ids(k, t.get()));
  LAYA_TRY(check_vocabulary(*t, k.name));
  LAYA_TRY(t->finish_init());
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& file) { return TokenizerBuilder::gguf(file); }

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf_path(const std::string& path) {
  auto f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  return TokenizerBuilder::gguf(*f.value());
}

}  // namespace laya::tok
