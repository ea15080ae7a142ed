// The bodies of laya serve's requests, parsed and checked before any work.
//
// One parser per endpoint, each a pure function of the body's bytes (the fuzz
// target fuzz/server_request_fuzz.cpp drives them): malformed JSON, a field of
// the wrong type, invalid UTF-8, a negative or huge number, too many items —
// every one is kInvalidArgument with a message that names the field, the value
// found and what was expected, which the server answers with a 400. Nothing is
// allocated from a number in the body before it is checked against its limit.
//
// Field names and meanings follow the clients that send them:
//   /infill          llama.cpp's server, as llama.vim and llama.vscode send it
//                    (their request bodies are in tests/server_test.cpp);
//   /v1/completions  OpenAI's legacy completions API (the `openai` package);
//   /tokenize, /detokenize  llama.cpp's server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "sampling/sampler.h"
#include "session/chat.h"
#include "session/stop_strings.h"

namespace laya::server {

// Limits on what a request may ask for. A body past max_body_bytes is refused
// by the HTTP layer before it is parsed (413).
struct RequestLimits {
  size_t max_body_bytes = 8u << 20;      // 8 MiB: a whole source file plus llama.vim's ring of chunks
  size_t max_text_bytes = 4u << 20;      // any one text field
  size_t max_extra_chunks = 256;         // input_extra items (llama.vim sends at most ring_n_chunks = 16..64)
  size_t max_stop_strings = 16;          // OpenAI allows 4; llama.cpp any number
  size_t max_stop_bytes = 256;           // per stop string
  size_t max_response_fields = 64;
  int64_t max_predict = 1024;            // n_predict / max_tokens (the context is checked too, at run time)
  // n_cmpl / n: completions per request (llama-server caps it at its slots,
  // --parallel, default 4; each costs a generation here)
  int64_t max_completions = 4;
  size_t max_tokens_in = 1u << 20;       // /detokenize ids
  // Depth and value count, checked before the body is parsed (core/json.h).
  JsonBounds json{64, (1u << 20) + 64};  // /detokenize's max_tokens_in ids fit
};

struct ExtraChunk {
  std::string filename;  // "tmp" when absent, as llama.cpp
  std::string text;
};

// POST /infill (llama.cpp). The document the editor shows is
//   input_prefix + prompt | input_suffix      (| = the cursor)
// llama.vim sends the lines before the cursor's line as input_prefix, the
// cursor's line up to the cursor as prompt, the rest as input_suffix.
struct InfillRequest {
  std::string input_prefix, input_suffix, prompt;
  std::vector<ExtraChunk> input_extra;
  // llama.cpp's default is -1 (until the context is full); laya caps an absent
  // or negative n_predict at the server's --n-predict (a suggestion, not an essay).
  std::optional<int64_t> n_predict;
  // n_cmpl (llama.cpp's "n" too): this many distinct completions, answered as
  // an array when > 1 (llama.vscode asks for 3; see http_suggest.cpp).
  int64_t n_cmpl = 1;
  std::optional<double> t_max_predict_ms;  // > 0: the session's deadline for the decode steps
  std::optional<double> t_max_prompt_ms;   // accepted, not enforced (llama.cpp does not either)
  SamplerParams sampling;                  // greedy unless temperature > 0 is given
  std::vector<std::string> samplers;       // accepted and checked; laya's order is fixed
  std::vector<std::string> stop;
  int64_t n_indent = 0;      // a new line must be indented at least this much, else the suggestion ends before it
  bool stream = false;       // refused for /infill (neither plugin streams it)
  bool cache_prompt = true;  // accepted; sessions always reuse what is cached
  std::vector<std::string> response_fields;  // "a/b" paths; the response holds only these, flattened as llama.cpp does
  std::optional<std::string> session;        // laya's own: a named session (else routed by longest common prefix)
  int64_t id_slot = -1;                      // accepted and echoed; see server_sessions.h for why it does not route
  std::optional<std::string> model;
};

// POST /v1/completions (OpenAI). The document is prompt | suffix.
struct CompletionRequest {
  std::string prompt, suffix;
  std::optional<std::string> model;
  int64_t max_tokens = 16;  // OpenAI's default
  int64_t n = 1;            // choices
  SamplerParams sampling;   // temperature 1 and top_p 1 by default, as OpenAI documents
  std::vector<std::string> stop;
  bool stream = false;
  std::optional<std::string> session;
};

// POST /v1/chat/completions (OpenAI). A content may be a string or an array
// of {"type": "text", "text": ...} parts (joined).
struct ChatRequest {
  std::vector<ChatMessage> messages;
  int64_t max_tokens = 256;  // max_tokens or max_completion_tokens
  SamplerParams sampling;    // OpenAI's defaults: temperature 1, top_p 1
  std::vector<std::string> stop;
  bool stream = false;
  std::optional<std::string> model;
};

// POST /tokenize and /detokenize (llama.cpp's fields).
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};

Result<InfillRequest> parse_infill(std::string_view body, const RequestLimits& lim);
Result<CompletionRequest> parse_completion(std::string_view body, const RequestLimits& lim);
Result<ChatRequest> parse_chat(std::string_view body, const RequestLimits& lim);
Result<TokenizeRequest> parse_tokenize(std::string_view body, const RequestLimits& lim);
// Ids are checked against n_vocab here (a token id past the vocabulary is the
// client's error, not the tokenizer's).
Result<DetokenizeRequest> parse_detokenize(std::string_view body, const RequestLimits& lim, int64_t n_vocab);

}  // namespace laya::server
