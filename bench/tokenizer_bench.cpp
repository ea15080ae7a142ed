// Tokenizer benchmarks: bulk encode throughput (English, code, Chinese) per
// vocabulary, and incremental re-tokenization after a one-character insert at
// the end of a 10,000-character document (p50/p99 reported as counters).
//
// Fixtures: $LAYA_FIXTURES or ../shared/fixtures beside the source tree.
// Texts are the final documents of the typing traces, repeated to ~200 KB.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using laya::tok::EditTokenizer;
using laya::tok::EncodeOptions;
using laya::tok::Tokenizer;

namespace {

std::string fixtures() {
  if (const char* e = std::getenv("LAYA_FIXTURES"); e && *e) return e;
  fs::path p = fs::path(__FILE__).parent_path() / ".." / ".." / "shared" / "fixtures";
  std::error_code ec;
  return fs::is_directory(p, ec) ? fs::weakly_canonical(p).string() : std::string();
}

const Tokenizer* tokenizer(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(rel);
  if (it != cache.end()) return it->second.get();
  std::string fx = fixtures();
  if (fx.empty()) return nullptr;
  auto r = Tokenizer::from_path(fx + "/" + rel);
  if (!r.ok()) return nullptr;
  auto* p = r.value().get();
  cache[rel] = std::move(r).value();
  return p;
}

// Rebuilds a trace's final document (code-point offsets).
std::string trace_document(const std::string& name) {
  static std::map<std::string, std::string> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::string fx = fixtures();
  std::ifstream in(fx + "/traces/" + name + ".jsonl");
  std::u32string doc;
  std::string line;
  std::getline(in, line);
  auto to32 = [](const std::string& s) {
    std::u32string r;
    for (size_t i = 0; i < s.size();) {
      unsigned char c = s[i];
      size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
      char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
      for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
      r.push_back(cp);
      i += n;
    }
    return r;
  };
  while (std::getline(in, line)) {
    auto ev = nlohmann::json::parse(line);
    std::string op = ev["op"];
    size_t pos = ev["pos"];
    if (op == "insert" || op == "accept") doc.insert(pos, to32(ev["text"].get<std::string>()));
    else if (op == "delete") doc.erase(pos, ev["n"].get<size_t>());
  }
  std::string out;
  for (char32_t cp : doc) {
    if (cp < 0x80) out.push_back(char(cp));
    else if (cp < 0x800) out += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    else if (cp < 0x10000) out += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    else
      out += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
              char(0x80 | (cp & 0x3F))};
  }
  cache[name] = out;
  return out;
}

std::string repeat_to(const std::string& s, size_t bytes) {
  std::string r;
  if (s.empty()) return r;
  while (r.size() < bytes) r += s;
  return r;
}

const char* kTrace[] = {"en_meeting_notes", "py_bisect", "zh_meeting_memo"};
const char* kTextName[] = {"english", "code", "chinese"};
const char* kVocab[] = {"tokenizer/llamacpp/ggml-vocab-llama-bpe.gguf", "tokenizer/llamacpp/ggml-vocab-qwen2.gguf",
                        "tokenizer/llamacpp/ggml-vocab-llama-spm.gguf", "tokenizer/hf/qwen3/tokenizer.json"};
const char* kVocabName[] = {"llama-bpe", "qwen2", "llama-spm", "qwen3-hf"};

void BM_Encode(benchmark::State& state) {
  const Tokenizer* tok = tokenizer(kVocab[state.range(0)]);
  if (!tok) {
    state.SkipWithError("fixtures not found (set LAYA_FIXTURES)");
    return;
  }
  std::string text = repeat_to(trace_document(kTrace[state.range(1)]), 200000);
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, EncodeOptions{false, false, std::nullopt});
    n_tokens = ids.value().size();
    benchmark::DoNotOptimize(ids.value().data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n_tokens);
  state.SetLabel(std::string(kVocabName[state.range(0)]) + "/" + kTextName[state.range(1)]);
}
BENCHMARK(BM_Encode)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->Unit(benchmark::kMillisecond);

// One character typed at the end of a 10,000-character document, then removed
// again (so the document stays the same size); both edits are timed.
void BM_EditInsertAtEnd(benchmark::State& state) {
  const Tokenizer* tok = tokenizer(kVocab[state.range(0)]);
  if (!tok) {
    state.SkipWithError("fixtures not found (set LAYA_FIXTURES)");
    return;
  }
  std::string doc = repeat_to(trace_document(kTrace[state.range(1)]), 40000);
  // 10,000 code points
  size_t cps = 0, cut = 0;
  while (cut < doc.size() && cps < 10000) {
    unsigned char c = doc[cut];
    cut += c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    ++cps;
  }
  doc.resize(cut);
  EditTokenizer et(*tok);
  (void)et.set_text(doc);
  const char* keys = state.range(1) == 2 ? "\xE7\x9A\x84" : "e";
  std::vector<double> ns;
  ns.reserve(1 << 16);
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    (void)et.edit(et.text().size(), 0, keys);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(et.ids().data());
    state.PauseTiming();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    (void)et.edit(et.text().size() - std::char_traits<char>::length(keys), std::char_traits<char>::length(keys), "");
    state.ResumeTiming();
  }
  std::sort(ns.begin(), ns.end());
  if (!ns.empty()) {
    state.counters["p50_us"] = ns[ns.size() / 2] / 1000.0;
    state.counters["p99_us"] = ns[std::min(ns.size() - 1, size_t(double(ns.size()) * 0.99))] / 1000.0;
    state.counters["max_us"] = ns.back() / 1000.0;
  }
  state.counters["incremental"] = et.last_was_full() ? 0 : 1;
  state.SetLabel(std::string(kVocabName[state.range(0)]) + "/" + kTextName[state.range(1)]);
}
BENCHMARK(BM_EditInsertAtEnd)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

// The same, typed in the middle of the document (the ids after it shift).
void BM_EditInsertMiddle(benchmark::State& state) {
  const Tokenizer* tok = tokenizer(kVocab[state.range(0)]);
  if (!tok) {
    state.SkipWithError("fixtures not found (set LAYA_FIXTURES)");
    return;
  }
  std::string doc = repeat_to(trace_document(kTrace[state.range(1)]), 40000);
  size_t cps = 0, cut = 0, mid = 0;
  while (cut < doc.size() && cps < 10000) {
    unsigned char c = doc[cut];
    cut += c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (++cps == 5000) mid = cut;
  }
  doc.resize(cut);
  EditTokenizer et(*tok);
  (void)et.set_text(doc);
  const char* keys = state.range(1) == 2 ? "\xE7\x9A\x84" : "e";
  const size_t klen = std::char_traits<char>::length(keys);
  std::vector<double> ns;
  ns.reserve(1 << 16);
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    (void)et.edit(mid, 0, keys);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(et.ids().data());
    state.PauseTiming();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    (void)et.edit(mid, klen, "");
    state.ResumeTiming();
  }
  std::sort(ns.begin(), ns.end());
  if (!ns.empty()) {
    state.counters["p50_us"] = ns[ns.size() / 2] / 1000.0;
    state.counters["p99_us"] = ns[std::min(ns.size() - 1, size_t(double(ns.size()) * 0.99))] / 1000.0;
  }
  state.counters["incremental"] = et.last_was_full() ? 0 : 1;
  state.SetLabel(std::string(kVocabName[state.range(0)]) + "/" + kTextName[state.range(1)]);
}
BENCHMARK(BM_EditInsertMiddle)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

// Full re-tokenization of the same 10,000-character document, for comparison.
void BM_FullRetokenize10k(benchmark::State& state) {
  const Tokenizer* tok = tokenizer(kVocab[state.range(0)]);
  if (!tok) {
    state.SkipWithError("fixtures not found (set LAYA_FIXTURES)");
    return;
  }
  std::string doc = repeat_to(trace_document(kTrace[state.range(1)]), 40000);
  size_t cps = 0, cut = 0;
  while (cut < doc.size() && cps < 10000) {
    unsigned char c = doc[cut];
    cut += c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    ++cps;
  }
  doc.resize(cut);
  for (auto _ : state) {
    auto ids = tok->encode(doc, EncodeOptions{false, false, std::nullopt});
    benchmark::DoNotOptimize(ids.value().data());
  }
  state.SetLabel(std::string(kVocabName[state.range(0)]) + "/" + kTextName[state.range(1)]);
}
BENCHMARK(BM_FullRetokenize10k)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

}  // namespace
