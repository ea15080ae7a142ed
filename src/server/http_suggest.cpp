// The suggestion endpoints of laya serve: /infill (llama.cpp's) and
// /v1/completions (OpenAI's), both a Session suggestion on the document the
// request describes (server_sessions.h routes it).
#include <algorithm>
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
Result<Outcome> run_suggestion(ServerSessions& sessions, const RequestFrom& from, std::string_view doc,
                    size_t cursor, const SuggestOptions& so, const std::vector<std::string>& stop, int64_t n_indent,
                    const std::function<bool(std::string_view)>& emit, Clock::time_point t0,
                    const std::string_view* line_above = nullptr) {
  StopStream stream;
  stream.reset(&stop, n_indent, StopStream::Sink::of(emit));
  if (line_above) stream.stop_repeated_lines(*line_above);
  auto on_piece = [&](std::string_view piece) { return stream.push(piece); };
  auto r = sessions.suggest(from, doc, cursor, so, on_piece);
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


// The temperature completions 2..n are drawn at: the request's where it
// samples, else llama-server's default.
float alternative_temperature(float requested) { return requested > 0 ? requested : 0.8f; }

// Completions 2..n of a request (n_cmpl, n) on the session the first was made
// on, whose prompt that one left cached: each costs its own generation only.
// They are drawn with the request's sampling where it samples (seed + i), else
// at llama-server's default temperature, 0.8, with the request's top-k / top-p
// (what llama.vscode's alternatives get from llama-server). A draw whose text
// an earlier completion already has is drawn again, at most kDraws times, so
// that a confident model does not answer the same text n times (llama.vscode
// keeps distinct texts only). They take drafted tokens (the first completion's
// among them) by speculative sampling's rule, and all end by the first one's
// deadline and by twice the time the first took, counted from the request's
// start: an alternative may be shorter than the first, never the wait longer.
std::vector<Outcome> alternatives(ServerSessions& sessions, RequestFrom from, std::string_view doc, size_t cursor,
                                  SuggestOptions so, const Outcome& first, int64_t n,
                                  const std::vector<std::string>& stop, int64_t n_indent, Clock::time_point t0,
                                  std::optional<double> budget_ms, const std::string_view* line_above) {
  constexpr int kDraws = 3;
  from.alternative = true;
  so.sampling.temperature = alternative_temperature(so.sampling.temperature);
  so.draft_sampled = true;
  // At most as long again as the first took: asking for n completions at most
  // doubles the wait for the first (measured with llama.vscode's stream: three
  // whole generations took the p50 round trip from 52 to 190 ms).
  double end_ms = 2 * first.request_ms;
  if (budget_ms) end_ms = std::min(end_ms, *budget_ms);
  so.deadline = Deadline(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(end_ms)));
  std::vector<Outcome> out;
  uint64_t seed = so.sampling.seed;
  for (int64_t i = 1; i < n; ++i) {
    for (int draw = 0; draw < kDraws; ++draw) {
      so.sampling.seed = ++seed;
      auto r = run_suggestion(sessions, from, doc, cursor, so, stop, n_indent, {}, t0, line_above);
      if (!r.ok() || r->served.superseded) return out;  // a newer request took the session: no more
      const bool repeat = r->content == first.content ||
                          std::any_of(out.begin(), out.end(), [&](const Outcome& o) { return o.content == r->content; });
      if (!repeat || draw + 1 == kDraws) {
        out.push_back(std::move(r).value());
        break;
      }
    }
  }
  return out;
}

// One completion in /infill's response (llama.cpp's fields, then laya's).
json infill_json(const InfillRequest& q, const SuggestOptions& so, const Outcome& o, int index, bool prepare_only,
                 const std::string& model, int64_t n_ctx) {
  const Suggestion& s = o.served.suggestion;
  json full = {{"index", index},
               {"content", o.content},
               {"tokens", prepare_only ? std::vector<int32_t>{} : s.tokens},
               {"id_slot", q.id_slot >= 0 ? q.id_slot : static_cast<int64_t>(o.served.session_index)},
               {"stop", true},
               {"model", model},
               {"tokens_predicted", prepare_only ? 0 : s.tokens.size()},
               {"tokens_evaluated", s.timings.tokens_reused + s.timings.tokens_computed},
               {"generation_settings",
                {{"n_ctx", n_ctx},
                 {"n_predict", so.max_tokens},
                 {"temperature", index == 0 ? so.sampling.temperature : alternative_temperature(so.sampling.temperature)},
                 {"top_k", so.sampling.top_k},
                 {"top_p", so.sampling.top_p},
                 {"model", model}}},
               {"has_new_line", o.content.find('\n') != std::string::npos},
               {"truncated", s.window_start_cp > 0},  // the window starts after the document's start
               {"stop_type", o.stop_type},
               {"stopping_word", o.stopping_word},
               {"tokens_cached", s.tokens_cached},
               {"timings", timings_json(s)},
               {"laya",
                {{"session", o.served.session_index},
                 {"new_session", o.served.new_session},
                 {"typed_through", s.typed_through},
                 {"cut_by_deadline", s.cut_by_deadline},
                 {"fim", s.fim},
                 {"healed_bytes", s.healed_bytes},
                 {"request_ms", o.request_ms}}}};
  if (o.served.superseded) {
    // A newer request on this document took over: an answer, not a hang, and
    // an error field saying so (the content is empty: this text is stale).
    full["content"] = "";
    full["error"] = {{"code", 409}, {"message", "superseded by a newer request on the same document"},
                     {"type", "cancelled"}};
  }
  json body = pick_fields(q.response_fields, full);
  if (o.served.superseded && !q.response_fields.empty()) body["error"] = full["error"];
  return body;
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
  const RequestFrom from = request_from(req, q.session, doc.size());
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
  const std::string_view* line_above = opt_.keep_repeated_lines ? nullptr : &above;
  auto out = run_suggestion(sessions_, from, doc, cursor, so, q.stop, q.n_indent, {}, t0, line_above);
  if (!out.ok()) {
    const int code = out.status().code() == StatusCode::kInvalidArgument ? 400 : 500;
    return error(res, code, out.status().message(), "/infill");
  }
  std::vector<Outcome> outs;
  outs.push_back(std::move(out).value());
  if (q.n_cmpl > 1 && !prepare_only && !outs[0].served.superseded) {
    std::optional<double> budget;
    if (q.t_max_predict_ms && *q.t_max_predict_ms > 0) budget = *q.t_max_predict_ms;
    for (Outcome& o : alternatives(sessions_, from, doc, cursor, so, outs[0], q.n_cmpl, q.stop, q.n_indent, t0,
                                   budget, line_above))
      outs.push_back(std::move(o));
  }
  json body = json::array();
  for (size_t i = 0; i < outs.size(); ++i) {
    Outcome& o = outs[i];
    if (prepare_only) o.content.clear();
    metrics_.suggestion(o.served.suggestion, o.request_ms);
    body.push_back(infill_json(q, so, o, static_cast<int>(i), prepare_only, model_id(),
                               sessions_.model()->engine->options().n_ctx));
  }
  // llama.cpp's shape: one object for one completion, an array for n_cmpl > 1
  // (fewer than asked when a newer request on the document took over).
  ok_json(res, dump(q.n_cmpl > 1 ? body : body[0]), "/infill");
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
  const RequestFrom from = request_from(req, q->session);
  const std::string doc = q->prompt + q->suffix;
  if (q->stream && q->n > 1)
    return error(res, 400, fmt::format("request: \"n\": {} with \"stream\": true is not supported (one choice streams)", q->n),
                 "/v1/completions");
  if (!q->stream) {
    auto out = run_suggestion(sessions_, from, doc, q->prompt.size(), so, q->stop, 0, {}, t0);
    if (!out.ok())
      return error(res, out.status().code() == StatusCode::kInvalidArgument ? 400 : 500, out.status().message(),
                   "/v1/completions");
    if (out->served.superseded)
      return error(res, 409, "superseded by a newer request on the same document", "/v1/completions");
    std::vector<Outcome> outs;
    outs.push_back(std::move(out).value());
    for (Outcome& o : alternatives(sessions_, from, doc, q->prompt.size(), so, outs[0], q->n, q->stop, 0, t0, {}, nullptr))
      outs.push_back(std::move(o));
    json j = completion_chunk(id, model_id(), outs[0].content, finish_reason(outs[0]));
    int64_t n_gen = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      metrics_.suggestion(outs[i].served.suggestion, outs[i].request_ms);
      n_gen += static_cast<int64_t>(outs[i].served.suggestion.tokens.size());
      if (i > 0)
        j["choices"].push_back({{"text", outs[i].content}, {"index", i}, {"logprobs", nullptr},
                                {"finish_reason", finish_reason(outs[i])}});
    }
    const auto& t = outs[0].served.suggestion.timings;
    const int64_t n_prompt = t.tokens_reused + t.tokens_computed;
    j["usage"] = {{"prompt_tokens", n_prompt}, {"completion_tokens", n_gen}, {"total_tokens", n_prompt + n_gen}};
    return ok_json(res, dump(j), "/v1/completions");
  }
  // Server-sent events: one chunk per piece of text as it becomes final, a
  // last chunk with finish_reason, then "data: [DONE]". The suggestion runs in
  // the content provider (on this connection's thread, after the handler
  // returns); a client that goes away stops it at the next piece.
  metrics_.request("/v1/completions", 200);
  res.set_chunked_content_provider(
      "text/event-stream", [this, q, so, id, t0, from](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) { return sse_send(sink, j); };
        auto emit = [&](std::string_view text) { return send(completion_chunk(id, model_id(), std::string(text), nullptr)); };
        auto out = run_suggestion(sessions_, from, q->prompt + q->suffix, q->prompt.size(), so, q->stop, 0, emit, t0);
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
