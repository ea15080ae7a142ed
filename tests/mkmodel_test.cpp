// laya mkmodel: the GGUF writer round-trips through laya's reader, tiny
// random models load and run, the Q4_K_M mix matches llama.cpp's rules and
// the tokenizer metadata matches the tokenizer.json it came from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/engine.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "model/model.h"
#include "modelgen/presets.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("laya_mk_" + std::to_string(::getpid()) + "_" + name)).string();
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& n) : path(temp_path(n)) {}
  ~TempFile() { std::remove(path.c_str()); }
};

TEST(MkmodelGgufWriter, RoundTripsEveryValueTypeAndAlignsTensors) {
  TempFile tf("writer.gguf");
  gguf::Writer w;
  w.set_u8("k.u8", 200);
  w.set_i8("k.i8", -100);
  w.set_u16("k.u16", 60000);
  w.set_i16("k.i16", -30000);
  w.set_u32("k.u32", 4000000000u);
  w.set_i32("k.i32", -2000000000);
  w.set_u64("k.u64", 18000000000000000000ull);
  w.set_i64("k.i64", -9000000000000000000ll);
  w.set_f32("k.f32", 1.5f);
  w.set_f64("k.f64", -2.25);
  w.set_bool("k.bool", true);
  w.set_string("k.str", "héllo");
  w.set_string_array("k.strs", {"a", "", "b c", "\xC4\xA0x"});
  w.set_i32_array("k.i32s", {1, -2, 3});
  w.set_f32_array("k.f32s", {0.5f, 0.25f});
  const uint16_t u16s[] = {7, 8, 9, 10};
  w.set_array("k.u16s", gguf::ValueType::kU16, u16s, 4);
  std::vector<float> a(5 * 3), b(64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
  ASSERT_TRUE(w.add_tensor("a", DType::F32, {5, 3}).ok());  // 60 bytes: the next one needs padding
  ASSERT_TRUE(w.add_tensor("b", DType::F32, {64}).ok());
  EXPECT_FALSE(w.add_tensor("a", DType::F32, {1}).ok());      // duplicate
  EXPECT_FALSE(w.add_tensor("q", DType::Q8_0, {33}).ok());    // not a multiple of the block
  const uint64_t predicted = w.file_size();
  ASSERT_TRUE(w.begin(tf.path).ok());
  ASSERT_TRUE(w.write(a.data(), 6 * 4).ok());  // in pieces
  ASSERT_TRUE(w.write(a.data() + 6, 9 * 4).ok());
  EXPECT_EQ(w.current_tensor(), 1u);
  EXPECT_FALSE(w.write(b.data(), 65 * 4).ok());  // too long for "b"
  ASSERT_TRUE(w.write(b.data(), 64 * 4).ok());
  ASSERT_TRUE(w.finish().ok());
  EXPECT_EQ(std::filesystem::file_size(tf.path), predicted);

  auto fr = gguf::File::open(tf.path);
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  const gguf::File& f = **fr;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_int("k.u8").value(), 200);
  EXPECT_EQ(f.get_int("k.i8").value(), -100);
  EXPECT_EQ(f.get_int("k.u16").value(), 60000);
  EXPECT_EQ(f.get_int("k.i16").value(), -30000);
  EXPECT_EQ(f.get_int("k.u32").value(), 4000000000ll);
  EXPECT_EQ(f.get_int("k.i32").value(), -2000000000);
  EXPECT_EQ(f.find("k.u64")->u, 18000000000000000000ull);
  EXPECT_EQ(f.get_int("k.i64").value(), -9000000000000000000ll);
  EXPECT_EQ(f.get_float("k.f32").value(), 1.5);
  EXPECT_EQ(f.get_float("k.f64").value(), -2.25);
  EXPECT_EQ(f.get_bool("k.bool").value(), true);
  EXPECT_EQ(f.get_string("k.str").value(), "héllo");
  auto strs = f.get_string_array("k.strs");
  ASSERT_TRUE(strs.ok());
  ASSERT_EQ(strs.value()->size(), 4u);
  EXPECT_EQ((*strs.value())[2], "b c");
  EXPECT_EQ((*strs.value())[3], "\xC4\xA0x");
  auto i32s = f.get_numeric_array("k.i32s");
  ASSERT_TRUE(i32s.ok());
  EXPECT_EQ(i32s.value()->count, 3u);
  EXPECT_EQ(i32s.value()->array_i64(1), -2);
  EXPECT_EQ(f.get_numeric_array("k.f32s").value()->array_f64(1), 0.25);
  EXPECT_EQ(f.get_numeric_array("k.u16s").value()->array_i64(3), 10);
  ASSERT_EQ(f.tensors().size(), 2u);
  const gguf::TensorInfo* ta = f.find_tensor("a");
  const gguf::TensorInfo* tb = f.find_tensor("b");
  ASSERT_TRUE(ta && tb);
  EXPECT_EQ(ta->ne[0], 5);
  EXPECT_EQ(ta->ne[1], 3);
  EXPECT_EQ(tb->offset % 32, 0u);
  EXPECT_EQ(tb->offset, 64u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ta->data) % 32, 0u);
  EXPECT_EQ(std::memcmp(ta->data, a.data(), 60), 0);
  EXPECT_EQ(std::memcmp(tb->data, b.data(), 256), 0);
}

TEST(MkmodelGgufWriter, IncompleteTensorIsAnError) {
  TempFile tf("incomplete.gguf");
  gguf::Writer w;
  ASSERT_TRUE(w.add_tensor("a", DType::F32, {8}).ok());
  ASSERT_TRUE(w.begin(tf.path).ok());
  float x[4] = {};
  ASSERT_TRUE(w.write(x, sizeof(x)).ok());
  EXPECT_FALSE(w.finish().ok());
}

TEST(MkmodelGgufWriter, CustomAlignmentIsRecorded) {
  TempFile tf("align.gguf");
  gguf::Writer w(64);
  ASSERT_TRUE(w.add_tensor("a", DType::F32, {3}).ok());
  ASSERT_TRUE(w.add_tensor("b", DType::F32, {3}).ok());
  const uint64_t predicted = w.file_size();
  ASSERT_TRUE(w.begin(tf.path).ok());
  float x[3] = {1, 2, 3};
  ASSERT_TRUE(w.write(x, 12).ok());
  ASSERT_TRUE(w.write(x, 12).ok());
  ASSERT_TRUE(w.finish().ok());
  EXPECT_EQ(std::filesystem::file_size(tf.path), predicted);
  auto f = gguf::File::open(tf.path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->find_tensor("b")->offset, 64u);
}

// ---- tiny random models load and run ---------------------------------------------

// Gemma 2 / 3's attention as the model loaded it, against the preset: which
// layers slide and how far, the local layers' RoPE base, the soft-caps, and
// the query scale (a GGUF's derived from head_dim, config.json's from
// query_pre_attn_scalar: the same where they are equal, as in the presets).
void expect_attention_as_preset(const ModelPreset& p, const HParams& h) {
  EXPECT_EQ(h.sliding_window, p.sliding_window);
  for (int64_t il = 0; il < p.n_layer && p.swa_period > 0; ++il) {
    EXPECT_EQ(h.window(il), (il + 1) % p.swa_period != 0 ? p.sliding_window : 0) << "layer " << il;
  }
  if (p.rope_theta_local > 0) {
    EXPECT_EQ(h.rope_theta_local, p.rope_theta_local);
  }
  EXPECT_FLOAT_EQ(h.attn_softcap, p.attn_softcap);
  EXPECT_FLOAT_EQ(h.final_softcap, p.final_softcap);
  if (p.query_pre_attn_scalar > 0) {
    const float scale = h.attn_scale > 0 ? h.attn_scale : 1.0f / std::sqrt(static_cast<float>(h.head_dim));
    EXPECT_FLOAT_EQ(scale, 1.0f / std::sqrt(p.query_pre_attn_scalar));
  }
}

void load_and_run(const std::string& preset, MkType type) {
  SCOPED_TRACE(preset + " " + mk_type_name(type));
  const ModelPreset* p = find_preset(preset);
  ASSERT_NE(p, nullptr);
  TempFile tf(preset + "_" + mk_type_name(type) + ".gguf");
  MkModelOptions opt;
  opt.type = type;
  opt.seed = 7;
  opt.n_threads = 2;
  // Progress: counts that only grow, ending at the file's size.
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  opt.progress = [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); };
  auto rep = make_random_model(*p, opt, tf.path);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(std::filesystem::file_size(tf.path), rep->file_bytes);
  ASSERT_GE(progress.size(), 2u);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].second, rep->file_bytes) << i;
    EXPECT_LE(progress[i].first, progress[i].second) << i;
    if (i > 0) {
      EXPECT_GE(progress[i].first, progress[i - 1].first) << i;
    }
  }
  EXPECT_EQ(progress.back().first, rep->file_bytes);
  EXPECT_EQ(rep->tokenizer_source, "synthetic");

  auto m = Model::load(tf.path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const HParams& h = (*m)->hparams();
  EXPECT_EQ(h.arch, p->arch);
  EXPECT_EQ(h.n_embd, p->n_embd);
  EXPECT_EQ(h.n_layer, p->n_layer);
  EXPECT_EQ(h.n_head, p->n_head);
  EXPECT_EQ(h.n_head_kv, p->n_head_kv);
  EXPECT_EQ(h.head_dim, p->head_dim);
  EXPECT_EQ(h.n_ff, p->n_ff);
  EXPECT_EQ(h.n_vocab, p->n_vocab);
  if (p->embd_scale > 0) {  // Granite's multipliers read back as written
    EXPECT_FLOAT_EQ(h.embd_scale, p->embd_scale);
    EXPECT_FLOAT_EQ(h.residual_scale, p->residual_scale);
    EXPECT_FLOAT_EQ(h.attn_scale, p->attn_scale);
    EXPECT_FLOAT_EQ(h.logit_scale, p->logit_scale);
  }
  expect_attention_as_preset(*p, h);
  EXPECT_EQ(h.n_ctx_train, p->n_ctx);
  EXPECT_EQ(h.tied_embeddings, p->tied);
  EXPECT_FLOAT_EQ(h.rms_eps, p->rms_eps);
  EXPECT_EQ(h.rope_theta, p->rope_theta);
  EXPECT_EQ(h.rope_freq_factors.empty(), p->rope_factor == 0);
  EXPECT_EQ((*m)->n_params(), rep->n_params);
  // Types as planned.
  std::map<std::string, DType> want;
  for (const auto& t : plan_tensors(*p, type)) want[t.name] = t.type;
  for (const auto& t : (*m)->all_tensors()) EXPECT_EQ(t.type, want[t.name]) << t.name;

  auto tok = tok::Tokenizer::from_gguf(*(*m)->gguf_file());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->n_vocab(), p->n_vocab);
  auto ids = (*tok)->encode("hello there, in the rain");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*tok)->decode(ids.value(), {.skip_special = true}), "hello there, in the rain");

  std::shared_ptr<const Model> model(std::move(m).value().release());
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 64;
  auto eng = Engine::create(model, eo);
  ASSERT_TRUE(eng.ok()) << eng.status().to_string();
  auto seq = (*eng)->new_sequence();
  std::vector<int32_t> prompt = ids.value();
  ASSERT_TRUE((*eng)->prefill(*seq, prompt, 0).ok());
  const float* lg = seq->logits();
  double sumsq = 0;
  for (int64_t i = 0; i < p->n_vocab; ++i) {
    ASSERT_TRUE(std::isfinite(lg[i])) << "logit " << i;
    sumsq += double(lg[i]) * lg[i];
  }
  EXPECT_GT(sumsq, 0.0);
  ASSERT_TRUE((*eng)->decode(*seq, 5).ok());
  for (int64_t i = 0; i < p->n_vocab; ++i) ASSERT_TRUE(std::isfinite(seq->logits()[i]));
}

TEST(MkmodelTiny, LlamaQ8_0) { load_and_run("test-tiny", MkType::kQ8_0); }
TEST(MkmodelTiny, LlamaQ4_K_M) { load_and_run("test-tiny", MkType::kQ4_K_M); }
TEST(MkmodelTiny, LlamaF16) { load_and_run("test-tiny", MkType::kF16); }
TEST(MkmodelTiny, LlamaBF16) { load_and_run("test-tiny", MkType::kBF16); }
TEST(MkmodelTiny, Llama3RopeUntiedQ4_K_M) { load_and_run("test-tiny-llama3", MkType::kQ4_K_M); }
TEST(MkmodelTiny, Qwen2BiasQ4_K_M) { load_and_run("test-tiny-qwen2", MkType::kQ4_K_M); }  // Q5_0 / Q8_0 fallbacks
TEST(MkmodelTiny, Qwen2BiasQ8_0) { load_and_run("test-tiny-qwen2", MkType::kQ8_0); }
TEST(MkmodelTiny, Qwen3QkNormQ4_K_M) { load_and_run("test-tiny-qwen3", MkType::kQ4_K_M); }
TEST(MkmodelTiny, Qwen3QkNormBF16) { load_and_run("test-tiny-qwen3", MkType::kBF16); }
// The other families from their own tables: phi3's fused matrices, starcoder2's
// biases and LayerNorm epsilon key, in the types a bench would use.
TEST(MkmodelTiny, Phi3FusedQ4_K_M) { load_and_run("test-tiny-phi3", MkType::kQ4_K_M); }
TEST(MkmodelTiny, GraniteQ8_0) { load_and_run("test-tiny-granite", MkType::kQ8_0); }
TEST(MkmodelTiny, Starcoder2BiasesQ8_0) { load_and_run("test-tiny-starcoder2", MkType::kQ8_0); }
TEST(MkmodelTiny, GemmaQ4_K_M) { load_and_run("test-tiny-gemma", MkType::kQ4_K_M); }
// Gemma 2 / 3: post norms, q/k norms, and the attention's metadata (window, soft-caps).
TEST(MkmodelTiny, Gemma2WindowSoftcapQ8_0) { load_and_run("test-tiny-gemma2", MkType::kQ8_0); }
TEST(MkmodelTiny, Gemma3QkNormWindowsQ4_K_M) { load_and_run("test-tiny-gemma3", MkType::kQ4_K_M); }

// The same attention from an MLX folder's config.json (layer_types,
// rope_local_base_freq, the soft-caps, query_pre_attn_scalar).
TEST(MkmodelTiny, GemmaAttentionInAnMlxFolder) {
  for (const char* name : {"test-tiny-gemma2", "test-tiny-gemma3"}) {
    SCOPED_TRACE(name);
    const ModelPreset* p = find_preset(name);
    ASSERT_NE(p, nullptr);
    TempFile dir(std::string(name) + "-mlx");
    MkModelOptions opt;
    opt.type = MkType::kMlx8;
    opt.n_threads = 2;
    opt.output.overwrite = true;
    std::filesystem::remove_all(dir.path);
    ASSERT_TRUE(make_random_model(*p, opt, dir.path).ok());
    auto m = Model::load(dir.path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ((*m)->hparams().arch, p->arch);
    expect_attention_as_preset(*p, (*m)->hparams());
    std::filesystem::remove_all(dir.path);
  }
}

// A Result's value, or `d` where it is an error.
template <typename T>
T or_default(Result<T> r, T d) {
  return r.ok() ? std::move(r).value() : d;
}

// What llama.cpp's loader needs of each family's file (src/models/<arch>.cpp's load_arch_hparams
// and load_arch_tensors, src/llama-model.cpp's load_hparams and create_tensor_qkv,
// src/llama-vocab.cpp), written out here by hand from its source so that a change of laya's
// tables cannot agree with itself: the keys it requires, the tensors it creates (a required one
// missing, a file tensor it does not create, or another shape is a load error there), and a
// tokenizer it accepts. llama.cpp's shapes are ne (row length first), as GGUF's.
struct LlamaCppTensor {
  std::string name;
  bool required;
  std::vector<int64_t> ne;
};

std::vector<LlamaCppTensor> llama_cpp_tensors(const ModelPreset& p) {
  const int64_t E = p.n_embd, V = p.n_vocab, F = p.n_ff, Q = p.n_head * p.head_dim, KV = p.n_head_kv * p.head_dim;
  const std::string& a = p.arch;
  const bool gemma23 = a == "gemma2" || a == "gemma3";
  std::vector<LlamaCppTensor> t = {{"token_embd.weight", true, {E, V}}, {"output_norm.weight", true, {E}}};
  if (a != "gemma" && a != "gemma2") t.push_back({"output.weight", false, {E, V}});  // gemma, gemma2: token_embd
  if (a == "starcoder2") t.push_back({"output_norm.bias", true, {E}});
  // phi3 and starcoder2 size q and the attention output with n_embd, the others with n_head * head_dim.
  const int64_t q = a == "phi3" || a == "starcoder2" ? E : Q;
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    auto add = [&](const std::string& n, bool req, std::vector<int64_t> ne) { t.push_back({b + n, req, std::move(ne)}); };
    add("attn_norm.weight", true, {E});
    add("ffn_norm.weight", true, {E});
    // create_tensor_qkv: attn_qkv (+ bias) when present, else q/k/v (required unless phi3) with optional biases.
    add("attn_qkv.weight", false, {E, q + 2 * KV});
    add("attn_qkv.bias", false, {q + 2 * KV});
    const bool qkv_req = a != "phi3";
    add("attn_q.weight", qkv_req, {E, q});
    add("attn_k.weight", qkv_req, {E, KV});
    add("attn_v.weight", qkv_req, {E, KV});
    add("attn_q.bias", false, {q});
    add("attn_k.bias", false, {KV});
    add("attn_v.bias", false, {KV});
    add("attn_output.weight", true, {q, E});
    add("ffn_down.weight", true, {F, E});
    if (a == "phi3") {
      add("ffn_up.weight", true, {E, 2 * F});  // gate and up, fused
    } else {
      add("ffn_up.weight", true, {E, F});
    }
    if (a == "granite" || a == "gemma" || gemma23) add("ffn_gate.weight", true, {E, F});
    if (gemma23) {  // norms after attention and feed-forward
      add("post_attention_norm.weight", true, {E});
      add("post_ffw_norm.weight", true, {E});
    }
    if (a == "gemma3") {  // per-head q/k norms
      add("attn_q_norm.weight", true, {p.head_dim});
      add("attn_k_norm.weight", true, {p.head_dim});
    }
    if (a == "granite") {
      add("attn_output.bias", false, {E});
      add("ffn_gate.bias", false, {F});
      add("ffn_down.bias", false, {E});
      add("ffn_up.bias", false, {F});
    }
    if (a == "starcoder2") {
      add("attn_norm.bias", true, {E});
      add("ffn_norm.bias", true, {E});
      add("attn_output.bias", true, {E});
      add("ffn_down.bias", true, {E});
      add("ffn_up.bias", true, {F});
    }
  }
  return t;
}

// The pre-tokenizer names llama.cpp's llama_vocab::impl::load accepts for a "gpt2" (BPE)
// tokenizer, of those mkmodel writes (any other name is "unknown pre-tokenizer type").
const std::set<std::string> kLlamaCppPre = {"default", "llama-bpe", "llama3", "qwen2", "smollm", "starcoder", "refact"};

void check_llama_cpp_can_load(const std::string& preset_name) {
  SCOPED_TRACE(preset_name);
  const ModelPreset* p = find_preset(preset_name);
  ASSERT_NE(p, nullptr);
  TempFile tf(preset_name + "-llamacpp.gguf");
  MkModelOptions opt;
  opt.type = MkType::kQ8_0;
  ASSERT_TRUE(make_random_model(*p, opt, tf.path).ok());
  auto fr = gguf::File::open(tf.path);
  ASSERT_TRUE(fr.ok()) << fr.status().to_string();
  const gguf::File& f = **fr;
  const std::string a = p->arch + ".";
  EXPECT_EQ(f.get_string("general.architecture").value(), p->arch);
  // llama_model_base::load_hparams: required; the rest of what it reads has defaults.
  for (const char* k : {"context_length", "embedding_length", "block_count"}) EXPECT_TRUE(f.get_int(a + k).ok()) << a << k;
  EXPECT_EQ(f.get_int(a + "block_count").value(), p->n_layer);
  EXPECT_EQ(f.get_int(a + "embedding_length").value(), p->n_embd);
  EXPECT_EQ(f.get_int(a + "feed_forward_length").value(), p->n_ff);
  EXPECT_EQ(f.get_int(a + "attention.head_count").value(), p->n_head);
  EXPECT_EQ(f.get_int(a + "attention.head_count_kv").value(), p->n_head_kv);
  // n_embd_head_k defaults to n_embd / n_head; key_length says otherwise. n_rot (rope.dimension_count)
  // must equal it for starcoder2 and granite (GGML_ASSERT in their graphs).
  const int64_t head_k = or_default(f.get_int(a + "attention.key_length"), p->n_embd / p->n_head);
  EXPECT_EQ(head_k, p->head_dim);
  EXPECT_EQ(or_default(f.get_int(a + "rope.dimension_count"), head_k), p->head_dim);
  // load_arch_hparams: each family's required keys.
  EXPECT_TRUE(f.get_float(a + (p->arch == "starcoder2" ? "attention.layer_norm_epsilon"
                                                       : "attention.layer_norm_rms_epsilon")).ok());
  if (p->arch == "granite") {
    EXPECT_TRUE(f.get_float(a + "logit_scale").ok()) << "llama.cpp's granite loader requires granite.logit_scale";
    for (const char* k : {"embedding_scale", "residual_scale", "attention.scale"}) EXPECT_TRUE(f.get_float(a + k).ok()) << k;
  }
  if (p->arch == "gemma3") {
    EXPECT_TRUE(f.get_int(a + "attention.sliding_window").ok()) << "llama.cpp's gemma3 loader requires it";
  }
  if (p->arch == "gemma2") {  // optional there (defaults 4096, 50, 30): what the preset says, written
    EXPECT_EQ(f.get_int(a + "attention.sliding_window").value(), p->sliding_window);
    EXPECT_FLOAT_EQ(f.get_float(a + "attn_logit_softcapping").value(), p->attn_softcap);
    EXPECT_FLOAT_EQ(f.get_float(a + "final_logit_softcapping").value(), p->final_softcap);
  }
  // The vocabulary: a tokenizer model it knows, a pre-tokenizer it accepts, merges for BPE, one
  // token (and type) per embedding row.
  const std::string model = or_default(f.get_string("tokenizer.ggml.model"), std::string());
  ASSERT_TRUE(model == "gpt2" || model == "llama") << model;
  if (model == "gpt2") {
    EXPECT_TRUE(kLlamaCppPre.count(or_default(f.get_string("tokenizer.ggml.pre"), std::string()))) << or_default(f.get_string("tokenizer.ggml.pre"), std::string());
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    ASSERT_TRUE(merges.ok());
    for (std::string_view m : **merges) EXPECT_NE(m.find(' ', 1), std::string_view::npos) << m;
  }
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(static_cast<int64_t>((*tokens)->size()), p->n_vocab);
  // Distinct texts: llama.cpp asserts one id per token text (GGML_ASSERT in llama_vocab::impl::load).
  EXPECT_EQ(std::set<std::string_view>((*tokens)->begin(), (*tokens)->end()).size(), (*tokens)->size());
  // llama_vocab::impl::load sets attributes by name (unordered_map::at: the load fails without
  // them) on these tokens where general.name says phi3, as mkmodel's names do.
  if (p->arch == "phi3") {
    for (const char* t : {"<unk>", "<s>", "</s>", "<|endoftext|>"})
      EXPECT_NE(std::find((*tokens)->begin(), (*tokens)->end(), std::string_view(t)), (*tokens)->end()) << t;
  }
  auto types = f.get_numeric_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ((*types)->count, (*tokens)->size());
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    auto id = f.get_int(k);
    if (id.ok()) {
      EXPECT_LT(*id, p->n_vocab) << k;
    }
  }
  // Tensors: every required one there in llama.cpp's shape, and nothing it would not create.
  std::map<std::string, const gguf::TensorInfo*> in_file;
  for (const auto& t : f.tensors()) in_file[t.name] = &t;
  std::set<std::string> created;
  for (const LlamaCppTensor& t : llama_cpp_tensors(*p)) {
    auto it = in_file.find(t.name);
    if (it == in_file.end()) {
      EXPECT_FALSE(t.required) << "llama.cpp requires " << t.name;
      continue;
    }
    created.insert(t.name);
    const gguf::TensorInfo& ti = *it->second;
    ASSERT_EQ(ti.n_dims, static_cast<int>(t.ne.size())) << t.name;
    for (size_t d = 0; d < t.ne.size(); ++d) EXPECT_EQ(ti.ne[d], t.ne[d]) << t.name << " dim " << d;
  }
  for (const auto& [name, ti] : in_file) EXPECT_TRUE(created.count(name)) << "llama.cpp creates no tensor " << name;
  // phi3: q/k/v are optional one by one, but a layer needs them or attn_qkv.
  for (int64_t il = 0; il < p->n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    EXPECT_TRUE(in_file.count(b + "attn_qkv.weight") || in_file.count(b + "attn_q.weight")) << b;
  }
}

TEST(MkmodelLlamaCpp, TinyFamiliesHaveWhatItsLoaderNeeds) {
  for (const char* fam : {"phi3", "granite", "starcoder2", "gemma", "gemma2", "gemma3"})
    check_llama_cpp_can_load(std::string("test-tiny-") + fam);
}

// The benchmark presets' metadata and tensor table (as plan_tensors gives them, no file written):
// the same checks on the shapes `laya bench` compares with llama.cpp at ~0.5 B.
TEST(MkmodelLlamaCpp, HalfBillionPresetsMatchItsTensorTable) {
  for (const char* name :
       {"phi3-0.5b", "granite-0.5b", "starcoder2-0.5b", "gemma-0.5b", "gemma2-0.5b", "gemma3-0.5b"}) {
    SCOPED_TRACE(name);
    const ModelPreset* p = find_preset(name);
    ASSERT_NE(p, nullptr);
    std::map<std::string, std::vector<int64_t>> plan;
    for (const auto& t : plan_tensors(*p, MkType::kQ8_0)) plan[t.name] = t.ne;
    std::set<std::string> created;
    for (const LlamaCppTensor& t : llama_cpp_tensors(*p)) {
      auto it = plan.find(t.name);
      if (it == plan.end()) {
        EXPECT_FALSE(t.required) << "llama.cpp requires " << t.name;
        continue;
      }
      created.insert(t.name);
      EXPECT_EQ(it->second, t.ne) << t.name;
    }
    for (const auto& [n, ne] : plan) EXPECT_TRUE(created.count(n)) << "llama.cpp creates no tensor " << n;
    if (p->arch == "granite") {
      EXPECT_GT(p->logit_scale, 0.0f) << "llama.cpp's granite loader requires logit_scale";
    }
    if (p->arch == "gemma3") {
      EXPECT_GT(p->sliding_window, 0) << "llama.cpp's gemma3 loader requires attention.sliding_window";
    }
  }
}

TEST(MkmodelTiny, SameSeedSameBytes) {
  const ModelPreset* p = find_preset("test-tiny");
  TempFile a("seed_a.gguf"), b("seed_b.gguf"), c("seed_c.gguf");
  MkModelOptions opt;
  opt.type = MkType::kQ4_K_M;
  opt.n_threads = 1;
  ASSERT_TRUE(make_random_model(*p, opt, a.path).ok());
  opt.n_threads = 3;  // thread count does not change the weights
  ASSERT_TRUE(make_random_model(*p, opt, b.path).ok());
  opt.seed = 2;
  ASSERT_TRUE(make_random_model(*p, opt, c.path).ok());
  const std::string sa = test::read_text_file(a.path), sb = test::read_text_file(b.path), sc = test::read_text_file(c.path);
  EXPECT_EQ(sa, sb);
  EXPECT_EQ(sa.size(), sc.size());
  EXPECT_NE(sa, sc);
}

TEST(MkmodelTiny, WeightStatistics) {
  // Matrices ~N(0, 0.02), norms ~1.
  const ModelPreset* p = find_preset("test-tiny");
  TempFile tf("stats.gguf");
  MkModelOptions opt;
  opt.type = MkType::kF32;
  ASSERT_TRUE(make_random_model(*p, opt, tf.path).ok());
  auto f = gguf::File::open(tf.path);
  ASSERT_TRUE(f.ok());
  const gguf::TensorInfo* w = (*f)->find_tensor("blk.0.ffn_up.weight");
  const gguf::TensorInfo* n = (*f)->find_tensor("blk.0.attn_norm.weight");
  ASSERT_TRUE(w && n);
  const float* x = reinterpret_cast<const float*>(w->data);
  double s = 0, s2 = 0;
  const int64_t cnt = w->n_elements();
  for (int64_t i = 0; i < cnt; ++i) s += x[i], s2 += double(x[i]) * x[i];
  EXPECT_NEAR(s / cnt, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(s2 / cnt), 0.02, 0.001);
  const float* y = reinterpret_cast<const float*>(n->data);
  for (int64_t i = 0; i < n->n_elements(); ++i) EXPECT_NEAR(y[i], 1.0f, 0.25f);
}

// ---- Q4_K_M: llama.cpp's mix, per preset ----------------------------------------------
//
// Derived by hand from llama.cpp src/llama-quant.cpp (llama_tensor_get_type_impl
// + tensor_type_fallback): token_embd of a tied model is treated as the output
// (Q6_K, or Q8_0 when n_embd % 256 != 0); attn_v and ffn_down are Q6_K on the
// use_more_bits layers (i < n/8, i >= 7n/8, (i - n/8) % 3 == 2), else Q4_K;
// rows not a multiple of 256 fall back Q4_K → Q5_0 and Q6_K → Q8_0.

struct MixExpect {
  const char* preset;
  DType embd;
  std::set<int> more_bits;  // layers with Q6_K attn_v / ffn_down
  DType v_hi, v_lo;         // attn_v on / off those layers (after fallback)
  DType down_hi, down_lo;
  DType other;              // attn_q/k/output, ffn_gate/up
};

TEST(MkmodelQ4KM, MixMatchesLlamaCppRules) {
  const std::vector<MixExpect> table = {
      {"llama-3.2-1b", DType::Q6_K, {0, 1, 4, 7, 10, 13, 14, 15}, DType::Q6_K, DType::Q4_K, DType::Q6_K, DType::Q4_K,
       DType::Q4_K},
      {"qwen2.5-0.5b", DType::Q8_0, {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23}, DType::Q8_0, DType::Q5_0, DType::Q6_K,
       DType::Q4_K, DType::Q5_0},
      {"qwen3-0.6b", DType::Q6_K, {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}, DType::Q6_K, DType::Q4_K,
       DType::Q6_K, DType::Q4_K, DType::Q4_K},
      {"smollm2-135m", DType::Q8_0, {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29}, DType::Q8_0, DType::Q5_0,
       DType::Q6_K, DType::Q4_K, DType::Q5_0},
  };
  for (const auto& e : table) {
    SCOPED_TRACE(e.preset);
    const ModelPreset* p = find_preset(e.preset);
    ASSERT_NE(p, nullptr);
    int n_checked = 0;
    for (const auto& t : plan_tensors(*p, MkType::kQ4_K_M)) {
      if (t.ne.size() == 1) {
        EXPECT_EQ(t.type, DType::F32) << t.name;
        continue;
      }
      int layer = -1;
      std::sscanf(t.name.c_str(), "blk.%d.", &layer);
      DType want;
      if (t.name == "token_embd.weight") want = e.embd;
      else if (t.name.find("attn_v.weight") != std::string::npos) want = e.more_bits.count(layer) ? e.v_hi : e.v_lo;
      else if (t.name.find("ffn_down.weight") != std::string::npos) want = e.more_bits.count(layer) ? e.down_hi : e.down_lo;
      else want = e.other;
      EXPECT_EQ(t.type, want) << t.name << ": " << dtype_name(t.type) << ", expected " << dtype_name(want);
      ++n_checked;
    }
    EXPECT_EQ(n_checked, 1 + 7 * p->n_layer);
  }
}

TEST(MkmodelPresets, ShapesOfThePublicConfigs) {
  struct S { const char* name; const char* arch; int64_t embd, layers, heads, kv, hd, ff, vocab, ctx; double theta; };
  const S want[] = {
      {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000},
      {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1000000},
      {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1000000},
      {"smollm2-135m", "llama", 576, 30, 9, 3, 64, 1536, 49152, 8192, 100000},
  };
  for (const auto& w : want) {
    const ModelPreset* p = find_preset(w.name);
    ASSERT_NE(p, nullptr) << w.name;
    EXPECT_EQ(p->arch, w.arch);
    EXPECT_EQ(p->n_embd, w.embd);
    EXPECT_EQ(p->n_layer, w.layers);
    EXPECT_EQ(p->n_head, w.heads);
    EXPECT_EQ(p->n_head_kv, w.kv);
    EXPECT_EQ(p->head_dim, w.hd);
    EXPECT_EQ(p->n_ff, w.ff);
    EXPECT_EQ(p->n_vocab, w.vocab);
    EXPECT_EQ(p->n_ctx, w.ctx);
    EXPECT_EQ(p->rope_theta, w.theta);
    EXPECT_TRUE(p->tied);
  }
  EXPECT_EQ(find_preset("qwen2.5-0.5b")->qkv_bias, true);
  EXPECT_EQ(find_preset("qwen3-0.6b")->qk_norm, true);
  EXPECT_EQ(find_preset("llama-3.2-1b")->rope_factor, 32);
  // Q8_0 / F16: every matrix, 1-D tensors F32.
  for (const auto& t : plan_tensors(*find_preset("llama-3.2-1b"), MkType::kQ8_0))
    EXPECT_EQ(t.type, t.ne.size() == 1 ? DType::F32 : DType::Q8_0) << t.name;
  for (const auto& t : plan_tensors(*find_preset("qwen3-0.6b"), MkType::kF16))
    EXPECT_EQ(t.type, t.ne.size() == 1 ? DType::F32 : DType::F16) << t.name;
}

// Gemma 2 / 3 at ~0.5 B: the attention of google/gemma-2-2b and
// google/gemma-3-1b-pt (their config.json), their head layouts, feed-forward
// ratios and vocabularies, and about half a billion parameters.
TEST(MkmodelPresets, GemmaHalfBillionHaveTheirFamiliesAttention) {
  const ModelPreset* g2 = find_preset("gemma2-0.5b");
  const ModelPreset* g3 = find_preset("gemma3-0.5b");
  ASSERT_TRUE(g2 && g3);
  EXPECT_EQ(g2->arch, "gemma2");
  EXPECT_EQ(g2->sliding_window, 4096);
  EXPECT_EQ(g2->swa_period, 2);  // local, global, local, ...
  EXPECT_EQ(g2->attn_softcap, 50.0f);
  EXPECT_EQ(g2->final_softcap, 30.0f);
  EXPECT_EQ(g2->rope_theta, 10000);
  EXPECT_EQ(g2->n_head, 2 * g2->n_head_kv);
  EXPECT_EQ(g2->n_ff, 4 * g2->n_embd);
  EXPECT_EQ(g2->n_vocab, 256000);
  EXPECT_EQ(g2->n_ctx, 8192);
  EXPECT_FALSE(g2->qk_norm);
  EXPECT_EQ(g2->n_layer % 2, 0);
  EXPECT_EQ(g3->arch, "gemma3");
  EXPECT_EQ(g3->sliding_window, 512);
  EXPECT_EQ(g3->swa_period, 6);  // five local, one global
  EXPECT_EQ(g3->rope_theta, 1000000);
  EXPECT_EQ(g3->rope_theta_local, 10000);
  EXPECT_EQ(g3->attn_softcap, 0.0f);
  EXPECT_EQ(g3->final_softcap, 0.0f);
  EXPECT_TRUE(g3->qk_norm);
  EXPECT_EQ(g3->n_head_kv, 1);
  EXPECT_EQ(g3->n_ff, 6 * g3->n_embd);
  EXPECT_EQ(g3->n_vocab, 262144);
  EXPECT_EQ(g3->n_ctx, 32768);
  EXPECT_EQ(g3->n_layer % 6, 0);
  for (const ModelPreset* p : {g2, g3}) {
    SCOPED_TRACE(p->name);
    EXPECT_EQ(p->head_dim, 256);
    EXPECT_EQ(p->query_pre_attn_scalar, 256.0f);  // = head_dim, as the GGUF loaders assume
    EXPECT_EQ(p->rms_eps, 1e-6f);
    EXPECT_TRUE(p->tied);
    double params = 0;
    for (const auto& t : plan_tensors(*p, MkType::kF32)) {
      double n = 1;
      for (int64_t d : t.ne) n *= static_cast<double>(d);
      params += n;
    }
    EXPECT_GT(params, 0.45e9);
    EXPECT_LT(params, 0.55e9);
  }
}

// ---- tokenizer metadata from a real tokenizer.json -------------------------------------

// A model with the real Qwen vocabulary size (padded with [PAD{i}]) and tiny layers.
TEST(MkmodelTokenizer, QwenVocabularyPaddedAndAgreesWithTokenizerJson) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string tj = fx + "/tokenizer/hf/qwen3/tokenizer.json";
  ModelPreset p = *find_preset("test-tiny-qwen2");
  p.n_vocab = 151936;
  p.n_embd = 64, p.n_head = 2, p.n_head_kv = 1, p.head_dim = 32, p.n_ff = 64, p.n_layer = 1;
  TempFile tf("qwenvocab.gguf");
  MkModelOptions opt;
  opt.type = MkType::kQ8_0;
  opt.tokenizer_json = tj;
  auto rep = make_random_model(p, opt, tf.path);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->n_tokens_real, 151669);
  auto f = gguf::File::open(tf.path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->get_string("tokenizer.ggml.pre").value(), "qwen2");
  const auto& toks = *(*f)->get_string_array("tokenizer.ggml.tokens").value();
  ASSERT_EQ(toks.size(), 151936u);
  EXPECT_EQ(toks[151643], "<|endoftext|>");
  EXPECT_EQ(toks[151669], "[PAD151669]");
  EXPECT_EQ(toks[151935], "[PAD151935]");
  const gguf::Value* types = (*f)->get_numeric_array("tokenizer.ggml.token_type").value();
  EXPECT_EQ(types->array_i64(0), 1);        // normal
  EXPECT_EQ(types->array_i64(151643), 3);   // control
  EXPECT_EQ(types->array_i64(151667), 4);   // <think>: user-defined (special = false)
  EXPECT_EQ(types->array_i64(151700), 5);   // padding: unused (as convert_hf_to_gguf.py)
  EXPECT_EQ((*f)->get_int("tokenizer.ggml.bos_token_id").value(), 151643);
  EXPECT_EQ((*f)->get_int("tokenizer.ggml.eos_token_id").value(), 151645);
  EXPECT_EQ((*f)->get_bool("tokenizer.ggml.add_bos_token").value(), false);

  auto g = tok::Tokenizer::from_gguf(**f);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto h = tok::Tokenizer::from_hf_json(tj);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  for (const char* text : {"Hello world! The quick brown fox, 12345 times.", "  spaces\n\nand\ttabs ünïcödé 日本語",
                           "<|im_start|>user\nhi<|im_end|>", "<think>x</think>"}) {
    for (bool special : {false, true}) {
      tok::EncodeOptions eo;
      eo.parse_special = special;
      auto a = (*g)->encode(text, eo);
      auto b = (*h)->encode(text, eo);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a.value(), b.value()) << text;
    }
  }
}

// Llama 3 vocabulary cut to a smaller model (smollm2-135m): the lowest ids
// are kept, BOS/EOS moved to the end, merges that no longer apply dropped.
TEST(MkmodelTokenizer, Llama3VocabularyTruncated) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string tj = fx + "/tokenizer/hf/llama3/tokenizer.json";
  ModelPreset p = *find_preset("test-tiny");
  p.n_vocab = 4096;
  TempFile tf("llamavocab.gguf");
  MkModelOptions opt;
  opt.type = MkType::kQ8_0;
  opt.tokenizer_json = tj;
  auto rep = make_random_model(p, opt, tf.path);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  auto f = gguf::File::open(tf.path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->get_string("tokenizer.ggml.pre").value(), "llama-bpe");
  const auto& toks = *(*f)->get_string_array("tokenizer.ggml.tokens").value();
  ASSERT_EQ(toks.size(), 4096u);
  EXPECT_EQ(toks[4094], "<|begin_of_text|>");
  EXPECT_EQ(toks[4095], "<|end_of_text|>");
  EXPECT_EQ((*f)->get_int("tokenizer.ggml.bos_token_id").value(), 4094);
  EXPECT_EQ((*f)->get_int("tokenizer.ggml.eos_token_id").value(), 4095);
  auto h = tok::Tokenizer::from_hf_json(tj);
  ASSERT_TRUE(h.ok());
  for (size_t i = 0; i < 4094; ++i) ASSERT_EQ(toks[i], (*h)->token_text(static_cast<int32_t>(i))) << i;
  auto g = tok::Tokenizer::from_gguf(**f);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE((*g)->add_bos_default());
  const std::string text = "The quick brown fox jumps over the lazy dog; 2024 was a year.";
  auto ids = (*g)->encode(text);
  ASSERT_TRUE(ids.ok());
  ASSERT_FALSE(ids.value().empty());
  EXPECT_EQ(ids.value()[0], 4094);
  for (int32_t id : ids.value()) EXPECT_LT(id, 4096);
  EXPECT_EQ((*g)->decode(ids.value(), {.skip_special = true}), text);
}

}  // namespace
}  // namespace laya
