// Which tokens are control tokens, decided as llama.cpp decides it at load time
// (llama-vocab.cpp, llama_vocab::impl::load) and as convert_hf_to_gguf.py does
// when it turns a tokenizer.json into a GGUF (conversion/base.py,
// does_token_look_special). A control token is cut out of raw text only when
// the caller asks for special-token parsing (see Tokenizer::split_added), so a
// token that a file marks user-defined but that ends generation or marks a
// fill-in-the-middle hole must be re-marked here, or text a user typed would
// turn into it (phi-3's "</s>", qwen2's "<|fim_prefix|>").
#include <algorithm>
#include <string_view>

#include "tokenizer/internal.h"

namespace laya::tok {

namespace {

bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// llama.cpp's end-of-generation texts; EOT and EOM candidates are among them.
bool eog_text(std::string_view t) {
  return one_of(t, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~["});
}

// Fill-in-the-middle markers by role, in llama.cpp's order of roles.
constexpr std::string_view kFimPre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                        "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                        "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSuf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                        "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
                                        "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                        "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                        "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSep[] = {"<|file_sep|>"};

}  // namespace

bool eog_token_text(std::string_view text) { return eog_text(text); }

bool hf_added_token_looks_special(std::string_view t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return one_of(t, {"<pad>", "<mask>", "<2mass>", "[@BOS@]"}) || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

void mark_control_tokens(const std::vector<std::string>& text, unsigned fim_roles_given,
                         std::vector<TokenKind>* kind) {
  // A file that names a role's token by id (tokenizer.ggml.fim_*_token_id) keeps
  // its type; otherwise llama.cpp looks the role up by text and makes it control.
  // llama.cpp stops at the first candidate of a role in hash-map order; a
  // vocabulary with two candidates for one role is ambiguous there, and every
  // candidate is control here (text stays text, which is the safe side).
  const std::span<const std::string_view> roles[kFimRoles] = {kFimPre, kFimSuf, kFimMid, kFimPad, kFimRep, kFimSep};
  auto fim_text = [&](std::string_view t) {
    for (unsigned r = 0; r < kFimRoles; ++r)
      if (!(fim_roles_given & (1u << r)) && std::find(roles[r].begin(), roles[r].end(), t) != roles[r].end())
        return true;
    return false;
  };
  bool has_return = false, has_call = false, has_calls = false, has_flush = false, has_tool_response = false;
  for (size_t id = 0; id < text.size(); ++id) {
    const std::string& t = text[id];
    TokenKind& k = (*kind)[id];
    if (eog_text(t)) {
      has_return |= t == "<|return|>";
      has_call |= t == "<|call|>";
      has_calls |= t == "<|calls|>";
      has_flush |= t == "<|flush|>";
      has_tool_response |= t == "<|tool_response>";
      k = TokenKind::kControl;
    } else if (fim_text(t)) {
      k = TokenKind::kControl;
    } else if (one_of(t, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) {
      k = TokenKind::kUserDefined;  // gpt-oss: llama.cpp always renders these
    }
  }
  // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
  const bool end_is_text = (has_return && has_call) || (has_calls && has_flush);
  // gemma 4: "</s>" is an ordinary token.
  for (size_t id = 0; id < text.size(); ++id) {
    if (end_is_text && text[id] == "<|end|>") (*kind)[id] = TokenKind::kUserDefined;
    if (has_tool_response && text[id] == "</s>") (*kind)[id] = TokenKind::kNormal;
  }
}

}  // namespace laya::tok
