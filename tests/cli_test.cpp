// The `laya` binary on good and bad model files: exit codes and messages.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "test_util.h"

namespace laya {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int code = -1;
  std::string out;  // stdout + stderr
};

CliResult run(const std::string& args) {
  CliResult r;
  const std::string cmd = std::string(LAYA_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

class CliFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laya_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

std::string read_all(const std::string& p) { return test::read_text_file(p); }

TEST_F(CliFiles, MissingFile) {
  CliResult r = run("info -m /nonexistent/model.gguf");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent/model.gguf"), std::string::npos) << r.out;
}

// `laya info` names the family and what of it the file uses.
TEST_F(CliFiles, InfoNamesTheFamily) {
  const std::string fam = std::string(LAYA_SOURCE_DIR) + "/tests/fixtures/families/";
  CliResult r = run("info -m " + fam + "granite/granite-q8_0.gguf");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("architecture:  granite"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("residual ×0.22; logits ÷8"), std::string::npos) << r.out;
  r = run("info -m " + fam + "phi3/hf");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("architecture:  phi3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fused q/k/v"), std::string::npos) << r.out;
  r = run("info -m " + fam + "starcoder2/starcoder2-f16.gguf");
  EXPECT_NE(r.out.find("LayerNorm with bias"), std::string::npos) << r.out;
}

TEST_F(CliFiles, WrongMagic) {
  std::string p = write("bad.gguf", std::string("NOPE") + std::string(60, '\0'));
  CliResult r = run("info -m " + p);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not a GGUF file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(p), std::string::npos) << r.out;
}

TEST_F(CliFiles, TruncatedRealFile) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string bytes = read_all(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf");
  for (size_t cut : {size_t{3}, size_t{100}, size_t{5000}, bytes.size() / 2, bytes.size() - 1}) {
    std::string p = write("cut.gguf", bytes.substr(0, cut));
    CliResult r = run("info -m " + p);
    EXPECT_NE(r.code, 0) << "cut at " << cut;
    EXPECT_LT(r.code, 100) << "crashed at cut " << cut << ": " << r.out;
    EXPECT_NE(r.out.find("cut.gguf"), std::string::npos) << r.out;
    EXPECT_TRUE(r.out.find("truncated") != std::string::npos || r.out.find("past the end") != std::string::npos ||
                r.out.find("too small") != std::string::npos)
        << "cut " << cut << ": " << r.out;
  }
}

TEST_F(CliFiles, UnknownArchitecture) {
  LAYA_REQUIRE_FIXTURES(fx);
  std::string bytes = read_all(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf");
  const std::string key = "general.architecture";
  size_t k = bytes.find(key);
  ASSERT_NE(k, std::string::npos);
  size_t v = k + key.size() + 4 + 8;  // value type u32, string length u64
  ASSERT_EQ(bytes.substr(v, 5), "llama");
  bytes.replace(v, 5, "gpt_x");
  CliResult r = run("info -m " + write("arch.gguf", bytes));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("general.architecture = 'gpt_x' is not supported"), std::string::npos) << r.out;
}

// An HF folder whose config disagrees with its weights.
TEST_F(CliFiles, HfConfigMismatchNamesTensorAndHint) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string src = fx + "/ref-models/llama-tiny/hf";
  std::string cfg = read_all(src + "/config.json");
  size_t p = cfg.find("\"num_key_value_heads\": 2");
  ASSERT_NE(p, std::string::npos);
  cfg.replace(p, 24, "\"num_key_value_heads\": 4");
  write("hf/config.json", cfg);
  fs::create_symlink(src + "/model.safetensors", dir_ / "hf" / "model.safetensors");
  CliResult r = run("info -m " + (dir_ / "hf").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tensor 'blk.0.attn_k.weight': shape [256, 64], expected [256, 128] (n_head_kv mismatch?)"),
            std::string::npos)
      << r.out;
}

TEST_F(CliFiles, HfMissingTensor) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string src = fx + "/ref-models/llama-tiny/hf";
  std::string cfg = read_all(src + "/config.json");
  size_t p = cfg.find("\"num_hidden_layers\": 4");
  ASSERT_NE(p, std::string::npos);
  cfg.replace(p, 22, "\"num_hidden_layers\": 5");
  write("hf/config.json", cfg);
  fs::create_symlink(src + "/model.safetensors", dir_ / "hf" / "model.safetensors");
  CliResult r = run("info -m " + (dir_ / "hf").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tensor 'blk.4.attn_norm.weight' is missing"), std::string::npos) << r.out;
}

TEST_F(CliFiles, MalformedConfigJson) {
  write("hf/config.json", "{\"model_type\": \"llama\", \"hidden_size\": 256,,}");
  CliResult r = run("info -m " + (dir_ / "hf").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("config.json: malformed JSON at byte"), std::string::npos) << r.out;
}

TEST_F(CliFiles, MalformedSafetensorsHeader) {
  LAYA_REQUIRE_FIXTURES(fx);
  write("hf/config.json", read_all(fx + "/ref-models/llama-tiny/hf/config.json"));
  std::string hdr = "{\"a\": [1,2";
  std::string bytes(8, '\0');
  uint64_t n = hdr.size();
  std::memcpy(bytes.data(), &n, 8);
  write("hf/model.safetensors", bytes + hdr);
  CliResult r = run("info -m " + (dir_ / "hf").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("model.safetensors: header is not a valid JSON object"), std::string::npos) << r.out;
}

TEST_F(CliFiles, UnsupportedHfModelType) {
  write("hf/config.json", "{\"model_type\": \"gpt2\"}");
  CliResult r = run("info -m " + (dir_ / "hf").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("model_type 'gpt2' is not supported"), std::string::npos) << r.out;
}

TEST_F(CliFiles, LogitsWritesNpyOfTheRightShape) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string model = fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf";
  const std::string out = (dir_ / "o.npy").string();
  CliResult r = run("logits -m " + model + " --tokens 1,2,3 --all-positions -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  test::NpyArray a;
  std::string err;
  ASSERT_TRUE(test::read_npy_f32(out, &a, &err)) << err;
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 512}));
  test::NpyArray b;
  r = run("logits -m " + model + " --tokens 1,2,3 --incremental -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(test::read_npy_f32(out, &b, &err)) << err;
  EXPECT_EQ(b.shape, (std::vector<int64_t>{512}));
  // Decode steps of a Q8_0 file run the packed int8 kernels (~15-bit
  // activations), a prefill the float ones: equal to ~1e-3.
  for (int i = 0; i < 512; ++i) EXPECT_NEAR(b.data[static_cast<size_t>(i)], a.data[static_cast<size_t>(2 * 512 + i)], 2e-3);
}

TEST_F(CliFiles, BadTokenListAndOutOfRangeToken) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string model = fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf";
  CliResult r = run("logits -m " + model + " --tokens 1,x,3 -o " + (dir_ / "o.npy").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tokens: item 2 of '1,x,3': 'x' is not an integer"), std::string::npos) << r.out;
  r = run("logits -m " + model + " --tokens 1,99999 -o " + (dir_ / "o.npy").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("token 99999 at index 1 is out of range [0, 512)"), std::string::npos) << r.out;
}

// bench-typing reads traces with replay's loader: errors name the file, the
// line and the field, before the model is loaded.
TEST_F(CliFiles, BenchTypingTraceErrorsNameLineAndField) {
  const std::string model = std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf";
  const std::string head =
      "{\"trace\":\"t\",\"final_sha256\":\"" + std::string(64, '0') + "\"}\n{\"t_ms\":1,\"op\":\"insert\",\"pos\":0,\"text\":\"hello world\"}\n";
  // A typed field of the wrong type was an uncaught nlohmann type_error (abort).
  CliResult r = run("bench-typing -m " + model + " " + write("n.jsonl", head + "{\"t_ms\":2,\"op\":\"delete\",\"pos\":2,\"n\":\"3\"}\n"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("n.jsonl:3: field \"n\" is string, expected an integer"), std::string::npos) << r.out;
  r = run("bench-typing -m " + model + " " + write("bad.jsonl", head + "{\"op\": \n"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("bad.jsonl:3: malformed JSON at byte"), std::string::npos) << r.out;
  r = run("bench-typing -m " + model + " " + (dir_ / "none.jsonl").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("none.jsonl: cannot open"), std::string::npos) << r.out;
  r = run("bench-typing -m " + model + " " + write("nohead.jsonl", "{\"t_ms\":1,\"op\":\"insert\",\"pos\":0,\"text\":\"a\"}\n"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("nohead.jsonl:1: expected the header line"), std::string::npos) << r.out;
  // The rebuilt document must match the header's final_sha256.
  r = run("bench-typing -m " + model + " " + write("sha.jsonl", head));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("sha.jsonl: the rebuilt document's sha256 is"), std::string::npos) << r.out;
}

TEST_F(CliFiles, TokenizeBatchBadLineIsAnErrorLine) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string model = fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf";
  const std::string in = write("in.jsonl", "{\"text\":\"a\"}\n{\"text\": \n[1]\n{\"text\":\"b\"}\n");
  CliResult r = run("tokenize -m " + model + " --batch < " + in);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("stdin line 2: malformed JSON at byte"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stdin line 3: expected a JSON object, got array"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 input line(s) had errors"), std::string::npos) << r.out;
  size_t ids = 0;
  for (size_t p = r.out.find("{\"ids\":"); p != std::string::npos; p = r.out.find("{\"ids\":", p + 1)) ++ids;
  EXPECT_EQ(ids, 2u) << r.out;
}

// A small trace: keystrokes, a backspace, a move away and back, an accept.
std::string synthetic_trace(const std::string& sha_override = "") {
  std::string events, doc;
  int t = 0;
  auto ev = [&](const std::string& body) { events += "{\"t_ms\":" + std::to_string(t += 7) + "," + body + "}\n"; };
  for (char c : std::string("def add(a, b):\n    return a")) {
    const std::string esc = c == '\n' ? "\\n" : std::string(1, c);
    ev("\"op\":\"insert\",\"pos\":" + std::to_string(doc.size()) + ",\"text\":\"" + esc + "\"");
    doc += c;
  }
  ev("\"op\":\"delete\",\"pos\":" + std::to_string(doc.size() - 1) + ",\"n\":1");
  doc.pop_back();
  ev("\"op\":\"insert\",\"pos\":" + std::to_string(doc.size()) + ",\"text\":\"a\"");
  doc += "a";
  ev("\"op\":\"move\",\"pos\":4");
  ev("\"op\":\"move\",\"pos\":" + std::to_string(doc.size()));
  ev("\"op\":\"accept\",\"pos\":" + std::to_string(doc.size()) + ",\"text\":\" + b\\n\"");
  doc += " + b\n";
  const std::string sha = sha_override.empty() ? sha256_hex(doc) : sha_override;
  return "{\"trace\":\"synth\",\"final_sha256\":\"" + sha + "\"}\n" + events;
}

TEST_F(CliFiles, ReplayFastVerifyOnTheDefaultModel) {
  const std::string model = std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf";
  const std::string trace = write("synth.jsonl", synthetic_trace());
  const std::string out = (dir_ / "r.json").string();
  CliResult r = run("replay -m " + model + " -t 2 --fast --verify " + trace + " --json " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("synth: 32 events, 0 mismatches"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_all(out), nullptr, false);
  ASSERT_TRUE(j.is_object()) << read_all(out);
  for (const auto* node : {&j, &j["traces"]["synth"]}) {
    for (const char* k : {"events", "mismatches", "allocations_after_warmup", "suggest_ms", "first_token_ms",
                          "tokens_computed_per_event", "free_keystrokes"})
      EXPECT_TRUE(node->contains(k)) << k;
    for (const char* k : {"p50", "p90", "p99", "p999", "max"}) {
      EXPECT_TRUE((*node)["suggest_ms"][k].is_number()) << k;
      EXPECT_TRUE((*node)["first_token_ms"][k].is_number()) << k;
    }
    for (const char* k : {"p50", "p99", "max"}) EXPECT_TRUE((*node)["tokens_computed_per_event"][k].is_number()) << k;
  }
  EXPECT_EQ(j["events"], 32);
  EXPECT_EQ(j["mismatches"], 0);
  EXPECT_TRUE(j["allocations_after_warmup"].is_null());
  EXPECT_LE(j["free_keystrokes"].get<int>(), 32);       // events answered from the last suggestion
  EXPECT_LE(j["accept_predicted_chars"].get<int>(), 5);  // at most the accept's " + b\n"
  EXPECT_LE(j["suggest_ms"]["p50"].get<double>(), j["suggest_ms"]["max"].get<double>());
}

// --suggestions-out: one JSON line per completed suggestion (all of them with
// --fast), in event order, with the text and the token ids; a second run
// replaces its own file, never another kind of file.
TEST_F(CliFiles, ReplaySuggestionsOutWritesEveryEvent) {
  const std::string model = std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf";
  const std::string trace = write("synth.jsonl", synthetic_trace());
  const std::string out = (dir_ / "s.jsonl").string();
  CliResult r = run("replay -m " + model + " -t 2 --fast " + trace + " --suggestions-out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string first = read_all(out);
  size_t n = 0;
  for (size_t b = 0, e; b < first.size(); b = e + 1, ++n) {
    e = first.find('\n', b);
    ASSERT_NE(e, std::string::npos);
    const auto j = nlohmann::json::parse(first.substr(b, e - b), nullptr, false);
    ASSERT_TRUE(j.is_object()) << first.substr(b, e - b);
    EXPECT_EQ(j["trace"], "synth");
    EXPECT_EQ(j["event"], n);
    EXPECT_TRUE(j["text"].is_string());
    EXPECT_TRUE(j["tokens"].is_array());
  }
  EXPECT_EQ(n, 32u);
  r = run("replay -m " + model + " -t 2 --fast " + trace + " --suggestions-out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_all(out), first);  // greedy: the same suggestions again
  r = run("replay -m " + model + " --fast " + trace + " --suggestions-out " + trace);
  EXPECT_EQ(r.code, 2) << r.out;  // a usage error, refused before any work
  EXPECT_NE(r.out.find("is also an input"), std::string::npos) << r.out;
}

// Bad traces fail before the model is loaded, naming the file (and the line).
TEST_F(CliFiles, ReplayBadTracesNameFileAndLine) {
  const std::string head = "{\"trace\":\"t\",\"final_sha256\":\"" + std::string(64, '0') + "\"}\n";
  const std::string ins = "{\"t_ms\":5,\"op\":\"insert\",\"pos\":0,\"text\":\"hello\"}\n";
  struct Case {
    std::string name, content, expect;
  };
  const std::vector<Case> cases = {
      {"empty.jsonl", "", "empty.jsonl: empty trace"},
      {"head.jsonl", head, "head.jsonl:1: the trace has a header but no events"},
      {"dec.jsonl", head + ins + "{\"t_ms\":4,\"op\":\"move\",\"pos\":1}\n", "dec.jsonl:3: t_ms 4 is before the previous event's 5"},
      {"type.jsonl", head + ins + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":1,\"n\":\"2\"}\n",
       "type.jsonl:3: field \"n\" is string, expected an integer"},
      {"range.jsonl", head + ins + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":3,\"n\":3}\n",
       "range.jsonl:3: delete of 3 at 3 is past the end of the document (5 code points)"},
      {"pos.jsonl", head + ins + "{\"t_ms\":6,\"op\":\"move\",\"pos\":6}\n", "pos.jsonl:3: pos 6 is past the end"},
      {"nohead.jsonl", ins, "nohead.jsonl:1: expected the header line"},
      {"json.jsonl", head + "{\"t_ms\": \n", "json.jsonl:2: malformed JSON at byte"},
  };
  for (const Case& c : cases) {
    CliResult r = run("replay --fast " + write(c.name, c.content));
    EXPECT_EQ(r.code, 1) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.name << ": " << r.out;
  }
  fs::create_directories(dir_ / "adir.jsonl");
  CliResult r = run("replay --fast " + (dir_ / "adir.jsonl").string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.code, 100) << r.out;
  EXPECT_NE(r.out.find((dir_ / "adir.jsonl").string()), std::string::npos) << r.out;
}

TEST_F(CliFiles, ReplayWrongFinalShaIsAnError) {
  const std::string model = std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf";
  const std::string trace = write("sha.jsonl", synthetic_trace(std::string(64, '0')));
  CliResult r = run("replay -m " + model + " -t 2 --fast " + trace);
  EXPECT_EQ(r.code, 1) << r.out;
  // Checked when the trace is read, before the model is loaded.
  EXPECT_NE(r.out.find(trace + ": the rebuilt document's sha256 is"), std::string::npos) << r.out;
}

// bench-typing on a session: today's keystroke figures plus replay's latency
// keys and the session options; --no-heal and --fim off are accepted.
TEST_F(CliFiles, BenchTypingOnSessionReportsLatencyKeys) {
  const std::string model = std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf";
  const std::string trace = write("synth.jsonl", synthetic_trace());
  const std::string doc_chars = "32";  // "def add(a, b):\n    return a + b\n"
  for (const std::string flags : {"", " --no-heal --fim off", " --fim spm --fim-suffix-tokens 16"}) {
    const std::string out = (dir_ / "b.json").string();
    CliResult r = run("bench-typing -m " + model + " -t 2 " + trace + " --json " + out + flags);
    ASSERT_EQ(r.code, 0) << flags << ": " << r.out;
    EXPECT_NE(r.out.find("synth"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("suggest_ms"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(read_all(out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << read_all(out);
    EXPECT_EQ(j["token_healing"], flags.find("--no-heal") == std::string::npos) << flags;
    EXPECT_EQ(j["fim"], flags.find("--fim off") != std::string::npos ? "off"
                        : flags.find("--fim spm") != std::string::npos ? "spm" : "psm") << flags;
    EXPECT_EQ(j["fim_suffix_tokens"], flags.find("16") != std::string::npos ? 16 : 32) << flags;
    for (const auto* node : {&j, &j["traces"]["synth"]}) {
      for (const char* k : {"chars", "keystrokes", "keystroke_savings", "suggestions_shown", "accepted",
                            "acceptance_rate", "suggest_ms", "first_token_ms", "tokens_computed_per_event",
                            "free_keystrokes", "window_moves"})
        EXPECT_TRUE(node->contains(k)) << k;
      for (const char* k : {"p50", "p90", "p99", "p999", "max"}) {
        EXPECT_TRUE((*node)["suggest_ms"][k].is_number()) << k;
        EXPECT_TRUE((*node)["first_token_ms"][k].is_number()) << k;
      }
      for (const char* k : {"p50", "p99", "max"}) EXPECT_TRUE((*node)["tokens_computed_per_event"][k].is_number()) << k;
      EXPECT_EQ((*node)["chars"].dump(), doc_chars);
      const int64_t keys = (*node)["keystrokes"].get<int64_t>();
      EXPECT_GE(keys, 1);
      EXPECT_LE(keys, 32);
      // One suggestion per keystroke; typing at the end never has a suffix.
      EXPECT_EQ((*node)["events"].get<int64_t>(), keys);
      EXPECT_EQ((*node)["fim_events"].get<int64_t>(), 0);
      EXPECT_LE((*node)["free_keystrokes"].get<int64_t>(), keys);
      EXPECT_LE((*node)["suggest_ms"]["p50"].get<double>(), (*node)["suggest_ms"]["max"].get<double>());
    }
  }
  // -p prints the session's suggestion for the text.
  CliResult r = run("bench-typing -m " + model + " -t 2 -p 'def ' --no-heal --fim off");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("{\"prompt\"");  // after any warning on stderr
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto line = nlohmann::json::parse(r.out.substr(at, r.out.find('\n', at) - at), nullptr, false);
  ASSERT_TRUE(line.is_object()) << r.out;
  EXPECT_EQ(line["prompt"], "def ");
  EXPECT_TRUE(line["suggestion"].is_string());
}

// The first events of a public trace (if the fixtures are there) equal a
// from-scratch replay: a quick end-to-end run of the CLI on real data.
TEST_F(CliFiles, ReplayFixtureTracePrefixVerifies) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string src = fx + "/traces/en_meeting_notes.jsonl";
  if (!fs::exists(src)) GTEST_SKIP() << "no " << src;
  const std::string content = read_all(src);
  // Header + the first 60 events; the header's sha is of the whole trace, so
  // it is replaced by the prefix's document, rebuilt here.
  size_t end = 0;
  for (int i = 0; i < 61; ++i) end = content.find('\n', end) + 1;
  std::string head = content.substr(0, content.find('\n'));
  std::string doc;
  size_t start = head.size() + 1;
  for (size_t p = start; p < end;) {
    const size_t e = content.find('\n', p);
    const auto j = nlohmann::json::parse(content.substr(p, e - p));
    p = e + 1;
    const auto pos = j["pos"].get<size_t>();
    auto byte = [&](size_t cp) {
      size_t i = 0;
      for (size_t k = 0; k < cp; ++k) do ++i; while (i < doc.size() && (static_cast<unsigned char>(doc[i]) & 0xC0) == 0x80);
      return i;
    };
    if (j["op"] == "insert" || j["op"] == "accept") doc.insert(byte(pos), j["text"].get<std::string>());
    if (j["op"] == "delete") doc.erase(byte(pos), byte(pos + j["n"].get<size_t>()) - byte(pos));
  }
  auto h = nlohmann::json::parse(head);
  h["final_sha256"] = sha256_hex(doc);
  h["events"] = 60;  // the header's counts are checked too
  size_t chars = 0;
  for (unsigned char c : doc) chars += (c & 0xC0) != 0x80;
  h["chars"] = chars;
  const std::string trace = write("prefix.jsonl", h.dump() + "\n" + content.substr(start, end - start));
  const std::string model = std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf";
  CliResult r = run("replay -m " + model + " -t 2 --fast --verify " + trace);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("60 events, 0 mismatches"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace laya
