// UTF-8 helpers, GPT-2's byte↔unicode alphabet, normalizers (utf8proc) and the
// PCRE2 regex pre-tokenizers.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>
#include <fmt/format.h>

#include <array>
#include <cstring>

#include "core/shown.h"
#include "tokenizer/internal.h"

namespace laya::tok {

// ---- UTF-8 -----------------------------------------------------------------------
size_t utf8_len_at(std::string_view s, size_t i) {
  size_t n;
  utf8_decode(s, i, &n);
  return n;
}

uint32_t utf8_decode(std::string_view s, size_t i, size_t* len) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size();
  uint8_t c = p[i];
  if (c < 0x80) {
    *len = 1;
    return c;
  }
  size_t need;
  uint32_t cp, min;
  if ((c & 0xE0) == 0xC0) need = 1, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) need = 2, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) need = 3, cp = c & 0x07, min = 0x10000;
  else {
    *len = 1;
    return 0x80000000u | c;
  }
  if (i + need >= n) {
    *len = 1;
    return 0x80000000u | c;
  }
  for (size_t k = 1; k <= need; ++k) {
    uint8_t d = p[i + k];
    if ((d & 0xC0) != 0x80) {
      *len = 1;
      return 0x80000000u | c;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *len = 1;
    return 0x80000000u | c;
  }
  *len = need + 1;
  return cp;
}

void utf8_append(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n;
    if (utf8_decode(s, i, &n) & 0x80000000u) return false;
    i += n;
  }
  return true;
}

size_t utf8_offset_of_cp(std::string_view s, size_t cp) {
  size_t i = 0;
  while (cp > 0 && i < s.size()) {
    i += utf8_len_at(s, i);
    --cp;
  }
  return i;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence is not complete.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    uint8_t c = uint8_t(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation: keep looking
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

bool is_nonstarter(uint32_t cp) {
  if (cp & 0x80000000u) return false;
  if (cp < 0x300) return false;
  if ((cp >= 0x1161 && cp <= 0x11FF)) return true;  // Hangul V/T jamo
  const utf8proc_property_t* p = utf8proc_get_property(utf8proc_int32_t(cp));
  return p->combining_class != 0;
}

// ---- byte-level alphabet ---------------------------------------------------------------
namespace {
struct ByteTables {
  std::array<std::string, 256> b2u;
  std::unordered_map<uint32_t, uint8_t> u2b;
  ByteTables() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp;
      if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = b;
      else cp = 256 + n++;
      utf8_append(cp, &b2u[b]);
      u2b[cp] = uint8_t(b);
    }
  }
};
const ByteTables& tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return tables().b2u[b]; }

bool byte_level_decode(std::string_view s, std::string* out) {
  const auto& t = tables();
  out->clear();
  for (size_t i = 0; i < s.size();) {
    size_t n;
    uint32_t cp = utf8_decode(s, i, &n);
    auto it = t.u2b.find(cp);
    if (it == t.u2b.end()) return false;
    out->push_back(char(it->second));
    i += n;
  }
  return true;
}

// ---- normalizer ---------------------------------------------------------------------------
bool Normalizer::has_unicode_normalization() const {
  for (const auto& s : steps)
    if (s.op == Op::kNFC || s.op == Op::kNFKC || s.op == Op::kNFD || s.op == Op::kNFKD || s.op == Op::kLowercase)
      return true;
  return false;
}

static std::string utf8proc_apply(std::string_view s, int options) {
  if (s.empty()) return {};
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    utf8proc_ssize_t(s.size()), &dst, utf8proc_option_t(options));
  if (n < 0) {  // invalid UTF-8: leave the text as it is (bytes stay bytes)
    return std::string(s);
  }
  std::string r(reinterpret_cast<char*>(dst), size_t(n));
  std::free(dst);
  return r;
}

std::string Normalizer::apply(std::string_view in, bool first) const {
  std::string s(in);
  // ASCII is invariant under NFC/NFKC/NFD/NFKD.
  auto non_ascii = [&s] {
    for (char c : s)
      if (uint8_t(c) >= 0x80) return true;
    return false;
  };
  for (const auto& st : steps) {
    switch (st.op) {
      case Op::kNFC: if (non_ascii()) s = utf8proc_apply(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE); break;
      case Op::kNFKC: if (non_ascii()) s = utf8proc_apply(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
      case Op::kNFD: if (non_ascii()) s = utf8proc_apply(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE); break;
      case Op::kNFKD: if (non_ascii()) s = utf8proc_apply(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
      case Op::kLowercase: s = utf8proc_apply(s, UTF8PROC_STABLE | UTF8PROC_CASEFOLD); break;
      case Op::kPrepend:
        if (!s.empty()) s.insert(0, st.a);
        break;
      case Op::kPrependIfFirst:
        if (first && !s.empty()) s.insert(0, st.a);
        break;
      case Op::kReplace: {
        if (st.a.empty()) break;
        std::string r;
        r.reserve(s.size());
        size_t i = 0;
        while (true) {
          size_t j = s.find(st.a, i);
          if (j == std::string::npos) break;
          r.append(s, i, j - i);
          r += st.b;
          i = j + st.a.size();
        }
        r.append(s, i, std::string::npos);
        s = std::move(r);
        break;
      }
    }
  }
  return s;
}

// ---- regex ---------------------------------------------------------------------------------
namespace {
struct MatchData {
  pcre2_match_data* md = nullptr;
  pcre2_jit_stack* js = nullptr;
  ~MatchData() {
    if (md) pcre2_match_data_free(md);
    if (js) pcre2_jit_stack_free(js);
  }
};
pcre2_match_data* thread_match_data() {
  thread_local MatchData d;
  if (!d.md) d.md = pcre2_match_data_create(4, nullptr);
  return d.md;
}
}  // namespace

Regex::~Regex() {
  if (code_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Result<std::unique_ptr<Regex>> Regex::compile(const std::string& pattern, bool literal) {
  int err = 0;
  PCRE2_SIZE off = 0;
  uint32_t flags = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  // PCRE2 refuses PCRE2_UCP beside PCRE2_LITERAL ("invalid option bits"), and a
  // literal has no character classes for it to change.
  if (literal) flags = (flags & ~uint32_t{PCRE2_UCP}) | PCRE2_LITERAL;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags, &err,
                                   &off, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return Status(StatusCode::kCorrupt, fmt::format("regex {}: {} at offset {}", shown(pattern),
                                                    reinterpret_cast<const char*>(buf), size_t(off)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  std::unique_ptr<Regex> r(new Regex());
  r->pattern_ = pattern;
  r->code_ = code;
  return r;
}

bool Regex::find(std::string_view subject, size_t start, size_t* mb, size_t* me) const {
  pcre2_match_data* md = thread_match_data();
  auto* code = static_cast<pcre2_code*>(code_);
  while (start <= subject.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, 0, md, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)  // JIT stack exhausted etc.: retry with the interpreter (heap)
      rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, PCRE2_NO_JIT, md,
                       nullptr);
    if (rc < 0) return false;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] > ov[0]) {
      *mb = ov[0];
      *me = ov[1];
      return true;
    }
    // empty match: try again one character further
    if (ov[0] >= subject.size()) return false;
    start = ov[0] + utf8_len_at(subject, ov[0]);
  }
  return false;
}

// ---- pre-tokenizer ---------------------------------------------------------------------------
void PreTokenizer::apply_step(const Step& st, std::string_view s, Span piece, std::vector<Span>* out) {
  // Matches (relative to piece) as a list of [b,e) with a flag "is match".
  std::string_view sub = s.substr(piece.begin, piece.end - piece.begin);
  struct Part {
    uint32_t b, e;
    bool m;
  };
  thread_local std::vector<Part> parts;
  parts.clear();
  size_t pos = 0, mb, me;
  while (pos < sub.size() && st.re->find(sub, pos, &mb, &me)) {
    if (mb > pos) parts.push_back({uint32_t(pos), uint32_t(mb), false});
    parts.push_back({uint32_t(mb), uint32_t(me), true});
    pos = me;
  }
  if (pos < sub.size()) parts.push_back({uint32_t(pos), uint32_t(sub.size()), false});
  if (st.invert)
    for (auto& p : parts) p.m = !p.m;
  const uint32_t base = piece.begin;
  auto emit = [&](uint32_t b, uint32_t e) {
    if (e > b) out->push_back({base + b, base + e});
  };
  switch (st.behavior) {
    case SplitBehavior::kIsolated:
      for (auto& p : parts) emit(p.b, p.e);
      break;
    case SplitBehavior::kRemoved:
      for (auto& p : parts)
        if (!p.m) emit(p.b, p.e);
      break;
    case SplitBehavior::kContiguous: {
      size_t i = 0;
      while (i < parts.size()) {
        size_t j = i + 1;
        if (parts[i].m)
          while (j < parts.size() && parts[j].m) ++j;
        emit(parts[i].b, parts[j - 1].e);
        i = j;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      uint32_t start = 0;
      for (auto& p : parts)
        if (p.m) {
          emit(start, p.e);
          start = p.e;
        }
      emit(start, uint32_t(sub.size()));
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      uint32_t start = 0;
      for (auto& p : parts)
        if (p.m && p.b > start) {
          emit(start, p.b);
          start = p.b;
        }
      emit(start, uint32_t(sub.size()));
      break;
    }
  }
}

void PreTokenizer::split_level1(std::string_view s, std::vector<Span>* out) const {
  if (s.empty()) return;
  if (steps.empty()) {
    out->push_back({0, uint32_t(s.size())});
    return;
  }
  apply_step(steps[0], s, {0, uint32_t(s.size())}, out);
}

void PreTokenizer::split_rest(std::string_view s, Span piece, std::vector<Span>* out) const {
  thread_local std::vector<Span> a, b;
  if (steps.size() <= 1) {
    out->push_back(piece);
    return;
  }
  a.clear();
  a.push_back(piece);
  for (size_t k = 1; k < steps.size(); ++k) {
    b.clear();
    for (const Span& p : a) apply_step(steps[k], s, p, &b);
    std::swap(a, b);
  }
  out->insert(out->end(), a.begin(), a.end());
}

const char* const kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Status pre_tokenizer_for_gguf(const std::string& pre, PreTokenizer* out) {
  std::vector<std::string> res;
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "dbrx" ||
      pre == "smaug-bpe" || pre == "pixtral") {
    res = {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
           "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  } else if (pre == "qwen2" || pre == "stablelm2" || pre == "hunyuan" || pre == "deepseek-r1-qwen") {
    res = {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
           "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  } else if (pre == "deepseek-llm") {
    res = {"[\\r\\n]",
           "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
           "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"};
  } else if (pre == "deepseek-coder") {
    res = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
  } else if (pre == "falcon") {
    res = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
           "[0-9][0-9][0-9]"};
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" || pre == "codeshell" ||
             pre == "exaone" || pre == "minerva-7b") {
    res = {"\\p{N}", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"};
  } else if (pre == "gpt-2" || pre == "phi-2" || pre == "jina-es" || pre == "jina-de" || pre == "mpt" ||
             pre == "olmo" || pre == "jais" || pre == "trillion") {
    res = {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"};
  } else if (pre == "default") {
    // llama.cpp's default for BPE vocabularies without tokenizer.ggml.pre.
    res = {"[\\p{P}\\$\\+<=>\\^~\\|]+", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
           "\\p{N}+", "[0-9][0-9][0-9]"};
  } else {
    // A name laya does not know: guessing its splitting rules would give ids
    // the model was not trained on (silent nonsense), so refuse, as llama.cpp does.
    return Status(StatusCode::kUnsupported,
                  fmt::format("tokenizer.ggml.pre = '{}': an unknown pre-tokenizer (known: llama3, llama-bpe, qwen2, "
                              "deepseek-llm, deepseek-coder, falcon, starcoder, gpt-2 and their aliases); its "
                              "splitting rules would be guessed and the token ids would not be the model's",
                              shown(pre)));
  }
  for (const auto& r : res) {
    LAYA_ASSIGN_OR_RETURN(auto re, Regex::compile(r, false));
    PreTokenizer::Step st;
    st.re = std::move(re);
    out->steps.push_back(std::move(st));
  }
  return Status::Ok();
}

}  // namespace laya::tok
