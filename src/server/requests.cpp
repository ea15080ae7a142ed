#include "server/requests.h"

#include <cmath>

#include <fmt/format.h>

#include "core/json.h"

namespace laya::server {
namespace {

using nlohmann::json;
constexpr std::string_view kWhere = "request";

Status bad(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }

// The checked accessors say kCorrupt (a file's wording); a request's error is the client's.
Status as_invalid(const Status& st) { return st.ok() ? st : bad(st.message()); }

Result<json> parse_object(std::string_view body, const RequestLimits& lim) {
  auto j = parse_json(body, "request body", lim.json);
  if (!j.ok()) return as_invalid(j.status());
  if (!j->is_object()) return bad(fmt::format("request body: expected a JSON object, got {}", json_type_name(*j)));
  return std::move(j).value();
}

// A string field no longer than `max` bytes (absent: `*out` unchanged).
Status opt_text(const json& o, std::string_view key, size_t max, std::string* out) {
  auto v = json_opt_string(o, key, kWhere);
  if (!v.ok()) return as_invalid(v.status());
  if (!v->has_value()) return Status::Ok();
  if ((*v)->size() > max)
    return bad(fmt::format("request: field \"{}\" holds {} bytes, more than the limit of {}", key, (*v)->size(), max));
  *out = std::move(**v);
  return Status::Ok();
}

// An optional string field kept as optional (absent or null: nullopt), at most `max` bytes.
Status opt_name(const json& o, std::string_view key, size_t max, std::optional<std::string>* out) {
  if (!o.contains(key) || o[std::string(key)].is_null()) return Status::Ok();
  std::string v;
  LAYA_TRY(opt_text(o, key, max, &v));
  *out = std::move(v);
  return Status::Ok();
}

Status opt_int(const json& o, std::string_view key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  auto v = json_opt_int(o, key, kWhere, lo, hi);
  if (!v.ok()) return as_invalid(v.status());
  if (v->has_value()) *out = **v;
  return Status::Ok();
}

Status opt_number(const json& o, std::string_view key, double lo, double hi, std::optional<double>* out) {
  if (!o.contains(key) || o[std::string(key)].is_null()) return Status::Ok();
  auto v = json_number(o, key, kWhere, lo, hi);
  if (!v.ok()) return as_invalid(v.status());
  *out = *v;
  return Status::Ok();
}

Status opt_bool(const json& o, std::string_view key, bool* out) {
  if (!o.contains(key) || o[std::string(key)].is_null()) return Status::Ok();
  auto v = json_bool(o, key, kWhere);
  if (!v.ok()) return as_invalid(v.status());
  *out = *v;
  return Status::Ok();
}

// A string or an array of strings (OpenAI's `stop` takes both).
Status string_list(const json& o, std::string_view key, size_t max_items, size_t max_bytes,
                   std::vector<std::string>* out) {
  const std::string k(key);
  if (!o.contains(k) || o[k].is_null()) return Status::Ok();
  const json& v = o[k];
  auto one = [&](const json& s, size_t i) -> Status {
    if (!s.is_string())
      return bad(fmt::format("request: field \"{}\"[{}] is {}, expected a string", key, i, json_type_name(s)));
    const auto& str = s.get_ref<const std::string&>();
    if (str.size() > max_bytes)
      return bad(fmt::format("request: field \"{}\"[{}] holds {} bytes, more than the limit of {}", key, i,
                             str.size(), max_bytes));
    out->push_back(str);
    return Status::Ok();
  };
  if (v.is_string()) return one(v, 0);
  if (!v.is_array())
    return bad(fmt::format("request: field \"{}\" is {}, expected a string or an array of strings", key,
                           json_type_name(v)));
  if (v.size() > max_items)
    return bad(fmt::format("request: field \"{}\" has {} items, more than the limit of {}", key, v.size(), max_items));
  for (size_t i = 0; i < v.size(); ++i) LAYA_TRY(one(v[i], i));
  return Status::Ok();
}

// top_k / top_p / min_p / temperature / seed / repeat_penalty, with llama.cpp's
// and OpenAI's bounds. The defaults are the caller's (greedy for /infill, OpenAI's for /v1).
Status sampling_fields(const json& o, SamplerParams* sp) {
  std::optional<double> d;
  LAYA_TRY(opt_number(o, "temperature", 0.0, 100.0, &d));
  if (d) sp->temperature = static_cast<float>(*d), d.reset();
  LAYA_TRY(opt_number(o, "top_p", 0.0, 1.0, &d));
  if (d) sp->top_p = *d <= 0 ? 1.0f : static_cast<float>(*d), d.reset();  // 0 would keep nothing: llama.cpp treats it as off
  LAYA_TRY(opt_number(o, "min_p", 0.0, 1.0, &d));
  if (d) sp->min_p = static_cast<float>(*d), d.reset();
  LAYA_TRY(opt_number(o, "repeat_penalty", 0.01, 100.0, &d));
  if (d) sp->repeat_penalty = static_cast<float>(*d), d.reset();
  std::optional<int64_t> i;
  LAYA_TRY(opt_int(o, "top_k", 0, 1 << 30, &i));
  if (i) sp->top_k = static_cast<int>(*i), i.reset();
  LAYA_TRY(opt_int(o, "seed", -1, INT64_MAX, &i));  // -1: llama.cpp's "random"
  if (i) sp->seed = *i < 0 ? 0x9E3779B97F4A7C15ull : static_cast<uint64_t>(*i);
  return Status::Ok();
}

Status extra_chunks(const json& o, const RequestLimits& lim, std::vector<ExtraChunk>* out) {
  if (!o.contains("input_extra") || o["input_extra"].is_null()) return Status::Ok();
  const json& v = o["input_extra"];
  if (!v.is_array())
    return bad(fmt::format("request: field \"input_extra\" is {}, expected an array of {{\"filename\": string, "
                           "\"text\": string}}", json_type_name(v)));
  if (v.size() > lim.max_extra_chunks)
    return bad(fmt::format("request: field \"input_extra\" has {} chunks, more than the limit of {}", v.size(),
                           lim.max_extra_chunks));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = fmt::format("request: input_extra[{}]", i);
    if (!v[i].is_object()) return bad(fmt::format("{}: expected an object, got {}", where, json_type_name(v[i])));
    ExtraChunk c{"tmp", {}};
    auto text = json_string(v[i], "text", where);
    if (!text.ok()) return as_invalid(text.status());
    if (text->size() > lim.max_text_bytes)
      return bad(fmt::format("{}: \"text\" holds {} bytes, more than the limit of {}", where, text->size(),
                             lim.max_text_bytes));
    c.text = std::move(text).value();
    auto name = json_opt_string(v[i], "filename", where);
    if (!name.ok()) return as_invalid(name.status());
    if (name->has_value()) c.filename = **name;
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

Status check_total(size_t total, const RequestLimits& lim) {
  if (total > lim.max_text_bytes)
    return bad(fmt::format("request: the texts hold {} bytes together, more than the limit of {}", total,
                           lim.max_text_bytes));
  return Status::Ok();
}

}  // namespace

Result<InfillRequest> parse_infill(std::string_view body, const RequestLimits& lim) {
  auto jr = parse_object(body, lim);
  if (!jr.ok()) return jr.status();
  const json& o = *jr;
  InfillRequest r;
  LAYA_TRY(opt_text(o, "input_prefix", lim.max_text_bytes, &r.input_prefix));
  LAYA_TRY(opt_text(o, "input_suffix", lim.max_text_bytes, &r.input_suffix));
  // llama.cpp's "prompt" may be tokens or mixed arrays; editors send a string.
  LAYA_TRY(opt_text(o, "prompt", lim.max_text_bytes, &r.prompt));
  LAYA_TRY(extra_chunks(o, lim, &r.input_extra));
  size_t total = r.input_prefix.size() + r.input_suffix.size() + r.prompt.size();
  for (const ExtraChunk& c : r.input_extra) total += c.text.size() + c.filename.size();
  LAYA_TRY(check_total(total, lim));
  std::optional<int64_t> n;
  LAYA_TRY(opt_int(o, "n_predict", -1, lim.max_predict, &n));
  if (n && *n >= 0) r.n_predict = *n;
  n.reset();
  LAYA_TRY(opt_int(o, "n", 1, lim.max_completions, &n));  // llama-server's alias of n_cmpl
  LAYA_TRY(opt_int(o, "n_cmpl", 1, lim.max_completions, &n));
  if (n) r.n_cmpl = *n;
  LAYA_TRY(opt_number(o, "t_max_predict_ms", -1.0, 1e9, &r.t_max_predict_ms));
  LAYA_TRY(opt_number(o, "t_max_prompt_ms", -1.0, 1e9, &r.t_max_prompt_ms));
  LAYA_TRY(sampling_fields(o, &r.sampling));
  LAYA_TRY(string_list(o, "samplers", 16, 32, &r.samplers));
  LAYA_TRY(string_list(o, "stop", lim.max_stop_strings, lim.max_stop_bytes, &r.stop));
  std::optional<int64_t> indent;
  LAYA_TRY(opt_int(o, "n_indent", 0, 1 << 20, &indent));
  r.n_indent = indent.value_or(0);
  LAYA_TRY(opt_bool(o, "stream", &r.stream));
  LAYA_TRY(opt_bool(o, "cache_prompt", &r.cache_prompt));
  LAYA_TRY(string_list(o, "response_fields", lim.max_response_fields, 256, &r.response_fields));
  LAYA_TRY(opt_name(o, "session", 256, &r.session));
  std::optional<int64_t> slot;
  LAYA_TRY(opt_int(o, "id_slot", -1, 1 << 20, &slot));
  r.id_slot = slot.value_or(-1);
  LAYA_TRY(opt_name(o, "model", 4096, &r.model));
  return r;
}

Result<CompletionRequest> parse_completion(std::string_view body, const RequestLimits& lim) {
  auto jr = parse_object(body, lim);
  if (!jr.ok()) return jr.status();
  const json& o = *jr;
  CompletionRequest r;
  r.sampling.temperature = 1.0f;  // OpenAI's documented default
  if (!o.contains("prompt")) return bad("request: missing field \"prompt\"");
  if (o["prompt"].is_array()) {
    // The API allows a batch of prompts; one suggestion engine serves one.
    if (o["prompt"].size() != 1 || !o["prompt"][0].is_string())
      return bad(fmt::format("request: field \"prompt\" is an array of {} items; laya serves one prompt (a string)",
                             o["prompt"].size()));
    json one = {{"prompt", o["prompt"][0]}};
    LAYA_TRY(opt_text(one, "prompt", lim.max_text_bytes, &r.prompt));
  } else {
    LAYA_TRY(opt_text(o, "prompt", lim.max_text_bytes, &r.prompt));
    if (!o["prompt"].is_string())
      return bad(fmt::format("request: field \"prompt\" is {}, expected a string", json_type_name(o["prompt"])));
  }
  LAYA_TRY(opt_text(o, "suffix", lim.max_text_bytes, &r.suffix));
  LAYA_TRY(check_total(r.prompt.size() + r.suffix.size(), lim));
  std::optional<int64_t> n;
  LAYA_TRY(opt_int(o, "max_tokens", 1, lim.max_predict, &n));
  if (n) r.max_tokens = *n;
  n.reset();
  LAYA_TRY(opt_int(o, "n", 1, lim.max_completions, &n));
  if (n) r.n = *n;
  LAYA_TRY(sampling_fields(o, &r.sampling));
  LAYA_TRY(string_list(o, "stop", 4, lim.max_stop_bytes, &r.stop));
  LAYA_TRY(opt_bool(o, "stream", &r.stream));
  LAYA_TRY(opt_name(o, "model", 4096, &r.model));
  LAYA_TRY(opt_name(o, "session", 256, &r.session));
  bool echo = false;
  LAYA_TRY(opt_bool(o, "echo", &echo));
  if (echo) return bad("request: field \"echo\": true is not supported (the suggestion is returned alone)");
  if (o.contains("logprobs") && !o["logprobs"].is_null())
    return bad("request: field \"logprobs\" is not supported");
  return r;
}

Result<ChatRequest> parse_chat(std::string_view body, const RequestLimits& lim) {
  auto jr = parse_object(body, lim);
  if (!jr.ok()) return jr.status();
  const json& o = *jr;
  ChatRequest r;
  r.sampling.temperature = 1.0f;  // OpenAI's documented default
  if (!o.contains("messages")) return bad("request: missing field \"messages\"");
  const json& ms = o["messages"];
  if (!ms.is_array() || ms.empty())
    return bad(fmt::format("request: field \"messages\" is {}, expected a non-empty array of {{\"role\", \"content\"}}",
                           ms.is_array() ? "an empty array" : json_type_name(ms)));
  if (ms.size() > 1024) return bad(fmt::format("request: {} messages, more than the limit of 1024", ms.size()));
  size_t total = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string where = fmt::format("request: messages[{}]", i);
    if (!ms[i].is_object()) return bad(fmt::format("{}: expected an object, got {}", where, json_type_name(ms[i])));
    ChatMessage m;
    auto role = json_string(ms[i], "role", where);
    if (!role.ok()) return as_invalid(role.status());
    m.role = std::move(role).value();
    const json* c = ms[i].contains("content") ? &ms[i]["content"] : nullptr;
    if (!c || c->is_null()) {
      // an assistant turn with tool calls only: no text
    } else if (c->is_string()) {
      m.content = c->get<std::string>();
    } else if (c->is_array()) {
      for (size_t k = 0; k < c->size(); ++k) {
        const json& part = (*c)[k];
        const std::string pw = fmt::format("{}.content[{}]", where, k);
        auto type = json_string(part, "type", pw);
        if (!type.ok()) return as_invalid(type.status());
        if (*type != "text") return bad(fmt::format("{}: part type \"{}\" is not supported (text only)", pw, *type));
        auto text = json_string(part, "text", pw);
        if (!text.ok()) return as_invalid(text.status());
        m.content += *text;
      }
    } else {
      return bad(fmt::format("{}: field \"content\" is {}, expected a string or an array of text parts", where,
                             json_type_name(*c)));
    }
    total += m.content.size();
    r.messages.push_back(std::move(m));
  }
  LAYA_TRY(check_total(total, lim));
  std::optional<int64_t> n;
  LAYA_TRY(opt_int(o, "max_tokens", 1, lim.max_predict, &n));
  if (n) r.max_tokens = *n;
  n.reset();
  LAYA_TRY(opt_int(o, "max_completion_tokens", 1, lim.max_predict, &n));
  if (n) r.max_tokens = *n;
  LAYA_TRY(opt_int(o, "n", 1, 1, &n));
  LAYA_TRY(sampling_fields(o, &r.sampling));
  LAYA_TRY(string_list(o, "stop", 4, lim.max_stop_bytes, &r.stop));
  LAYA_TRY(opt_bool(o, "stream", &r.stream));
  LAYA_TRY(opt_name(o, "model", 4096, &r.model));
  return r;
}

Result<TokenizeRequest> parse_tokenize(std::string_view body, const RequestLimits& lim) {
  auto jr = parse_object(body, lim);
  if (!jr.ok()) return jr.status();
  const json& o = *jr;
  TokenizeRequest r;
  if (!o.contains("content")) return bad("request: missing field \"content\"");
  LAYA_TRY(opt_text(o, "content", lim.max_text_bytes, &r.content));
  if (!o["content"].is_string())
    return bad(fmt::format("request: field \"content\" is {}, expected a string", json_type_name(o["content"])));
  LAYA_TRY(opt_bool(o, "add_special", &r.add_special));
  LAYA_TRY(opt_bool(o, "parse_special", &r.parse_special));
  LAYA_TRY(opt_bool(o, "with_pieces", &r.with_pieces));
  return r;
}

Result<DetokenizeRequest> parse_detokenize(std::string_view body, const RequestLimits& lim, int64_t n_vocab) {
  auto jr = parse_object(body, lim);
  if (!jr.ok()) return jr.status();
  const json& o = *jr;
  if (!o.contains("tokens")) return bad("request: missing field \"tokens\"");
  const json& v = o["tokens"];
  if (!v.is_array())
    return bad(fmt::format("request: field \"tokens\" is {}, expected an array of token ids", json_type_name(v)));
  if (v.size() > lim.max_tokens_in)
    return bad(fmt::format("request: field \"tokens\" has {} ids, more than the limit of {}", v.size(),
                           lim.max_tokens_in));
  DetokenizeRequest r;
  r.tokens.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer())
      return bad(fmt::format("request: field \"tokens\"[{}] is {}, expected an integer", i, json_type_name(v[i])));
    // Unsigned first: an id past int64 must not wrap into a small one.
    const bool in_range = v[i].is_number_unsigned() ? v[i].get<uint64_t>() < static_cast<uint64_t>(n_vocab)
                                                    : v[i].get<int64_t>() >= 0 && v[i].get<int64_t>() < n_vocab;
    if (!in_range)
      return bad(fmt::format("request: field \"tokens\"[{}] is {}, expected a token id in [0, {})", i, v[i].dump(),
                             n_vocab));
    const int64_t id = v[i].get<int64_t>();
    r.tokens.push_back(static_cast<int32_t>(id));
  }
  return r;
}

}  // namespace laya::server
