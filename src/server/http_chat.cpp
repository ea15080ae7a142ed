// /v1/chat/completions (OpenAI) for models whose chat template laya knows
// (chat.h); anything else is a 400 that names the template.
#include <ctime>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "session/chat.h"
#include "server/http_server.h"
#include "server/sse.h"

namespace laya::server {

using nlohmann::json;

namespace {

json chat_chunk(const std::string& id, const std::string& model, json delta, const char* finish) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", model},
          {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)},
                                    {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
}


}  // namespace

void HttpServer::chat(const httplib::Request& req, httplib::Response& res) {
  const char* ep = "/v1/chat/completions";
  // The model of this request, held to its end (a swap may replace the slot's meanwhile).
  std::shared_ptr<const ModelBundle> bundle = sessions_.model();
  std::string tmpl;
  const ChatTemplate t = chat_template_of(*bundle, &tmpl);
  if (t != ChatTemplate::kChatMl && t != ChatTemplate::kLlama3) {
    const std::string head = tmpl.substr(0, 60);
    return error(res, 400,
                 t == ChatTemplate::kNone
                     ? fmt::format("model {} has no chat template (tokenizer.chat_template): /v1/chat/completions "
                                   "is not served for it; use /v1/completions or /infill", model_id())
                     : fmt::format("model {} has a chat template laya does not know (it knows ChatML and Llama 3): "
                                   "\"{}...\"", model_id(), head),
                 ep);
  }
  auto pr = parse_chat(req.body, opt_.limits);
  if (!pr.ok()) return error(res, 400, pr.status().message(), ep);
  auto q = std::make_shared<ChatRequest>(std::move(pr).value());
  auto params = std::make_shared<ChatParams>(ChatParams{q->max_tokens, q->sampling, q->stop});
  const std::string id = fmt::format("chatcmpl-laya-{}", next_id_.fetch_add(1));
  auto code_of = [](const Status& st) {
    return st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kUnsupported ? 400 : 500;
  };
  if (!q->stream) {
    auto r = run_chat(*bundle, t, q->messages, *params, {});
    if (!r.ok()) return error(res, code_of(r.status()), r.status().message(), ep);
    json j = {{"id", id},
              {"object", "chat.completion"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"model", model_id()},
              {"choices", json::array({{{"index", 0},
                                        {"message", {{"role", "assistant"}, {"content", r->text}}},
                                        {"finish_reason", r->finish_reason}}})},
              {"usage", {{"prompt_tokens", r->prompt_tokens}, {"completion_tokens", r->completion_tokens},
                         {"total_tokens", r->prompt_tokens + r->completion_tokens}}}};
    return ok_json(res, dump(j), ep);
  }
  metrics_.request(ep, 200);
  res.set_chunked_content_provider("text/event-stream", [this, q, params, id, t, bundle](size_t, httplib::DataSink& sink) {
    auto send = [&](const json& j) { return sse_send(sink, j); };
    send(chat_chunk(id, model_id(), {{"role", "assistant"}, {"content", ""}}, nullptr));
    auto emit = [&](std::string_view text) {
      return send(chat_chunk(id, model_id(), {{"content", std::string(text)}}, nullptr));
    };
    auto r = run_chat(*bundle, t, q->messages, *params, emit);
    if (!r.ok()) {
      send(json{{"error", {{"code", 400}, {"message", r.status().message()}, {"type", "invalid_request_error"}}}});
    } else {
      send(chat_chunk(id, model_id(), json::object(), r->finish_reason));
    }
    sse_done(sink);
    return true;
  });
}

}  // namespace laya::server
