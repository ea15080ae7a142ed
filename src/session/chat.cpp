#include "session/chat.h"

#include <fmt/format.h>

#include "format/gguf.h"
#include "session/generator.h"

namespace laya {

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

ChatTemplate chat_template_of(const ModelBundle& b, std::string* text) {
  std::string tmpl;
  if (const gguf::File* g = b.model->gguf_file())
    if (auto ct = g->get_string("tokenizer.chat_template"); ct.ok()) tmpl = *ct;
  const ChatTemplate t = detect_chat_template(tmpl);
  if (text) *text = std::move(tmpl);
  return t;
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

Result<ChatResult> run_chat(const ModelBundle& b, ChatTemplate t, const std::vector<ChatMessage>& messages,
                            const ChatParams& p, const std::function<bool(std::string_view)>& on_text) {
  Engine& eng = *b.engine;
  const tok::Tokenizer& tok = *b.tokenizer;
  LAYA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, chat_prompt(t, tok, messages));
  const int64_t n_ctx = eng.options().n_ctx;
  if (static_cast<int64_t>(ids.size()) >= n_ctx)
    return Status(StatusCode::kInvalidArgument, fmt::format("request: the messages are {} tokens, the context holds {}",
                                                            ids.size(), n_ctx));
  LAYA_TRY(Sampler::validate(p.sampling, static_cast<int>(eng.n_vocab())));
  std::unique_ptr<Sequence> seq = eng.new_sequence();
  // Full blocks of an identical prompt head (a system prompt) come from the pool's cache.
  const int64_t reused = std::min<int64_t>(eng.reuse_cached_prefix(*seq, ids), static_cast<int64_t>(ids.size()) - 1);
  LAYA_TRY(eng.prefill(*seq, std::span<const int32_t>(ids).subspan(static_cast<size_t>(reused)), reused));
  PlainSequence target(eng, *seq);
  const int n_vocab = static_cast<int>(eng.n_vocab());
  Generator gen(&tok, n_vocab, continuation_masks(tok, n_vocab, eng.hparams().eos_id));
  Sampler smp(p.sampling, n_vocab);
  smp.set_mask(gen.masks().control);  // a role marker is never part of the answer
  GenerateOptions g;
  g.max_tokens = std::min<int64_t>(p.max_tokens, n_ctx - static_cast<int64_t>(ids.size()));
  g.end_token = t == ChatTemplate::kChatMl ? tok.find_token("<|im_end|>").value_or(-1)
                                           : tok.find_token("<|eot_id|>").value_or(-1);
  g.stop = &p.stop;
  Generated out;
  LAYA_TRY(gen.run(target, ids, smp, g, StopStream::Sink::of(on_text), &out));
  ChatResult r;
  r.prompt_tokens = static_cast<int64_t>(ids.size());
  r.reused_tokens = reused;
  r.completion_tokens = static_cast<int64_t>(out.tokens.size());
  r.finish_reason = out.stop == StopReason::kEnd || out.stop == StopReason::kStopString ? "stop" : "length";
  r.text = std::move(out.text);
  return r;
}

}  // namespace laya
