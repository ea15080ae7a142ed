// Tokenizer from GGUF metadata (tokenizer.ggml.*), following llama.cpp's
// llama-vocab.cpp: "gpt2" = byte-level BPE by merge rank with the regexes of
// tokenizer.ggml.pre; "llama" = SentencePiece BPE by token score with byte fallback.
#include <cctype>
#include <cstdio>
#include <cstring>

#include "format/gguf.h"
#include "tokenizer/internal.h"

namespace laya::tok {

struct TokenizerBuilder {
  static Result<std::unique_ptr<Tokenizer>> gguf(const gguf::File& f);
  static Result<std::unique_ptr<Tokenizer>> hf(std::string_view tj, std::string_view cfg, const std::string& name);
};

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

Result<std::unique_ptr<Tokenizer>> TokenizerBuilder::gguf(const gguf::File& f) {
  const std::string name = f.path();
  auto ctx = [&](const char* key) { return name + ": " + key; };
  auto model_r = f.get_string("tokenizer.ggml.model");
  if (!model_r.ok()) return model_r.status().with_context(name + ": tokenizer.ggml.model");
  std::string model = model_r.value();
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (model == "gpt2") t->type_ = ModelType::kByteBpe;
  else if (model == "llama") t->type_ = ModelType::kSpm;
  else
    return Status(StatusCode::kUnsupported,
                  strformat("%s: tokenizer.ggml.model = '%s' is not supported (supported: gpt2, llama)", name.c_str(),
                            model.c_str()));
  auto toks_r = f.get_string_array("tokenizer.ggml.tokens");
  if (!toks_r.ok()) return toks_r.status().with_context(ctx("tokenizer.ggml.tokens"));
  const auto& toks = *toks_r.value();
  const size_t n = toks.size();
  if (n == 0) return Status(StatusCode::kCorrupt, ctx("tokenizer.ggml.tokens") + " is empty");
  const gguf::Value* types = nullptr;
  if (f.find("tokenizer.ggml.token_type")) {
    auto r = f.get_numeric_array("tokenizer.ggml.token_type");
    if (!r.ok()) return r.status().with_context(ctx("tokenizer.ggml.token_type"));
    types = r.value();
    if (types->count != n)
      return Status(StatusCode::kCorrupt, strformat("%s: tokenizer.ggml.token_type has %llu entries, tokens has %zu",
                                                    name.c_str(), (unsigned long long)types->count, n));
  }
  const gguf::Value* scores = nullptr;
  if (f.find("tokenizer.ggml.scores")) {
    auto r = f.get_numeric_array("tokenizer.ggml.scores");
    if (!r.ok()) return r.status().with_context(ctx("tokenizer.ggml.scores"));
    scores = r.value();
    if (scores->count != n)
      return Status(StatusCode::kCorrupt, strformat("%s: tokenizer.ggml.scores has %llu entries, tokens has %zu",
                                                    name.c_str(), (unsigned long long)scores->count, n));
  }
  auto get_id = [&](const char* key, int32_t* out) -> Status {
    if (!f.find(key)) return Status::Ok();
    auto r = f.get_int(key);
    if (!r.ok()) return r.status().with_context(ctx(key));
    int64_t v = r.value();
    if (v < 0 || v >= int64_t(n))
      return Status(StatusCode::kCorrupt,
                    strformat("%s: %s = %lld is out of range (%zu tokens)", name.c_str(), key, (long long)v, n));
    *out = int32_t(v);
    return Status::Ok();
  };
  auto get_flag = [&](const char* key, bool* out) -> Status {
    if (!f.find(key)) return Status::Ok();
    auto r = f.get_bool(key);
    if (!r.ok()) return r.status().with_context(ctx(key));
    *out = r.value();
    return Status::Ok();
  };
  t->pre_name_ = "default";
  if (f.find("tokenizer.ggml.pre")) {
    auto r = f.get_string("tokenizer.ggml.pre");
    if (!r.ok()) return r.status().with_context(ctx("tokenizer.ggml.pre"));
    t->pre_name_ = r.value();
  }

  BpeModel& bpe = *t->bpe_;
  t->text_.resize(n);
  t->bytes_.resize(n);
  t->kind_.resize(n);
  bpe.vocab.reserve(n * 2);
  const bool spm = t->type_ == ModelType::kSpm;
  for (size_t i = 0; i < n; ++i) {
    std::string_view s = toks[i];
    t->text_[i] = std::string(s);
    int ty = types ? int(types->array_i64(i)) : 1;
    TokenKind k = TokenKind::kNormal;
    switch (ty) {
      case 2: k = TokenKind::kUnknown; break;
      case 3: k = TokenKind::kControl; break;
      case 4: k = TokenKind::kUserDefined; break;
      case 5: k = TokenKind::kUnused; break;
      case 6: k = TokenKind::kByte; break;
      default: k = TokenKind::kNormal; break;
    }
    t->kind_[i] = k;
    std::string key;
    if (spm) {
      key = std::string(s);
      if (k == TokenKind::kByte) {
        int b = parse_byte_token(s);
        if (b < 0)
          return Status(StatusCode::kCorrupt, strformat("%s: tokenizer.ggml.tokens[%zu] = '%s' has type BYTE but is not <0xNN>",
                                                        name.c_str(), i, t->text_[i].c_str()));
        t->bytes_[i] = std::string(1, char(b));
        if (bpe.byte_ids[b] < 0) bpe.byte_ids[b] = int32_t(i);
      } else if (k == TokenKind::kNormal || k == TokenKind::kUserDefined || k == TokenKind::kUnused) {
        t->bytes_[i] = spm_piece_bytes(s);
      } else {
        t->bytes_[i] = std::string(s);
      }
    } else {
      std::string dec;
      if (k == TokenKind::kNormal || k == TokenKind::kUnused || k == TokenKind::kByte) {
        if (!byte_level_decode(s, &dec)) dec = std::string(s);
      } else {
        // control / user-defined tokens are matched and printed as their text
        dec = std::string(s);
      }
      t->bytes_[i] = dec;
      key = dec;
    }
    bpe.vocab.emplace(std::move(key), int32_t(i));
    if (k == TokenKind::kControl || k == TokenKind::kUserDefined || k == TokenKind::kUnknown)
      t->added_.push_back({spm ? std::string(s) : t->bytes_[i], int32_t(i), k != TokenKind::kUserDefined});
  }
  if (spm) {
    bpe.mode = MergeMode::kScore;
    bpe.byte_level = false;
    bpe.byte_fallback = true;
    bpe.scores.resize(n, 0.f);
    if (scores)
      for (size_t i = 0; i < n; ++i) bpe.scores[i] = float(scores->array_f64(i));
    t->spm_escape_ = true;
    t->add_space_prefix_ = true;
    LAYA_TRY(get_flag("tokenizer.ggml.add_space_prefix", &t->add_space_prefix_));
    t->spm_decode_strip_ = t->add_space_prefix_;
    t->add_bos_ = true;
    t->bos_id_ = 1;
    t->eos_id_ = 2;
    t->unk_id_ = 0;
  } else {
    bpe.mode = MergeMode::kRank;
    bpe.byte_level = true;
    auto merges_r = f.get_string_array("tokenizer.ggml.merges");
    if (!merges_r.ok())
      return merges_r.status().with_context(name + ": tokenizer.ggml.merges (required for a gpt2 tokenizer)");
    const auto& merges = *merges_r.value();
    bpe.merges.reserve(merges.size() * 2);
    std::string a, b;
    for (size_t r = 0; r < merges.size(); ++r) {
      std::string_view m = merges[r];
      size_t sp = m.find(' ', 1);
      if (sp == std::string_view::npos)
        return Status(StatusCode::kCorrupt, strformat("%s: tokenizer.ggml.merges[%zu] = '%.*s' has no space", name.c_str(),
                                                      r, int(m.size()), m.data()));
      if (!byte_level_decode(m.substr(0, sp), &a)) a = std::string(m.substr(0, sp));
      if (!byte_level_decode(m.substr(sp + 1), &b)) b = std::string(m.substr(sp + 1));
      int32_t la = bpe.find(a), lb = bpe.find(b), lm = bpe.find(a + b);
      if (la < 0 || lb < 0 || lm < 0) continue;  // llama.cpp ignores merges it cannot apply
      bpe.merges.emplace((uint64_t(uint32_t(la)) << 32) | uint32_t(lb), BpeModel::Merge{int32_t(r), lm});
    }
    for (int c = 0; c < 256; ++c) bpe.byte_ids[c] = bpe.find(std::string(1, char(c)));
    LAYA_TRY(pre_tokenizer_for_gguf(t->pre_name_, t->pre_.get()));
    const std::string& p = t->pre_name_;
    bool llama3 = p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3";
    t->ignore_merges_ = bpe.ignore_merges = llama3;
    t->add_bos_ = llama3;
    t->bos_id_ = 11 < int32_t(n) ? 11 : -1;
    t->eos_id_ = 11 < int32_t(n) ? 11 : -1;
  }
  // Token attributes llama.cpp sets by model name: Phi-3's special tokens eat the whitespace after them.
  if (f.find("general.name")) {
    auto r = f.get_string("general.name");
    if (r.ok()) {
      std::string nm = r.value();
      for (auto& c : nm) c = char(std::tolower(uint8_t(c)));
      if (nm.find("phi-3") != std::string::npos || nm.find("phi3") != std::string::npos) {
        for (auto& a : t->added_) {
          a.rstrip = true;
          if (a.content == "<unk>" || a.content == "<s>" || a.content == "<|endoftext|>") a.rstrip = false;
        }
      }
    }
  }
  LAYA_TRY(get_id("tokenizer.ggml.bos_token_id", &t->bos_id_));
  LAYA_TRY(get_id("tokenizer.ggml.eos_token_id", &t->eos_id_));
  if (f.find("tokenizer.ggml.unknown_token_id")) LAYA_TRY(get_id("tokenizer.ggml.unknown_token_id", &t->unk_id_));
  if (f.find("tokenizer.ggml.eot_token_id")) LAYA_TRY(get_id("tokenizer.ggml.eot_token_id", &t->eot_id_));
  if (f.find("tokenizer.ggml.eom_token_id")) LAYA_TRY(get_id("tokenizer.ggml.eom_token_id", &t->eom_id_));
  LAYA_TRY(get_flag("tokenizer.ggml.add_bos_token", &t->add_bos_));
  LAYA_TRY(get_flag("tokenizer.ggml.add_eos_token", &t->add_eos_));
  bpe.unk_id = spm ? t->unk_id_ : -1;
  LAYA_TRY(t->finish_init(name));
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& file) { return TokenizerBuilder::gguf(file); }

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf_path(const std::string& path) {
  auto f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  return TokenizerBuilder::gguf(*f.value());
}

}  // namespace laya::tok
