// `laya tokenize` and `laya detokenize`.
//   laya tokenize (-m MODEL.gguf | --tokenizer tokenizer.json) [--special] [--bos|--no-bos] [--eos|--no-eos] TEXT
//   laya tokenize ... --batch   < lines of {"text": ...}   → lines of {"ids": [...]}
//   laya detokenize (-m ... | --tokenizer ...) [--skip-special] [--json] --ids 1,2,3
#include <CLI/CLI.hpp>

#include "cli_parse.h"
#include "cli_util.h"
#include <fmt/format.h>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace laya::cli {

namespace {

int fail(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "laya %s: %s\n", cmd, msg.c_str());
  return 1;
}

Result<std::unique_ptr<tok::Tokenizer>> load(const std::string& model, const std::string& tokenizer) {
  if (!tokenizer.empty()) return tok::Tokenizer::from_path(tokenizer);
  if (!model.empty()) return tok::Tokenizer::from_path(model);
  if (const std::string def = default_model_path(); !def.empty()) return tok::Tokenizer::from_path(def);
  return Status(StatusCode::kInvalidArgument, "give -m MODEL.gguf or --tokenizer tokenizer.json");
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Text → token ids (a JSON array). BOS/EOS follow the tokenizer's default unless --bos/--no-bos."};
  app.footer("Example: laya tokenize \"def f(x):\"");
  app.name("laya tokenize");
  std::string model, tokenizer, text;
  bool special = false, bos = false, no_bos = false, eos = false, no_eos = false, batch = false;
  app.add_option("-m,--model", model, "GGUF model (its tokenizer.ggml.* metadata), tokenizer.json or a directory");
  app.add_option("--tokenizer", tokenizer, "Hugging Face tokenizer.json (tokenizer_config.json beside it is read too)");
  app.add_flag("--special", special, "parse special-token text such as <|endoftext|>");
  auto* o_bos = app.add_flag("--bos", bos, "add BOS");
  app.add_flag("--no-bos", no_bos, "do not add BOS")->excludes(o_bos);
  auto* o_eos = app.add_flag("--eos", eos, "add EOS");
  app.add_flag("--no-eos", no_eos, "do not add EOS")->excludes(o_eos);
  app.add_flag("--batch", batch, "read JSON lines {\"text\": ...} from stdin, write {\"ids\": [...]} per line");
  app.add_option("text", text, "the text to tokenize");
  if (auto rc = parse_args(app, argc, argv, "tokenize")) return *rc;
  if (!batch && app.count("text") == 0)
    return report_error("tokenize", Status(StatusCode::kInvalidArgument, "no text: pass TEXT (\"\" for none) or --batch"));
  if (batch && app.count("text") > 0)
    return report_error("tokenize", Status(StatusCode::kInvalidArgument, "TEXT and --batch: pass one (--batch reads stdin)"));
  if (Status st = check_utf8_arg("TEXT", text); !st.ok()) return report_error("tokenize", st);
  auto tr = load(model, tokenizer);
  if (!tr.ok()) return fail("tokenize", tr.status().to_string());
  const tok::Tokenizer& t = *tr.value();
  tok::EncodeOptions opt;
  opt.parse_special = special;
  if (bos) opt.add_bos = true;
  if (no_bos) opt.add_bos = false;
  if (eos) opt.add_eos = true;
  if (no_eos) opt.add_eos = false;
  if (!batch) {
    auto ids = t.encode(text, opt);
    if (!ids.ok()) return fail("tokenize", ids.status().to_string());
    std::printf("%s\n", ids_json(ids.value()).c_str());
    return 0;
  }
  std::ios::sync_with_stdio(false);
  std::string line, out;
  int errors = 0;
  size_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    // A bad line is reported on its own output line; the others still run.
    const std::string where = "stdin line " + std::to_string(lineno);
    auto j = parse_json(line, where);
    Result<std::string> text_in = j.ok() ? json_string(j.value(), "text", where) : Result<std::string>(j.status());
    if (!text_in.ok()) {
      const Status& bad = text_in.status();
      ++errors;
      nlohmann::json err = {{"error", bad.message()}};
      out = err.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fputc('\n', stdout);
      continue;
    }
    auto ids = t.encode(text_in.value(), opt);
    if (!ids.ok()) {
      ++errors;
      nlohmann::json err = {{"error", ids.status().to_string()}};
      out = err.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // the message may quote bad bytes
    } else {
      out = "{\"ids\":" + ids_json(ids.value()) + "}";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  if (errors) std::fprintf(stderr, "laya tokenize: %d input line(s) had errors\n", errors);
  return errors ? 1 : 0;
}

int cmd_detokenize(int argc, char** argv) {
  CLI::App app{"Token ids → text."};
  app.footer("Example: laya detokenize --ids 1,2,3");
  app.name("laya detokenize");
  std::string model, tokenizer, ids_s;
  bool skip_special = false, as_json = false;
  app.add_option("-m,--model", model, "GGUF model, tokenizer.json or a directory");
  app.add_option("--tokenizer", tokenizer, "Hugging Face tokenizer.json");
  app.add_option("--ids", ids_s, "comma-separated token ids (or a JSON array)")->required();
  app.add_flag("--skip-special", skip_special, "leave out control tokens (BOS, EOS, ...)");
  app.add_flag("--json", as_json, "print the text as a JSON string");
  if (auto rc = parse_args(app, argc, argv, "detokenize")) return *rc;
  auto ids = parse_id_list("--ids", ids_s, 0, INT32_MAX);  // before the tokenizer is loaded: a typo fails at once
  if (!ids.ok()) return report_error("detokenize", ids.status());
  auto tr = load(model, tokenizer);
  if (!tr.ok()) return fail("detokenize", tr.status().to_string());
  const tok::Tokenizer& t = *tr.value();
  for (size_t i = 0; i < ids->size(); ++i)
    if ((*ids)[i] >= t.n_vocab())
      return report_error("detokenize", Status(StatusCode::kInvalidArgument,
                                               fmt::format("--ids: token {} (item {}) is out of range: the vocabulary has {} tokens [0, {}]",
                                                           (*ids)[i], i + 1, t.n_vocab(), t.n_vocab() - 1)));
  tok::DecodeOptions dopt;
  dopt.skip_special = skip_special;
  std::string text = t.decode(ids.value(), dopt);
  if (as_json) {
    std::string s = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", s.c_str());
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

}  // namespace laya::cli
