// TokenPrefixIndex and Tokenizer::fim_tokens: the vocabulary lookups that the
// session's token healing and fill-in-the-middle prompts need.
#include <algorithm>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace laya::tok {

TokenPrefixIndex::TokenPrefixIndex(const Tokenizer& tok) : tok_(tok) {
  const int32_t n = tok.n_vocab();
  sorted_.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_control(id) || tok.token_bytes(id).empty()) continue;
    sorted_.push_back(id);
    max_len_ = std::max(max_len_, tok.token_bytes(id).size());
  }
  // Equal bytes (SentencePiece byte tokens and their merged twins) keep id order.
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [&](int32_t a, int32_t b) { return tok.token_bytes(a) < tok.token_bytes(b); });
}

std::span<const int32_t> TokenPrefixIndex::starting_with(std::string_view prefix) const {
  auto bytes = [&](int32_t id) { return std::string_view(tok_.token_bytes(id)); };
  auto lo = std::lower_bound(sorted_.begin(), sorted_.end(), prefix,
                             [&](int32_t id, std::string_view p) { return bytes(id) < p; });
  auto hi = std::partition_point(lo, sorted_.end(), [&](int32_t id) { return bytes(id).starts_with(prefix); });
  return {sorted_.data() + (lo - sorted_.begin()), static_cast<size_t>(hi - lo)};
}

std::span<const int32_t> TokenPrefixIndex::exact(std::string_view b) const {
  auto bytes = [&](int32_t id) { return std::string_view(tok_.token_bytes(id)); };
  auto lo = std::lower_bound(sorted_.begin(), sorted_.end(), b,
                             [&](int32_t id, std::string_view p) { return bytes(id) < p; });
  auto hi = std::partition_point(lo, sorted_.end(), [&](int32_t id) { return bytes(id) == b; });
  return {sorted_.data() + (lo - sorted_.begin()), static_cast<size_t>(hi - lo)};
}

const TokenPrefixIndex& Tokenizer::prefix_index() const {
  std::call_once(prefix_index_once_, [&] { prefix_index_ = std::make_unique<TokenPrefixIndex>(*this); });
  return *prefix_index_;
}

Tokenizer::FimTokens Tokenizer::fim_tokens() const {
  // The texts llama.cpp recognises for the three roles (Qwen/StarCoder,
  // DeepSeek, CodeLlama, CodeGemma spellings).
  static constexpr std::string_view kPre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|fim_begin|>"};
  static constexpr std::string_view kSuf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|fim_hole|>"};
  static constexpr std::string_view kMid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|fim_end|>"};
  auto find_any = [&](std::span<const std::string_view> names) {
    for (std::string_view t : names) {
      for (const auto& a : added_)
        if (a.content == t) return a.id;
    }
    return int32_t{-1};
  };
  FimTokens f;
  f.prefix = find_any(kPre);
  f.suffix = find_any(kSuf);
  f.middle = find_any(kMid);
  return f;
}

}  // namespace laya::tok
