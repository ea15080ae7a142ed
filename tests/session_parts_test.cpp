// The keystroke pipeline's parts, each alone: Document offsets, the prompt
// plan's pure functions, Reuse's decisions and the Generator's stop rules.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "session/document.h"
#include "session/draft.h"
#include "session/generator.h"
#include "session/prompt_plan.h"
#include "session/reuse.h"
#include "session/stop_strings.h"
#include "test_util.h"

namespace laya {
namespace {

using test::expect_status;

struct ModelEnv {
  std::shared_ptr<const Model> model;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<Engine> eng;
};

ModelEnv* model_env() {
  static ModelEnv* e = [] {
    auto* r = new ModelEnv;
    auto m = Model::load(LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf");
    if (!m.ok()) return r;
    r->model = std::move(m).value();
    auto t = tok::Tokenizer::from_gguf(*r->model->gguf_file());
    if (!t.ok()) return r;
    r->tok = std::move(t).value();
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 256;
    auto en = Engine::create(r->model, eo);
    if (en.ok()) r->eng = std::move(en).value();
    return r;
  }();
  return e;
}

// The first token of `s` (no BOS).
int32_t first_id(const tok::Tokenizer& tok, std::string_view s) {
  std::vector<int32_t> ids;
  EXPECT_TRUE(tok.encode_append(s, false, &ids).ok());
  return ids.empty() ? -1 : ids.front();
}

// ---- Document ----------------------------------------------------------------------

TEST(Document, CodePointsBytesAndUtf16) {
  Document d;
  // a (1 byte), é (2), 世 (3), 😀 (4 bytes, a UTF-16 surrogate pair), b
  ASSERT_TRUE(d.set_text("a\xC3\xA9\xE4\xB8\x96\xF0\x9F\x98\x80" "b").ok());
  EXPECT_EQ(d.size_cp(), 5u);
  EXPECT_EQ(d.cursor_cp(), 5u);
  EXPECT_EQ(d.cursor_byte(), 11u);
  const size_t bytes[] = {0, 1, 3, 6, 10, 11};
  for (size_t cp = 0; cp <= 5; ++cp) EXPECT_EQ(d.byte_of(cp), bytes[cp]) << cp;
  EXPECT_EQ(d.count_cp(1, 10), 3u);
  EXPECT_EQ(d.utf16_units(0, 11), 6u);  // the emoji counts 2
  EXPECT_EQ(d.utf16_units(6, 10), 2u);
  EXPECT_EQ(d.cp_of_utf16(0, 3), 3u);   // a, é, 世: one unit each
  EXPECT_EQ(d.cp_of_utf16(0, 4), 3u);   // inside the pair: the start of its character
  EXPECT_EQ(d.cp_of_utf16(0, 5), 4u);   // the pair complete
  EXPECT_EQ(d.cp_of_utf16(3, 1), 3u);   // inside the pair: the start of its character
  EXPECT_EQ(d.cp_of_utf16(3, 2), 4u);
  EXPECT_EQ(d.cp_of_utf16(0, 99), 5u);  // past the end: the end
  // Byte ranges (the HTTP API's unit) as code points, counted from the
  // cursor (at the end here) or from the start, whichever is nearer.
  size_t pos = 0, n = 0;
  for (size_t cp = 0; cp <= 5; ++cp) {
    ASSERT_TRUE(d.cp_range_of_bytes(bytes[cp], bytes[5] - bytes[cp], &pos, &n).ok()) << cp;
    EXPECT_EQ(pos, cp);
    EXPECT_EQ(n, 5 - cp);
  }
  d.apply_move(2);  // the cursor before 世: nearer to some starts than the start is
  for (size_t cp = 0; cp <= 5; ++cp) {
    ASSERT_TRUE(d.cp_range_of_bytes(bytes[cp], 0, &pos, &n).ok()) << cp;
    EXPECT_EQ(pos, cp) << "from the cursor at code point 2";
  }
  const Status inside = d.cp_range_of_bytes(4, 1, &pos, &n);  // byte 4 is inside 世
  EXPECT_EQ(inside.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(inside.message().find("byte 4"), std::string::npos) << inside.message();
  EXPECT_EQ(d.cp_range_of_bytes(1, 1, &pos, &n).code(), StatusCode::kInvalidArgument);  // ends inside é
  EXPECT_EQ(d.cp_range_of_bytes(11, 1, &pos, &n).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(d.cp_range_of_bytes(12, 0, &pos, &n).code(), StatusCode::kOutOfRange);
}

TEST(Document, EditsReportWhatChangedAndRefuseBadInput) {
  Document d;
  ASSERT_TRUE(d.set_text("hello world").ok());
  size_t n = 0;
  ASSERT_TRUE(d.check_edit(6, 5, "\xE4\xB8\x96", &n).ok());
  EXPECT_EQ(n, 1u);
  const Document::Change c = d.apply_edit(6, 5, "\xE4\xB8\x96", n);
  EXPECT_EQ(d.text(), "hello \xE4\xB8\x96");
  EXPECT_EQ(c.begin, 6u);
  EXPECT_EQ(c.end, 11u);
  EXPECT_EQ(c.inserted, 3u);
  EXPECT_EQ(c.old_cursor, 11u);
  EXPECT_EQ(d.cursor_cp(), 7u);
  EXPECT_EQ(d.cursor_byte(), 9u);
  expect_status(d.check_edit(8, 0, "x", &n), StatusCode::kOutOfRange, {"code point 8", "7 code points"});
  expect_status(d.check_edit(6, 2, "x", &n), StatusCode::kOutOfRange, {"deleting 2"});
  expect_status(d.check_edit(0, 0, "\xFF", &n), StatusCode::kInvalidArgument, {"not valid UTF-8"});
  expect_status(d.check_move(8), StatusCode::kOutOfRange, {"move to code point 8"});
  expect_status(d.set_text("ok\xC3"), StatusCode::kInvalidArgument, {"set_text", "byte 2"});
  EXPECT_EQ(d.text(), "hello \xE4\xB8\x96");  // a refused text changes nothing
  d.apply_move(2);
  EXPECT_EQ(d.cursor_byte(), 2u);
}

// ---- PromptPlan --------------------------------------------------------------------

TEST(PromptPlan, AssemblesPlainPsmAndSpmPromptsWithHealing) {
  ModelEnv* e = model_env();
  if (!e->tok) GTEST_SKIP() << "models/laya-default-q8_0.gguf did not load";
  const tok::Tokenizer& tok = *e->tok;
  PromptTraits tr;
  tr.bos = 1;
  tr.fim_pre = 10, tr.fim_suf = 11, tr.fim_mid = 12;
  SessionOptions opt;
  const std::vector<int32_t> window = {100, 101, 102};
  const std::vector<int32_t> suffix = {200, 201};
  Prompt p;
  // Healing takes back the last token (one piece of one token).
  assemble_prompt(tr, opt, tok, window, 1, {}, &p);
  EXPECT_EQ(p.ids, (std::vector<int32_t>{1, 100, 101}));
  EXPECT_EQ(p.heal, tok.token_bytes(102));
  EXPECT_FALSE(p.fim);
  assemble_prompt(tr, opt, tok, window, 1, suffix, &p);
  EXPECT_EQ(p.ids, (std::vector<int32_t>{1, 10, 100, 101, 11, 200, 201, 12}));
  EXPECT_TRUE(p.fim);
  opt.fim = FimOrder::kSpm;
  assemble_prompt(tr, opt, tok, window, 1, suffix, &p);
  EXPECT_EQ(p.ids, (std::vector<int32_t>{1, 11, 200, 201, 10, 100, 101, 12}));
  opt.heal = false;
  assemble_prompt(tr, opt, tok, window, 1, {}, &p);
  EXPECT_EQ(p.ids, (std::vector<int32_t>{1, 100, 101, 102}));
  EXPECT_TRUE(p.heal.empty());
  // No BOS, no suffix, one token: it is kept (something to start from), not healed.
  opt.heal = true;
  tr.bos = -1;
  assemble_prompt(tr, opt, tok, std::vector<int32_t>{100}, 1, {}, &p);
  EXPECT_EQ(p.ids, (std::vector<int32_t>{100}));
  EXPECT_TRUE(p.heal.empty());
}

TEST(PromptPlan, RoomSuffixLinesAndWindowStart) {
  ModelEnv* e = model_env();
  if (!e->tok) GTEST_SKIP() << "models/laya-default-q8_0.gguf did not load";
  PromptTraits tr;
  tr.bos = 1;
  SessionOptions opt;
  EXPECT_EQ(window_room(tr, opt, 256, 8), 256 - 8 - 1);
  tr.fim_pre = 10, tr.fim_suf = 11, tr.fim_mid = 12;
  EXPECT_EQ(window_room(tr, opt, 256, 8), 256 - 8 - 1 - 3 - opt.fim_suffix_tokens);
  opt.context_tokens = 100;
  EXPECT_EQ(window_room(tr, opt, 256, 8), 100 - 8 - 1 - 3 - opt.fim_suffix_tokens);

  const std::string text = "ab|cd\nl2\nl3\nl4\nl5\nl6\n";
  SessionOptions so;
  EXPECT_EQ(suffix_lines(text, 2, so), "|cd\nl2\nl3\nl4\n");  // 4 lines from the cursor's own
  so.fim_suffix_lines = 1;
  EXPECT_EQ(suffix_lines(text, 2, so), "|cd\n");
  so.fim_suffix_tokens = 1;  // 8 bytes per token of the bound
  so.fim_suffix_lines = 9;
  EXPECT_EQ(suffix_lines(text, 2, so), "|cd\nl2\nl");

  // The whole text fits: the window starts at 0. It does not: a line start
  // whose text holds at most half the room, deterministic.
  std::string longtext;
  for (int i = 0; i < 60; ++i) longtext += "line number " + std::to_string(i) + " of the text\n";
  const tok::Tokenizer& tok = *e->tok;
  EXPECT_EQ(choose_window_start(tok, longtext, 40, 1000), 0u);
  const size_t s = choose_window_start(tok, longtext, longtext.size(), 64);
  ASSERT_GT(s, 0u);
  EXPECT_EQ(longtext[s - 1], '\n');
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok.encode_append(std::string_view(longtext).substr(s), false, &ids).ok());
  EXPECT_LE(ids.size(), 32u);
  EXPECT_GE(ids.size(), 16u);
  EXPECT_EQ(choose_window_start(tok, longtext, longtext.size(), 64), s);
}

// ---- Reuse -------------------------------------------------------------------------

TEST(Reuse, TypingThroughTheChainComputesNothingAndADifferentPromptDoes) {
  ModelEnv* e = model_env();
  if (!e->eng) GTEST_SKIP() << "models/laya-default-q8_0.gguf did not load";
  const tok::Tokenizer& tok = *e->tok;
  const ContinuationMasks masks = continuation_masks(tok, static_cast<int>(e->eng->n_vocab()), e->eng->hparams().eos_id);
  Reuse r(*e->eng, tok);
  Prompt p;
  ASSERT_TRUE(tok.encode_append("def fibonacci(n):\n    return", false, &p.ids).ok());
  std::atomic<bool> cancel{false};
  PrefillReport rep;
  ASSERT_TRUE(r.prefill(p.ids, cancel, &rep).ok());
  EXPECT_EQ(rep.computed, static_cast<int64_t>(p.ids.size()));
  // The same prompt again: its logits are current, nothing is computed.
  PrefillReport again;
  ASSERT_TRUE(r.prefill(p.ids, cancel, &again).ok());
  EXPECT_EQ(again.computed, 0);
  // A chain of 4 tokens after it (as a greedy generation leaves it), fed 2 deep.
  Chain& c = r.chain();
  c.start = p.ids.size();
  c.tokens = {first_id(tok, " fib"), first_id(tok, "("), first_id(tok, "n"),
              first_id(tok, ")")};
  ASSERT_TRUE(r.feed(static_cast<int64_t>(p.ids.size()) + 1, c.tokens[0]).ok());
  ASSERT_TRUE(r.feed(static_cast<int64_t>(p.ids.size()) + 2, c.tokens[1]).ok());
  // Not greedy: never taken.
  Prompt typed = p;
  typed.ids.push_back(c.tokens[0]);
  EXPECT_EQ(r.take_chain(typed, 8, /*greedy=*/false, masks), 0u);
  // The user typed the first chain token: the other three are the suggestion's start.
  EXPECT_EQ(r.take_chain(typed, 8, true, masks), 3u);
  EXPECT_EQ(r.chain().start, typed.ids.size());
  EXPECT_EQ(r.chain().tokens.size(), 3u);
  // At most max_tokens of them.
  Prompt typed2 = typed;
  typed2.ids.push_back(r.chain().tokens[0]);
  EXPECT_EQ(r.take_chain(typed2, 1, true, masks), 1u);
  // A prompt that left the chain: nothing from it; the prefill keeps the common prefix.
  Prompt other = p;
  other.ids.back() = first_id(tok, " yield");
  EXPECT_EQ(r.take_chain(other, 8, true, masks), 0u);
  PrefillReport rep2;
  ASSERT_TRUE(r.prefill(other.ids, cancel, &rep2).ok());
  EXPECT_EQ(rep2.reused, static_cast<int64_t>(p.ids.size()) - 1);
  EXPECT_EQ(rep2.computed, 1);
}

// ---- Generator ---------------------------------------------------------------------

// A model whose logits say "token script[i] next" at position base + i,
// whatever was fed: positions whose logits a pass computed stay readable
// until a cut or another pass.
class ScriptedTarget final : public DecodeTarget {
 public:
  ScriptedTarget(int n_vocab, int64_t base, std::vector<int32_t> script, int64_t n_ctx = 1 << 20, int64_t max_feed = 1)
      : base_(base), script_(std::move(script)), n_ctx_(n_ctx), max_feed_(max_feed), logits_(n_vocab) {
    lo_ = hi_ = n_past_ = base_;
  }
  const float* first_logits() override { return at(base_); }
  const float* logits_at(int64_t x) override { return x >= lo_ && x <= hi_ && x <= n_past_ ? at(x) : nullptr; }
  Status feed(int64_t x, int32_t token) override {
    ++fed;
    fed_tokens.push_back(token);
    lo_ = hi_ = n_past_ = x;
    return Status::Ok();
  }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t max_feed() const override { return max_feed_; }
  Status feed_many(int64_t x, std::span<const int32_t> tokens) override {
    ++fed;
    fed_tokens.insert(fed_tokens.end(), tokens.begin(), tokens.end());
    lo_ = x;
    hi_ = n_past_ = x + static_cast<int64_t>(tokens.size()) - 1;
    return Status::Ok();
  }
  Status cut(int64_t n) override {
    cuts.push_back(n);
    n_past_ = std::min(n_past_, n);
    hi_ = std::min(hi_, n);
    return Status::Ok();
  }
  int64_t n_past() const { return n_past_; }
  int fed = 0;  // forward passes
  std::vector<int32_t> fed_tokens;
  std::vector<int64_t> cuts;

 private:
  const float* at(int64_t x) {
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    const auto i = static_cast<size_t>(x - base_);
    if (i < script_.size()) logits_[static_cast<size_t>(script_[i])] = 10.0f;
    return logits_.data();
  }
  int64_t base_, lo_, hi_, n_past_;
  std::vector<int32_t> script_;
  int64_t n_ctx_, max_feed_;
  std::vector<float> logits_;
};

// Proposes the tokens it was given, in turn; records what it heard.
class ListDrafter final : public Drafter {
 public:
  explicit ListDrafter(std::vector<std::vector<int32_t>> drafts) : drafts_(std::move(drafts)) {}
  int propose(std::span<const int32_t>, int max, int32_t* out) override {
    if (next_ >= drafts_.size()) return 0;
    const auto& d = drafts_[next_++];
    const int n = std::min(max, static_cast<int>(d.size()));
    std::copy_n(d.begin(), n, out);
    return n;
  }
  void feedback(int proposed, int accepted) override { heard.emplace_back(proposed, accepted); }
  std::vector<std::pair<int, int>> heard;

 private:
  std::vector<std::vector<int32_t>> drafts_;
  size_t next_ = 0;
};

std::string collect_run(Generator& g, ScriptedTarget& t, const GenerateOptions& o, Generated* out, int n_vocab,
                        const ContinuationMasks& masks) {
  Sampler smp(SamplerParams{}, n_vocab);
  smp.set_mask(masks.control);
  std::string streamed;
  const std::vector<int32_t> prompt = {1, 2, 3};
  const StopStream::Sink sink{[](void* p, std::string_view s) {
                                static_cast<std::string*>(p)->append(s);
                                return true;
                              },
                              &streamed};
  EXPECT_TRUE(g.run(t, prompt, smp, o, sink, out).ok());
  return streamed;
}

TEST(Generator, StopRules) {
  ModelEnv* e = model_env();
  if (!e->tok) GTEST_SKIP() << "models/laya-default-q8_0.gguf did not load";
  const tok::Tokenizer& tok = *e->tok;
  const int nv = tok.n_vocab();
  const ContinuationMasks masks = continuation_masks(tok, nv, e->model->hparams().eos_id);
  ASSERT_GT(masks.eog.ids().size(), 0u);
  const int32_t eog = masks.eog.ids().front();
  const int32_t a = first_id(tok, "a"), b = first_id(tok, "b");
  const int32_t nl = first_id(tok, "\n");
  Generator g(&tok, nv, masks);
  Generated out;

  {  // max_tokens: 3 tokens, 2 forward passes (the first token's logits come with the prompt)
    ScriptedTarget t(nv, 3, {a, b, a, b, a});
    GenerateOptions o;
    o.max_tokens = 3;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "aba");
    EXPECT_EQ(out.stop, StopReason::kLength);
    EXPECT_EQ(t.fed, 2);
    EXPECT_EQ(out.decode_ms.size(), 2u);
  }
  {  // end of generation: not part of the output, but chosen
    ScriptedTarget t(nv, 3, {a, eog, b});
    GenerateOptions o;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "a");
    EXPECT_EQ(out.stop, StopReason::kEnd);
    EXPECT_EQ(out.tokens, std::vector<int32_t>{a});
    EXPECT_EQ(out.chosen, (std::vector<int32_t>{a, eog}));
  }
  {  // never_empty: the first token is not end of generation
    ScriptedTarget t(nv, 3, {eog, a});
    GenerateOptions o;
    o.never_empty = true;
    o.max_tokens = 1;
    collect_run(g, t, o, &out, nv, masks);
    ASSERT_EQ(out.tokens.size(), 1u);
    EXPECT_FALSE(masks.eog.contains(out.tokens[0]));
  }
  {  // the caller's end token
    ScriptedTarget t(nv, 3, {a, b});
    GenerateOptions o;
    o.end_token = b;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "a");
    EXPECT_EQ(out.stop, StopReason::kEnd);
  }
  {  // single_line: cut at the newline, the token holding it left out
    ScriptedTarget t(nv, 3, {a, nl, b});
    GenerateOptions o;
    o.single_line = true;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "a");
    EXPECT_EQ(out.stop, StopReason::kLineEnd);
    EXPECT_EQ(out.tokens, std::vector<int32_t>{a});
  }
  {  // a stop string: the text ends before it, nothing of it streamed
    ScriptedTarget t(nv, 3, {a, b, a, a});
    GenerateOptions o;
    const std::vector<std::string> stop = {"ba"};
    o.stop = &stop;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "a");
    EXPECT_EQ(out.text, "a");
    EXPECT_EQ(out.stop, StopReason::kStopString);
  }
  {  // a stop string that never comes: the held-back tail is passed on at the end
    ScriptedTarget t(nv, 3, {a, b});
    GenerateOptions o;
    o.max_tokens = 2;
    const std::vector<std::string> stop = {"bx"};
    o.stop = &stop;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "ab");
  }
  {  // cancel: before the next forward pass
    ScriptedTarget t(nv, 3, {a, b, a});
    std::atomic<bool> cancel{true};
    GenerateOptions o;
    o.cancel = &cancel;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "a");
    EXPECT_EQ(out.stop, StopReason::kCancelled);
    EXPECT_EQ(t.fed, 0);
  }
  {  // deadline passed: the first token (from the prompt's logits) only
    ScriptedTarget t(nv, 3, {a, b});
    GenerateOptions o;
    o.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "a");
    EXPECT_EQ(out.stop, StopReason::kDeadline);
  }
  {  // the context: 3 prompt tokens + 1 generated fill 4 positions
    ScriptedTarget t(nv, 3, {a, b, a}, /*n_ctx=*/4);
    GenerateOptions o;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "ab");
    EXPECT_EQ(out.stop, StopReason::kContext);
  }
  {  // known tokens: no forward pass for them; generation goes on after
    ScriptedTarget t(nv, 3, {a, b, a});
    const std::vector<int32_t> known = {b, b};
    GenerateOptions o;
    o.known = known;
    o.max_tokens = 3;
    ASSERT_TRUE(t.feed(5, b).ok());  // the logits after the known tokens are current
    t.fed = 0;
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "bba");
    EXPECT_EQ(t.fed, 0);
    EXPECT_EQ(out.chosen, std::vector<int32_t>{a});
  }
  {  // healing: the output starts with the healed bytes, which are not part of its text
    ScriptedTarget t(nv, 3, {a, b});
    GenerateOptions o;
    o.max_tokens = 2;
    o.heal = tok.token_bytes(a);
    EXPECT_EQ(collect_run(g, t, o, &out, nv, masks), "b");
    ASSERT_EQ(out.tokens.size(), 2u);
    EXPECT_TRUE(tok.token_bytes(out.tokens[0]).starts_with(tok.token_bytes(a)));
  }
}

// Drafted tokens change the passes, never the output: a right draft is taken
// whole with one pass, a wrong one is cut at its first difference (the
// sequence keeps only settled tokens), and the output equals the run
// without a drafter.
TEST(Generator, DraftsChangeThePassesNotTheOutput) {
  ModelEnv* e = model_env();
  if (!e->tok) GTEST_SKIP() << "models/laya-default-q8_0.gguf did not load";
  const tok::Tokenizer& tok = *e->tok;
  const int nv = tok.n_vocab();
  const ContinuationMasks masks = continuation_masks(tok, nv, e->model->hparams().eos_id);
  const int32_t a = first_id(tok, "a"), b = first_id(tok, "b"), c = first_id(tok, "c");
  const int32_t eog = masks.eog.ids().front();
  const std::vector<int32_t> script = {a, b, c, a, b, c, a, b};
  Generator g(&tok, nv, masks);
  Generated plain, drafted;
  GenerateOptions o;
  o.max_tokens = 8;
  ScriptedTarget t0(nv, 3, script, 1 << 20, 16);
  const std::string text = collect_run(g, t0, o, &plain, nv, masks);
  EXPECT_EQ(t0.fed, 7);
  {  // right drafts: step 1's pass checks 6 drafted tokens, the 8th token's logits come with them
    ScriptedTarget t(nv, 3, script, 1 << 20, 16);
    ListDrafter d({{b, c, a, b, c, a}});
    o.drafter = &d;
    EXPECT_EQ(collect_run(g, t, o, &drafted, nv, masks), text);
    EXPECT_EQ(drafted.tokens, plain.tokens);
    EXPECT_EQ(t.fed, 1);
    EXPECT_EQ(drafted.decode_ms.size(), 1u);
    EXPECT_EQ(drafted.drafted, 6);
    EXPECT_EQ(drafted.accepted, 6);
    EXPECT_EQ(d.heard, (std::vector<std::pair<int, int>>{{6, 6}}));
    EXPECT_EQ(t.fed_tokens, (std::vector<int32_t>{a, b, c, a, b, c, a}));
    EXPECT_TRUE(t.cuts.empty());
  }
  {  // wrong at the third: two taken, the rest cut at the step's position, decoding goes on
    ScriptedTarget t(nv, 3, script, 1 << 20, 16);
    ListDrafter d({{b, c, c, c}});
    o.drafter = &d;
    EXPECT_EQ(collect_run(g, t, o, &drafted, nv, masks), text);
    EXPECT_EQ(drafted.tokens, plain.tokens);
    EXPECT_EQ(drafted.drafted, 4);
    EXPECT_EQ(drafted.accepted, 2);
    EXPECT_EQ(d.heard, (std::vector<std::pair<int, int>>{{4, 2}}));
    ASSERT_EQ(t.cuts.size(), 1u);
    EXPECT_EQ(t.cuts[0], 3 + 3);  // prompt + the 3 settled tokens a, b, c
    EXPECT_EQ(t.fed, 1 + 4);      // the drafting pass, then steps 4..7 one by one
  }
  {  // the output ends inside a draft: only settled tokens stay in the sequence
    const std::vector<int32_t> ending = {a, b, eog, c};
    ScriptedTarget t(nv, 3, ending, 1 << 20, 16);
    ListDrafter d({{b, eog, c}});
    o.drafter = &d;
    EXPECT_EQ(collect_run(g, t, o, &drafted, nv, masks), "ab");
    EXPECT_EQ(drafted.stop, StopReason::kEnd);
    EXPECT_EQ(t.n_past(), 3 + 3);  // a, b, and the end token that was chosen
  }
  {  // a sampled choice is drafted for only when asked (draft_sampled), by speculative sampling's rule
    ScriptedTarget t(nv, 3, script, 1 << 20, 16);
    ListDrafter d({{b, c}, {b, c}});
    o.drafter = &d;
    Sampler smp(SamplerParams{.temperature = 0.5f, .seed = 1}, nv);
    ASSERT_TRUE(g.run(t, std::vector<int32_t>{1, 2, 3}, smp, o, {}, &drafted).ok());
    EXPECT_EQ(drafted.drafted, 0);
    EXPECT_TRUE(d.heard.empty());
    o.draft_sampled = true;
    ScriptedTarget t2(nv, 3, script, 1 << 20, 16);
    ASSERT_TRUE(g.run(t2, std::vector<int32_t>{1, 2, 3}, smp, o, {}, &drafted).ok());
    EXPECT_EQ(drafted.drafted, 4);  // b c at step 1, b c at step 4; logits 10 apart: each all but certain
    EXPECT_EQ(drafted.accepted, 4);
    EXPECT_EQ(drafted.tokens, plain.tokens);
    o.draft_sampled = false;
  }
  {  // a target that takes one token a pass: no drafts
    ScriptedTarget t(nv, 3, script);
    ListDrafter d({{b, c}});
    o.drafter = &d;
    EXPECT_EQ(collect_run(g, t, o, &drafted, nv, masks), text);
    EXPECT_EQ(drafted.drafted, 0);
  }
}

// The n-gram table: the latest occurrence wins, added incrementally.
TEST(Draft, NgramTableProposesWhatFollowedTheLatestOccurrence) {
  NgramTable t(2, 64);
  const std::vector<int32_t> doc = {1, 2, 3, 4, 5, 1, 2, 7, 8};
  t.add(doc);
  int32_t out[NgramTable::kFollow];
  const std::vector<int32_t> ctx = {9, 1, 2};
  ASSERT_EQ(t.lookup(ctx, 4, out), 2);  // 1 2 -> 7 8 (the later one), all that follows it
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], 8);
  EXPECT_EQ(t.lookup(std::vector<int32_t>{2, 3}, 2, out), 2);
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(t.lookup(std::vector<int32_t>{3}, 2, out), 0);  // shorter than the order
  EXPECT_EQ(t.lookup(std::vector<int32_t>{8, 9}, 2, out), 0);
  // Appended text: the n-grams reaching into it are recorded again.
  std::vector<int32_t> longer = doc;
  longer.insert(longer.end(), {1, 2, 6});
  t.add(longer, t.refresh_from(doc.size()));
  ASSERT_EQ(t.lookup(ctx, 4, out), 1);
  EXPECT_EQ(out[0], 6);
  ASSERT_EQ(t.lookup(std::vector<int32_t>{7, 8}, 4, out), 3);  // 7 8 -> 1 2 6 now that it goes on
  EXPECT_EQ(out[2], 6);
}

// The draft length weighs the measured chance of a drafted token against its
// measured cost: long drafts where passes are memory-bound and drafts are
// taken, none where a drafted token costs most of a pass or drafts fail.
TEST(Draft, DocumentDrafterProposesWhatPays) {
  DocumentDrafter d(8);
  std::vector<int32_t> doc;
  for (int r = 0; r < 4; ++r)
    for (int32_t id = 10; id < 40; ++id) doc.push_back(id);
  d.observe_prompt(doc);
  int32_t out[16];
  const std::vector<int32_t> ctx = {10, 11, 12};
  // The prior (half taken, a tenth of a pass each): a few tokens.
  const int first = d.propose(ctx, 16, out);
  EXPECT_GT(first, 1);
  EXPECT_LE(first, 8);
  EXPECT_EQ(out[0], 13);
  // Memory-bound passes (a drafted token costs 5 % of a pass), drafts taken: the most.
  for (int i = 0; i < 20; ++i) {
    d.observe_pass(1, 1.0);
    d.observe_pass(9, 1.4);
    d.feedback(8, 8);
  }
  EXPECT_NEAR(d.pass_ms(), 1.0, 1e-9);
  EXPECT_NEAR(d.extra_ms(), 0.05, 1e-6);
  EXPECT_EQ(d.propose(ctx, 16, out), 8);
  EXPECT_EQ(d.propose(ctx, 3, out), 3);
  EXPECT_EQ(d.best_length(0.0, 8), 0);  // never taken: nothing pays
  // Arithmetic-bound passes (a drafted token costs 0.6 of a pass): only a
  // near-certain draft pays.
  for (int i = 0; i < 40; ++i) d.observe_pass(2, 1.6);
  EXPECT_NEAR(d.extra_ms(), 0.6, 1e-3);
  EXPECT_EQ(d.best_length(0.5, 8), 0);
  EXPECT_EQ(d.best_length(0.95, 8), 3);  // 3.71 tokens for 2.8 passes
  EXPECT_GE(d.best_length(0.99, 8), 6);
  // Drafts rejected at once: the record falls until proposing stops, but a
  // draft is still tried now and then.
  for (int i = 0; i < 40; ++i) d.feedback(4, 0);
  int proposed = 0;
  for (int i = 0; i < 32; ++i) proposed += d.propose(ctx, 16, out) > 0;
  EXPECT_EQ(proposed, 2);
  DocumentDrafter off(0);
  off.observe_prompt(doc);
  EXPECT_EQ(off.propose(ctx, 16, out), 0);
  EXPECT_EQ(d.propose(ctx, 0, out), 0);
}

// A suggestion that starts repeating itself ends before the first repeated
// whole line (its own earlier one, or the line above the cursor), newline
// included; the first (partial) line and blank lines never count.
TEST(StopStream, RepeatedLinesEndTheText) {
  std::string t = "x)\n    install -x\n    run\n    install -x\n    run\n";
  EXPECT_TRUE(cut_repeated_line(&t, ""));
  EXPECT_EQ(t, "x)\n    install -x\n    run");
  t = "a\n  b = 1\n";
  EXPECT_TRUE(cut_repeated_line(&t, "b = 1  "));  // the line above the cursor's, spaces aside
  EXPECT_EQ(t, "a");
  t = "run\nrun\n\n\nx\n";  // the first line is the cursor line's rest: not a whole line
  EXPECT_FALSE(cut_repeated_line(&t, ""));
  t = "a\n  y\n  y";  // the last line is not whole yet
  EXPECT_FALSE(cut_repeated_line(&t, ""));
  // Streamed: whole lines only are passed on, and the repeat is never shown.
  std::string shown;
  const std::function<bool(std::string_view)> sink = [&](std::string_view p) {
    shown += p;
    return true;
  };
  StopStream s;
  s.reset(nullptr, 0, StopStream::Sink::of(sink));
  s.stop_repeated_lines("def f():");
  bool go = true;
  for (std::string_view piece : {"x\n", "  a = 1", "\n  b", " = 2\n", "  a = 1\n", "  c\n"})
    if (go) go = s.push(piece);
  EXPECT_FALSE(go);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(shown, "x\n  a = 1\n  b = 2");
  EXPECT_EQ(s.text(), "x\n  a = 1\n  b = 2");
}

TEST(StopStream, HoldsBackWhatCouldBecomeAStopString) {
  std::string seen;
  StopStream s;
  const std::vector<std::string> stop = {"END"};
  s.reset(&stop, 0, {[](void* p, std::string_view t) {
                       static_cast<std::string*>(p)->append(t);
                       return true;
                     },
                     &seen});
  EXPECT_TRUE(s.push("abcE"));
  EXPECT_EQ(seen, "ab");  // "cE" may be the start of "END"
  EXPECT_FALSE(s.push("ND tail"));
  EXPECT_EQ(seen, "abc");
  EXPECT_TRUE(s.stopped());
  std::string cut = "x\n  y\n z";
  EXPECT_TRUE(apply_stops(&cut, {}, 2));
  EXPECT_EQ(cut, "x\n  y\n ");
}

}  // namespace
}  // namespace laya
