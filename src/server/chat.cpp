#include "server/chat.h"

#include <fmt/format.h>

#include "core/utf8.h"
#include "server/requests.h"

namespace laya::server {

const char* to_string(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kNone: return "none";
    case ChatTemplate::kChatMl: return "ChatML";
    case ChatTemplate::kLlama3: return "Llama 3";
    default: return "unknown";
  }
}

ChatTemplate detect_chat_template(std::string_view tmpl) {
  if (tmpl.empty()) return ChatTemplate::kNone;
  if (tmpl.find("<|im_start|>") != std::string_view::npos) return ChatTemplate::kChatMl;
  if (tmpl.find("<|start_header_id|>") != std::string_view::npos) return ChatTemplate::kLlama3;
  return ChatTemplate::kUnknown;
}

namespace {

Result<int32_t> marker(const tok::Tokenizer& tok, std::string_view text) {
  auto id = tok.find_token(text);
  if (!id) return Status(StatusCode::kUnsupported, fmt::format("the vocabulary has no {} token", text));
  return *id;
}

}  // namespace

Result<std::vector<int32_t>> chat_prompt(ChatTemplate t, const tok::Tokenizer& tok,
                                         const std::vector<ChatMessage>& messages) {
  if (t != ChatTemplate::kChatMl && t != ChatTemplate::kLlama3)
    return Status(StatusCode::kUnsupported, fmt::format("chat template {} is not one laya knows", to_string(t)));
  std::vector<int32_t> ids;
  if (tok.add_bos_default() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("request: messages[{}].role is \"{}\", expected system, user or assistant", i, role));
  }
  // The text between two special tokens is one fragment, tokenized as a whole
  // (as llama.cpp and Hugging Face do with the rendered template).
  if (t == ChatTemplate::kChatMl) {
    LAYA_ASSIGN_OR_RETURN(int32_t start, marker(tok, "<|im_start|>"));
    LAYA_ASSIGN_OR_RETURN(int32_t end, marker(tok, "<|im_end|>"));
    for (const ChatMessage& m : messages) {
      ids.push_back(start);
      LAYA_TRY(tok.encode_append(m.role + "\n" + m.content, false, &ids));
      ids.push_back(end);
      LAYA_TRY(tok.encode_append("\n", false, &ids));
    }
    ids.push_back(start);
    LAYA_TRY(tok.encode_append("assistant\n", false, &ids));
  } else {
    LAYA_ASSIGN_OR_RETURN(int32_t head, marker(tok, "<|start_header_id|>"));
    LAYA_ASSIGN_OR_RETURN(int32_t head_end, marker(tok, "<|end_header_id|>"));
    LAYA_ASSIGN_OR_RETURN(int32_t eot, marker(tok, "<|eot_id|>"));
    for (const ChatMessage& m : messages) {
      ids.push_back(head);
      LAYA_TRY(tok.encode_append(m.role, false, &ids));
      ids.push_back(head_end);
      LAYA_TRY(tok.encode_append("\n\n" + m.content, false, &ids));
      ids.push_back(eot);
    }
    ids.push_back(head);
    LAYA_TRY(tok.encode_append("assistant", false, &ids));
    ids.push_back(head_end);
    LAYA_TRY(tok.encode_append("\n\n", false, &ids));
  }
  return ids;
}

Result<ChatResult> run_chat(Engine& eng, const tok::Tokenizer& tok, ChatTemplate t, const ChatRequest& req,
                            const std::function<bool(std::string_view)>& on_text) {
  LAYA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, chat_prompt(t, tok, req.messages));
  const int64_t n_ctx = eng.options().n_ctx;
  if (static_cast<int64_t>(ids.size()) >= n_ctx)
    return Status(StatusCode::kInvalidArgument, fmt::format("request: the messages are {} tokens, the context holds {}",
                                                            ids.size(), n_ctx));
  LAYA_TRY(Sampler::validate(req.sampling, static_cast<int>(eng.n_vocab())));
  const int64_t max_new = std::min<int64_t>(req.max_tokens, n_ctx - static_cast<int64_t>(ids.size()));
  const int32_t end_turn = t == ChatTemplate::kChatMl ? tok.find_token("<|im_end|>").value_or(-1)
                                                      : tok.find_token("<|eot_id|>").value_or(-1);
  std::unique_ptr<Sequence> seq = eng.new_sequence();
  // Full blocks of an identical prompt head (a system prompt) come from the pool's cache.
  const int64_t reused = std::min<int64_t>(eng.reuse_cached_prefix(*seq, ids), static_cast<int64_t>(ids.size()) - 1);
  LAYA_TRY(eng.prefill(*seq, std::span<const int32_t>(ids).subspan(static_cast<size_t>(reused)), reused));
  ChatResult r;
  r.prompt_tokens = static_cast<int64_t>(ids.size());
  r.reused_tokens = reused;
  Sampler smp(req.sampling, static_cast<int>(eng.n_vocab()));
  size_t hold = 0;
  for (const std::string& s : req.stop) hold = std::max(hold, s.empty() ? 0 : s.size() - 1);
  std::string acc;
  size_t emitted = 0;
  bool stopped = false;
  auto flush_to = [&](size_t end) {
    const size_t tail = utf8::incomplete_tail(std::string_view(acc).substr(0, end));  // never cut a character
    end = end > emitted + tail ? end - tail : emitted;
    if (end <= emitted) return true;
    const bool ok = !on_text || on_text(std::string_view(acc).substr(emitted, end - emitted));
    emitted = end;
    return ok;
  };
  std::vector<int32_t> history = ids;
  r.finish_reason = "length";
  for (int64_t i = 0; i < max_new && !stopped; ++i) {
    const int32_t next = smp.sample(seq->logits(), history);
    if (next == end_turn || tok.is_eog(next)) {
      r.finish_reason = "stop";
      break;
    }
    history.push_back(next);
    ++r.completion_tokens;
    acc += tok.token_bytes(next);
    std::string cut = acc;
    if (apply_stops(&cut, req.stop, 0)) {
      acc.resize(cut.size());
      r.finish_reason = "stop";
      stopped = true;
      flush_to(acc.size());
      break;
    }
    if (!flush_to(acc.size() > hold ? acc.size() - hold : 0)) {
      stopped = true;  // the client went away
      break;
    }
    if (i + 1 < max_new) LAYA_TRY(eng.decode(*seq, next));
  }
  // An incomplete character at the end (the last token cut it) is left out.
  const size_t tail = utf8::incomplete_tail(acc);
  acc.erase(acc.end() - static_cast<std::ptrdiff_t>(std::min(tail, acc.size())), acc.end());
  if (!stopped) flush_to(acc.size());
  r.text = std::move(acc);
  return r;
}

}  // namespace laya::server
