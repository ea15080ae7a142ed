// Streaming detokenizer, incremental EditTokenizer (trace replay against a full
// tokenization after every event), bad input and malformed tokenizer files, CLI.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

using laya::tok::EditTokenizer;
using laya::tok::EncodeOptions;
using laya::tok::StreamingDetokenizer;
using laya::tok::Tokenizer;
using json = nlohmann::json;

namespace {

const Tokenizer* load_cached(const std::string& path) { return laya::test::cached_tokenizer(path); }

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

std::vector<std::string> tokenizer_paths(const std::string& fx) {
  return {fx + "/tokenizer/hf/llama3/tokenizer.json", fx + "/tokenizer/hf/qwen3/tokenizer.json",
          fx + "/tokenizer/hf/mistral/tokenizer.json", fx + "/tokenizer/llamacpp/ggml-vocab-llama-bpe.gguf",
          fx + "/tokenizer/llamacpp/ggml-vocab-qwen2.gguf", fx + "/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf",
          fx + "/tokenizer/llamacpp/ggml-vocab-gpt-2.gguf"};
}

}  // namespace

// Every string of the corpus, fed one id at a time: the pieces are complete
// UTF-8 and concatenate to decode(ids).
TEST(TokenizerStreaming, CorpusIdsOneAtATime) {
  LAYA_REQUIRE_FIXTURES(fx);
  json corpus = json::parse(laya::test::read_text_file(fx + "/tokenizer/vectors/corpus.json"));
  for (const auto& path : tokenizer_paths(fx)) {
    const Tokenizer* tok = load_cached(path);
    ASSERT_NE(tok, nullptr);
    int n = 0, ok = 0;
    for (const auto& s : corpus) {
      std::string text = s;
      auto ids = tok->encode(text, EncodeOptions{false, false, std::nullopt});
      ASSERT_TRUE(ids.ok());
      StreamingDetokenizer sd(*tok);
      std::string acc;
      bool all_valid = true;
      for (int32_t id : ids.value()) {
        std::string piece = sd.push(id);
        if (!valid_utf8(piece)) all_valid = false;
        acc += piece;
      }
      acc += sd.finish();
      ++n;
      std::string want = tok->decode(ids.value());
      if (acc == want && all_valid) ++ok;
      else
        ADD_FAILURE() << path << ": streaming " << json(text).dump() << " → "
                      << json(acc).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    std::printf("[tokenizer] streaming %s: %d/%d\n", path.substr(path.rfind("/fixtures/") + 10).c_str(), ok, n);
  }
}

TEST(TokenizerStreaming, HoldsIncompleteCharacter) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Tokenizer* tok = load_cached(fx + "/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  // "€" = E2 82 AC as three byte-fallback tokens.
  auto b = [&](const char* t) { return tok->find_token(t).value_or(-1); };
  int32_t e2 = b("<0xE2>"), x82 = b("<0x82>"), xac = b("<0xAC>");
  ASSERT_GE(e2, 0);
  StreamingDetokenizer sd(*tok);
  EXPECT_EQ(sd.push(e2), "");
  EXPECT_EQ(sd.push(x82), "");
  EXPECT_EQ(sd.pending_bytes(), 2u);
  EXPECT_EQ(sd.push(xac), "\xE2\x82\xAC");
  // SentencePiece leading space: the first "▁Hello" loses its space, later ones keep it.
  StreamingDetokenizer s2(*tok);
  int32_t hello = b("\xE2\x96\x81Hello");
  ASSERT_GE(hello, 0);
  EXPECT_EQ(s2.push(hello), "Hello");
  EXPECT_EQ(s2.push(hello), " Hello");
}

// Replays every event of every trace through EditTokenizer; after each event the
// ids must equal a full tokenization of the document.
TEST(TokenizerEdit, TraceReplayEqualsFullTokenization) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::vector<std::string> traces = {"en_meeting_notes", "py_bisect", "zh_meeting_memo"};
  for (const auto& path : tokenizer_paths(fx)) {
    const Tokenizer* tok = load_cached(path);
    ASSERT_NE(tok, nullptr);
    for (const auto& tr : traces) {
      std::ifstream in(fx + "/traces/" + tr + ".jsonl");
      ASSERT_TRUE(in) << tr;
      std::string line;
      std::getline(in, line);
      json header = json::parse(line);
      EditTokenizer et(*tok);
      ASSERT_TRUE(et.set_text("").ok());
      int events = 0, compared = 0, equal = 0, incremental = 0;
      size_t max_window = 0;
      // Equal to a full tokenization; when not, starts again from the full one.
      auto same_as_full = [&](EditTokenizer& e) {
        auto full = tok->encode(e.text(), EncodeOptions{false, false, std::nullopt});
        if (!full.ok()) return false;
        if (full.value() == e.ids()) return true;
        EXPECT_TRUE(e.set_text(e.text()).ok());
        return false;
      };
      while (std::getline(in, line)) {
        if (line.empty()) continue;
        json ev = json::parse(line);
        std::string op = ev["op"];
        laya::Status st;
        if (op == "insert" || op == "accept") st = et.edit_codepoints(ev["pos"], 0, ev["text"].get<std::string>());
        else if (op == "delete") st = et.edit_codepoints(ev["pos"], ev["n"], "");
        else continue;
        ASSERT_TRUE(st.ok()) << st.to_string();
        ++events;
        if (!et.last_was_full()) {
          ++incremental;
          max_window = std::max(max_window, et.last_retokenized_bytes());
        }
        if (events % laya::test::sanitizer_stride() == 0) {
          ++compared;
          if (same_as_full(et)) ++equal;
          else ADD_FAILURE() << path << " " << tr << " event " << events << " " << line << ": incremental ids differ";
        }
      }
      if (events % laya::test::sanitizer_stride() != 0) {  // the last event, always
        ++compared;
        if (same_as_full(et)) ++equal;
        else ADD_FAILURE() << path << " " << tr << " at the end: incremental ids differ";
      }
      EXPECT_EQ(equal, compared);
      // The document is complete: code points match the header.
      size_t cps = 0;
      for (unsigned char c : et.text()) cps += (c & 0xC0) != 0x80;
      EXPECT_EQ(cps, header["chars"].get<size_t>()) << tr;
      std::printf("[tokenizer] trace %s × %s: %d/%d compared (of %d events) equal, %d incremental (largest window %zu bytes)\n",
                  tr.c_str(), path.substr(path.rfind('/') + 1).c_str(), equal, compared, events, incremental, max_window);
    }
  }
}

// Random edits on a mixed document (also around special-token text and
// whitespace runs), compared with a full tokenization after every edit.
TEST(TokenizerEdit, RandomEditsEqualFullTokenization) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::vector<std::string> pieces = {"a", " ", "  ", "\n", "\r\n", "\t", "é", "中", "1", "23", "'s", "<|", "|>",
                                           "<|endoftext|>", "<think>", "<s>", "</s>", "<|end|>", "x", "Hello", " world", ".", "😀", "\u0301",
                                           "   ", "'", "ll", "\n\n", "def ", "_", "()", "e", "\u0327", "\u0323",
                                           "\u1100", "\u1161", "\u11A8", "\uAC00", "A\u030A", "\u212B", "\u00A0"};
  for (const auto& path : {fx + "/tokenizer/hf/qwen3/tokenizer.json", fx + "/tokenizer/hf/llama3/tokenizer.json",
                           fx + "/tokenizer/llamacpp/ggml-vocab-gpt-2.gguf", fx + "/tokenizer/hf/mistral/tokenizer.json",
                           fx + "/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf",
                           fx + "/tokenizer/llamacpp/ggml-vocab-phi-3.gguf"}) {
    const Tokenizer* tok = load_cached(path);
    ASSERT_NE(tok, nullptr);
    for (int variant = 0; variant < 4; ++variant) {
      const bool special = variant & 1;
      std::mt19937 rng(1234 + variant);
      EditTokenizer et(*tok, special);
      ASSERT_TRUE(et.set_text("Hello world, this is a test.\n").ok());
      for (int step = 0; step < static_cast<int>(::laya::test::sanitizer_scaled(3000)); ++step) {
        size_t cps = 0;
        for (unsigned char c : et.text()) cps += (c & 0xC0) != 0x80;
        size_t pos = rng() % (cps + 1);
        if (rng() % 4 == 0 && cps > 0) {
          size_t n = 1 + rng() % 3;
          if (pos + n > cps) n = cps - pos;
          ASSERT_TRUE(et.edit_codepoints(pos, n, "").ok());
        } else {
          ASSERT_TRUE(et.edit_codepoints(pos, 0, pieces[rng() % pieces.size()]).ok());
        }
        auto full = tok->encode(et.text(), EncodeOptions{special, false, std::nullopt});
        ASSERT_TRUE(full.ok());
        ASSERT_EQ(full.value(), et.ids()) << path << " step " << step << " special " << special << " text "
                                          << json(et.text()).dump(-1, ' ', false, json::error_handler_t::replace);
        if (et.text().size() > 3000) {
          ASSERT_TRUE(et.set_text(et.text().substr(0, 200)).ok());
        }
      }
    }
  }
}

TEST(TokenizerEdit, IdsBeforeTheEditAreKept) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Tokenizer* tok = load_cached(fx + "/tokenizer/hf/llama3/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  std::string doc;
  for (int i = 0; i < 500; ++i) doc += "The quick brown fox jumps over the lazy dog. ";
  EditTokenizer et(*tok);
  ASSERT_TRUE(et.set_text(doc).ok());
  size_t n0 = et.ids().size();
  ASSERT_TRUE(et.edit(doc.size(), 0, "x").ok());
  EXPECT_FALSE(et.last_was_full());
  EXPECT_LT(et.last_retokenized_bytes(), 16u);
  EXPECT_GE(et.first_changed(), n0 - 2);
}

// ---- bad input ----------------------------------------------------------------------------------
TEST(TokenizerBadInput, InvalidUtf8NeverCrashes) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string bad[] = {"\xff", "a\xc3", "\xe4\xb8", "\xed\xa0\x80", "ok\x80ok", std::string("\0x", 2),
                             "\xf4\x90\x80\x80", "\xc0\xaf"};
  for (const auto& path : tokenizer_paths(fx)) {
    const Tokenizer* tok = load_cached(path);
    ASSERT_NE(tok, nullptr);
    for (const auto& s : bad) {
      auto ids = tok->encode(s, EncodeOptions{false, false, std::nullopt});
      ASSERT_TRUE(ids.ok()) << path;
      EXPECT_FALSE(ids.value().empty());
      // Bytes are bytes (byte-level) or byte fallback (SPM): decoding gives the input back.
      std::string dec = tok->decode(ids.value());
      if (tok->model_type() == laya::tok::ModelType::kByteBpe) {
        EXPECT_EQ(dec, s) << path;
      }
    }
  }
}

TEST(TokenizerBadInput, MalformedTokenizerJson) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto r = Tokenizer::from_hf_json_text(text, "", "t.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error("{", "t.json");
  expect_error("[]", "t.json");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", "model.merges");
  expect_error(R"({"model": {"type": "BPE", "merges": []}})", "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})", "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})", "model.merges[0]");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})", "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "model.vocab");
  expect_error(R"({"model": {"type": "Unigram", "vocab": []}})", "model.type");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                  "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}})",
               "pre_tokenizer");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                  "normalizer": {"type": "Precompiled"}})",
               "normalizer");
  auto r = Tokenizer::from_hf_json("/nonexistent/tokenizer.json");
  EXPECT_FALSE(r.ok());
}

TEST(TokenizerBadInput, TinyTokenizerJson) {
  // a byte-level BPE built by hand: merges by rank
  std::string tj = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4, "Ġ": 5},
                       "merges": ["a b", ["ab", "c"]]},
                       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
                       "decoder": {"type": "ByteLevel"},
                       "added_tokens": [{"id": 6, "content": "<eos>", "special": true}]})";
  auto r = Tokenizer::from_hf_json_text(tj, R"({"eos_token": "<eos>"})", "tiny");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto& t = *r.value();
  auto ids = t.encode("abc ab<eos>", EncodeOptions{true, false, std::nullopt});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{4, 5, 2, 6}));
  auto ids2 = t.encode("ab<eos>", EncodeOptions{false, false, std::nullopt});
  ASSERT_TRUE(ids2.ok());
  EXPECT_EQ(t.eos_id(), 6);
  EXPECT_EQ(t.decode(ids.value()), "abc ab<eos>");
  EXPECT_EQ(t.decode(ids.value(), {true, true}), "abc ab");
}

// ---- CLI ----------------------------------------------------------------------------------------
static std::string run_cmd(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

TEST(TokenizerCli, TokenizeDetokenizeBatch) {
  LAYA_REQUIRE_CLI();
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string cli = LAYA_CLI_PATH;
  const std::string tj = fx + "/tokenizer/hf/mistral/tokenizer.json";
  int rc = 0;
  EXPECT_EQ(run_cmd(cli + " tokenize --tokenizer " + tj + " 'Hello world'", &rc), "[1,22557,1526]\n");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(run_cmd(cli + " tokenize --tokenizer " + tj + " --no-bos 'Hello world'", &rc), "[22557,1526]\n");
  EXPECT_EQ(run_cmd(cli + " detokenize --tokenizer " + tj + " --ids 1,22557,1526 --skip-special", &rc),
            "Hello world\n");
  const std::string gguf = fx + "/tokenizer/llamacpp/ggml-vocab-qwen2.gguf";
  std::string out = run_cmd("printf '{\"text\":\"Hello world\"}\\n{\"text\":\"<|endoftext|>\"}\\n' | " + cli +
                                " tokenize -m " + gguf + " --special --batch",
                            &rc);
  EXPECT_EQ(out, "{\"ids\":[9707,1879]}\n{\"ids\":[151643]}\n");
  EXPECT_EQ(rc, 0);
  run_cmd(cli + " tokenize --tokenizer /nonexistent.json x 2>/dev/null", &rc);
  EXPECT_NE(rc, 0);
}
