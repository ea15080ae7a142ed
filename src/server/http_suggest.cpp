// The suggestion endpoints of laya serve: /infill (llama.cpp's) and
// /v1/completions (OpenAI's), both a Session suggestion on the document the
// request describes (server_sessions.h routes it).
#include <chrono>
#include <ctime>
#include <numeric>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "server/http_server.h"
#include "server/sse.h"

namespace laya::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// llama.cpp's separator before each input_extra chunk for vocabularies with no
// <|file_sep|> token (the default model has none): "\n\n--- snippet ---\n\n".
constexpr std::string_view kChunkSeparator = "\n\n--- snippet ---\n\n";

struct Outcome {
  ServedSuggestion served;
  std::string content;
  const char* stop_type = "limit";  // llama.cpp's: "eos", "limit", "word"
  std::string stopping_word;
  double request_ms = 0;
};

// Runs one suggestion with stop strings and n_indent applied while it streams:
// `emit` (optional) receives the text as it becomes final — a tail that could
// still turn into a stop string is held back until it cannot.
//
// `line_above` (non-null: /infill, for editors that show a long suggestion
// whole) turns on the repeated-line rule (cut_repeated_line), and a
// multi-line suggestion cut by its length loses its unfinished last line.
Result<Outcome> run_suggestion(ServerSessions& sessions, const std::optional<std::string>& name, std::string_view doc,
                    size_t cursor, const SuggestOptions& so, const std::vector<std::string>& stop, int64_t n_indent,
                    const std::function<bool(std::string_view)>& emit, Clock::time_point t0,
                    const std::string_view* line_above = nullptr) {
  StopStream stream;
  stream.reset(&stop, n_indent, StopStream::Sink::of(emit));
  if (line_above) stream.stop_repeated_lines(*line_above);
  auto on_piece = [&](std::string_view piece) { return stream.push(piece); };
  auto r = sessions.suggest(name, doc, cursor, so, on_piece);
  if (!r.ok()) return r.status();
  Outcome o;
  o.served = std::move(r).value();
  request_note().note(o.served.suggestion, o.served.session_index, o.served.new_session, o.served.superseded);
  o.content = o.served.suggestion.text;
  bool cut_by_stop = apply_stops(&o.content, stop, n_indent) || stream.stopped();
  if (line_above) cut_by_stop = cut_repeated_line(&o.content, *line_above) || cut_by_stop;
  if (!o.served.superseded) stream.finish_with(o.served.suggestion.text);
  if (cut_by_stop) {
    o.stop_type = "word";
    for (const std::string& s : stop)
      if (!s.empty() && o.served.suggestion.text.find(s) == o.content.size()) o.stopping_word = s;
  } else if (static_cast<int>(o.served.suggestion.tokens.size()) < so.max_tokens && !o.served.suggestion.cut_by_deadline) {
    o.stop_type = "eos";
  } else if (line_above && o.content.find('\n') != std::string::npos) {
    o.content.resize(o.content.rfind('\n'));  // cut by its length mid-line: the whole lines only
  }
  o.request_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return o;
}

json timings_json(const Suggestion& s) {
  const auto& t = s.timings;
  const double pred_ms = std::accumulate(t.decode_ms.begin(), t.decode_ms.end(), 0.0);
  const auto n_pred = static_cast<double>(s.tokens.size());
  const auto n_prompt = static_cast<double>(t.tokens_computed);
  return {{"cache_n", t.tokens_reused},
          {"prompt_n", t.tokens_computed},
          {"prompt_ms", t.prefill_ms},
          {"prompt_per_token_ms", n_prompt > 0 ? t.prefill_ms / n_prompt : 0.0},
          {"prompt_per_second", t.prefill_ms > 0 ? 1e3 * n_prompt / t.prefill_ms : 0.0},
          {"predicted_n", s.tokens.size()},
          {"predicted_ms", pred_ms},
          {"predicted_per_token_ms", n_pred > 0 ? pred_ms / n_pred : 0.0},
          {"predicted_per_second", pred_ms > 0 ? 1e3 * n_pred / pred_ms : 0.0},
          {"tokenize_ms", t.tokenize_ms},
          {"total_ms", t.total_ms},
          // llama.cpp's names for its speculative decoding; "passes": forward
          // passes of the generation (one checks several drafted tokens).
          {"draft_n", t.drafted_tokens},
          {"draft_n_accepted", t.accepted_draft_tokens},
          {"passes", t.decode_ms.size()}};
}

// llama.cpp's response_fields: each "a/b" path picked out of the response and
// put at the top level under its path ("timings/prompt_n": 12); missing ones
// are left out.
json pick_fields(const std::vector<std::string>& paths, const json& full) {
  if (paths.empty()) return full;
  json out = json::object();
  for (const std::string& p : paths) {
    const json* cur = &full;
    size_t start = 0;
    bool found = true;
    while (found) {
      const size_t slash = p.find('/', start);
      const std::string key = p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (!cur->is_object() || !cur->contains(key)) found = false;
      else cur = &(*cur)[key];
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (found) out[p] = *cur;
  }
  return out;
}


}  // namespace

void HttpServer::infill(const httplib::Request& req, httplib::Response& res) {
  const auto t0 = Clock::now();
  auto pr = parse_infill(req.body, opt_.limits);
  if (!pr.ok()) return error(res, 400, pr.status().message(), "/infill");
  InfillRequest& q = *pr;
  if (q.stream)
    return error(res, 400, "request: field \"stream\": true is not supported by /infill (use /v1/completions)",
                 "/infill");
  // The document: the extra chunks first (as llama.cpp puts them before the
  // FIM prefix), then prefix + prompt | suffix.
  std::string doc;
  for (const ExtraChunk& c : q.input_extra) {
    doc += kChunkSeparator;
    doc += c.text;
  }
  if (!q.input_extra.empty()) doc += kChunkSeparator;
  doc += q.input_prefix;
  doc += q.prompt;
  const size_t cursor = doc.size();
  doc += q.input_suffix;
  SuggestOptions so;
  const bool prepare_only = q.n_predict && *q.n_predict == 0;  // llama.cpp: evaluate the prompt into the cache
  so.max_tokens = static_cast<int>(prepare_only ? 1 : q.n_predict.value_or(opt_.default_predict));
  so.sampling = q.sampling;
  if (q.t_max_predict_ms && *q.t_max_predict_ms > 0)
    so.deadline = std::chrono::duration<double, std::milli>(*q.t_max_predict_ms);
  // The line above the cursor's: the last line of input_prefix.
  std::string_view above = q.input_prefix;
  if (!above.empty() && above.back() == '\n') above.remove_suffix(1);
  above = above.substr(above.rfind('\n') == std::string_view::npos ? 0 : above.rfind('\n') + 1);
  auto out = run_suggestion(sessions_, q.session, doc, cursor, so, q.stop, q.n_indent, {}, t0,
                            opt_.keep_repeated_lines ? nullptr : &above);
  if (!out.ok()) {
    const int code = out.status().code() == StatusCode::kInvalidArgument ? 400 : 500;
    return error(res, code, out.status().message(), "/infill");
  }
  const Suggestion& s = out->served.suggestion;
  if (prepare_only) out->content.clear();
  metrics_.suggestion(s, out->request_ms);
  json full = {{"index", 0},
               {"content", out->content},
               {"tokens", prepare_only ? std::vector<int32_t>{} : s.tokens},
               {"id_slot", q.id_slot >= 0 ? q.id_slot : static_cast<int64_t>(out->served.session_index)},
               {"stop", true},
               {"model", model_id()},
               {"tokens_predicted", prepare_only ? 0 : s.tokens.size()},
               {"tokens_evaluated", s.timings.tokens_reused + s.timings.tokens_computed},
               {"generation_settings",
                {{"n_ctx", sessions_.model()->engine->options().n_ctx},
                 {"n_predict", so.max_tokens},
                 {"temperature", so.sampling.temperature},
                 {"top_k", so.sampling.top_k},
                 {"top_p", so.sampling.top_p},
                 {"model", model_id()}}},
               {"has_new_line", out->content.find('\n') != std::string::npos},
               {"truncated", s.window_start_cp > 0},  // the window starts after the document's start
               {"stop_type", out->stop_type},
               {"stopping_word", out->stopping_word},
               {"tokens_cached", s.tokens_cached},
               {"timings", timings_json(s)},
               {"laya",
                {{"session", out->served.session_index},
                 {"new_session", out->served.new_session},
                 {"typed_through", s.typed_through},
                 {"cut_by_deadline", s.cut_by_deadline},
                 {"fim", s.fim},
                 {"healed_bytes", s.healed_bytes},
                 {"request_ms", out->request_ms}}}};
  if (out->served.superseded) {
    // A newer request on this document took over: an answer, not a hang, and
    // an error field saying so (the content is empty: this text is stale).
    full["content"] = "";
    full["error"] = {{"code", 409}, {"message", "superseded by a newer request on the same document"},
                     {"type", "cancelled"}};
  }
  json body = pick_fields(q.response_fields, full);
  if (out->served.superseded && !q.response_fields.empty()) body["error"] = full["error"];
  ok_json(res, dump(body), "/infill");
}

namespace {

json completion_chunk(const std::string& id, const std::string& model, const std::string& text, const char* finish) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", model},
          {"choices", json::array({{{"text", text},
                                    {"index", 0},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
}

const char* finish_reason(const Outcome& o) { return std::string_view(o.stop_type) == "limit" ? "length" : "stop"; }

}  // namespace

void HttpServer::completions(const httplib::Request& req, httplib::Response& res) {
  const auto t0 = Clock::now();
  auto pr = parse_completion(req.body, opt_.limits);
  if (!pr.ok()) return error(res, 400, pr.status().message(), "/v1/completions");
  auto q = std::make_shared<CompletionRequest>(std::move(pr).value());
  const std::string id = fmt::format("cmpl-laya-{}", next_id_.fetch_add(1));
  SuggestOptions so;
  so.max_tokens = static_cast<int>(q->max_tokens);
  so.sampling = q->sampling;
  if (!q->stream) {
    auto out = run_suggestion(sessions_, q->session, q->prompt + q->suffix, q->prompt.size(), so, q->stop, 0, {}, t0);
    if (!out.ok())
      return error(res, out.status().code() == StatusCode::kInvalidArgument ? 400 : 500, out.status().message(),
                   "/v1/completions");
    if (out->served.superseded)
      return error(res, 409, "superseded by a newer request on the same document", "/v1/completions");
    metrics_.suggestion(out->served.suggestion, out->request_ms);
    json j = completion_chunk(id, model_id(), out->content, finish_reason(*out));
    const int64_t n_prompt = out->served.suggestion.timings.tokens_reused + out->served.suggestion.timings.tokens_computed;
    const auto n_gen = static_cast<int64_t>(out->served.suggestion.tokens.size());
    j["usage"] = {{"prompt_tokens", n_prompt}, {"completion_tokens", n_gen}, {"total_tokens", n_prompt + n_gen}};
    return ok_json(res, dump(j), "/v1/completions");
  }
  // Server-sent events: one chunk per piece of text as it becomes final, a
  // last chunk with finish_reason, then "data: [DONE]". The suggestion runs in
  // the content provider (on this connection's thread, after the handler
  // returns); a client that goes away stops it at the next piece.
  metrics_.request("/v1/completions", 200);
  res.set_chunked_content_provider(
      "text/event-stream", [this, q, so, id, t0](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) { return sse_send(sink, j); };
        auto emit = [&](std::string_view text) { return send(completion_chunk(id, model_id(), std::string(text), nullptr)); };
        auto out = run_suggestion(sessions_, q->session, q->prompt + q->suffix, q->prompt.size(), so, q->stop, 0, emit, t0);
        if (!out.ok()) {
          send(json{{"error", {{"code", 400}, {"message", out.status().message()}, {"type", "invalid_request_error"}}}});
        } else if (out->served.superseded) {
          send(json{{"error", {{"code", 409}, {"message", "superseded by a newer request on the same document"},
                           {"type", "cancelled"}}}});
        } else {
          metrics_.suggestion(out->served.suggestion, out->request_ms);
          send(completion_chunk(id, model_id(), "", finish_reason(*out)));
        }
        sse_done(sink);
        return true;
      });
}

}  // namespace laya::server
