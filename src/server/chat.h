// Chat prompts for /v1/chat/completions: the two templates laya knows, found
// by their markers in the GGUF's tokenizer.chat_template (a Jinja program that
// laya does not run), and a generation on its own sequence.
//
//   ChatML   (Qwen, SmolLM, ...):  <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
//   Llama 3:                      <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
//                                 <|start_header_id|>assistant<|end_header_id|>\n\n   (after BOS)
//
// The markers are special tokens, the contents are plain text: a message
// holding "<|im_end|>" is text, never a turn boundary (each content is
// tokenized with special-token parsing off).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "server/requests.h"
#include "tokenizer/tokenizer.h"

namespace laya::server {

enum class ChatTemplate { kNone, kChatMl, kLlama3, kUnknown };
const char* to_string(ChatTemplate t);
// What `tmpl` (the GGUF's tokenizer.chat_template; empty: none) is.
ChatTemplate detect_chat_template(std::string_view tmpl);

// The prompt's token ids: BOS where the tokenizer adds it, the turns, and the
// assistant's header. kInvalidArgument for a role the template cannot hold.
Result<std::vector<int32_t>> chat_prompt(ChatTemplate t, const tok::Tokenizer& tok,
                                         const std::vector<ChatMessage>& messages);

struct ChatResult {
  std::string text;
  int64_t prompt_tokens = 0, completion_tokens = 0, reused_tokens = 0;
  const char* finish_reason = "stop";  // "stop" (end of turn / stop string) or "length"
};

// Generates the assistant's turn on a fresh sequence (its prompt's full KV
// blocks are shared with earlier chats through the pool's content keys: the
// same system prompt is computed once). `on_text` gets text as it becomes
// final (complete UTF-8, not part of a stop string); returning false stops.
Result<ChatResult> run_chat(Engine& eng, const tok::Tokenizer& tok, ChatTemplate t, const ChatRequest& req,
                            const std::function<bool(std::string_view)>& on_text);

}  // namespace laya::server
