// The random-weight GGUF writer behind `laya mkmodel`: a preset's metadata,
// tokenizer and tensor plan, with seeded normal-ish weights quantized by the
// CPU backend's reference quantizers (modelgen is a tool-level library above
// the backend).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "format/mlx_quantize.h"
#include "format/quantize.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "format/gguf_writer.h"
#include "model/hparams.h"
#include "modelgen/presets.h"
#include "modelgen/vocab.h"

namespace laya {

namespace {

using modelgen::VocabMeta;

// Normal-ish values (Irwin–Hall of four 16-bit uniforms: mean 0, std `std`,
// bounded at ±3.46 std), from xorshift64*.
void fill_normal(float* x, int64_t n, uint64_t seed, float mean, float std) {
  uint64_t s = seed;
  uint64_t state = splitmix64(s) | 1;
  const float scale = std / (65536.0f * 0.57735027f);  // sqrt(4/12) * 65536
  const float offset = 2.0f * 65535.0f / 2.0f;
  for (int64_t i = 0; i < n; ++i) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const uint64_t r = state * 0x2545F4914F6CDD1Dull;
    const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    x[i] = mean + (sum - 2.0f * offset) * scale;
  }
}

// Row r of the plan's tensor `index`: its values depend only on (seed, index,
// r), so every file type of a preset and seed holds the same model.
void fill_row(uint64_t seed, size_t index, TensorRole role, int64_t r, float* row, int64_t ncols) {
  float mean = 0, stdv = 0.02f;
  if (role == TensorRole::kNorm) mean = 1.0f, stdv = 0.05f;
  const uint64_t tseed = seed * 0x100000001B3ull + index * 0x9E3779B97F4A7C15ull;
  uint64_t s = tseed + static_cast<uint64_t>(r);
  fill_normal(row, ncols, splitmix64(s), mean, stdv);
}

// The preset's tokenizer.json (given, or its fixture), else a synthetic
// vocabulary; padded up to n_vocab.
Status load_vocab(const ModelPreset& p, const MkModelOptions& opt, VocabMeta* vocab) {
  std::string tok_path = opt.tokenizer_json;
  if (tok_path.empty()) tok_path = modelgen::find_fixture_tokenizer(p, opt.fixtures_dir);
  if (!tok_path.empty()) {
    LAYA_TRY(modelgen::hf_vocab(p, tok_path, vocab).with_context("tokenizer"));
  } else {
    modelgen::synthetic_vocab(p, vocab);
  }
  while (static_cast<int64_t>(vocab->tokens.size()) < p.n_vocab) {
    vocab->tokens.push_back("[PAD" + std::to_string(vocab->tokens.size()) + "]");
    vocab->types.push_back(modelgen::kUnused);
  }
  return Status::Ok();
}

// The metadata convert_hf_to_gguf.py writes for this architecture.
void write_metadata(const ModelPreset& p, MkType type, const VocabMeta& vocab, gguf::Writer& w) {
  const std::string a = p.arch + ".";
  w.set_string("general.architecture", p.arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", p.name + " (random weights, laya mkmodel)");
  w.set_u32("general.file_type", static_cast<uint32_t>(type));
  w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(p.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(p.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(p.n_layer));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(p.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(p.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(p.n_head_kv));
  w.set_f32(a + "rope.freq_base", static_cast<float>(p.rope_theta));
  const ArchSpec* arch = find_arch_by_gguf_name(p.arch);  // checked by the caller
  w.set_f32(a + (arch && arch->layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"),
            p.rms_eps);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(p.head_dim));
  if (p.qk_norm || p.head_dim * p.n_head != p.n_embd) {
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(p.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(p.head_dim));
  }
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(p.n_vocab));
  if (p.embd_scale > 0) w.set_f32(a + "embedding_scale", p.embd_scale);
  if (p.residual_scale > 0) w.set_f32(a + "residual_scale", p.residual_scale);
  if (p.attn_scale > 0) w.set_f32(a + "attention.scale", p.attn_scale);
  if (p.logit_scale > 0) w.set_f32(a + "logit_scale", p.logit_scale);
  if (p.sliding_window > 0) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(p.sliding_window));
  if (p.attn_softcap > 0) w.set_f32(a + "attn_logit_softcapping", p.attn_softcap);
  if (p.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", p.final_softcap);
  w.set_string("tokenizer.ggml.model", vocab.model);
  w.set_string("tokenizer.ggml.pre", vocab.pre);
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_string_array("tokenizer.ggml.merges", vocab.merges);
  if (vocab.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos));
  if (vocab.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos));
  if (vocab.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  // The chat template of the model family whose tokenizer this is (short
  // forms of Qwen's ChatML and Llama 3's), so chat servers treat the file as
  // they would the real model.
  auto has = [&](std::string_view t) { return std::find(vocab.tokens.begin(), vocab.tokens.end(), t) != vocab.tokens.end(); };
  if (has("<|im_start|>") && has("<|im_end|>")) {
    w.set_string("tokenizer.chat_template",
                 "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}");
  } else if (has("<|start_header_id|>") && has("<|eot_id|>")) {
    w.set_string("tokenizer.chat_template",
                 "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                 "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}{% if "
                 "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}");
  }
}

// Streams one tensor's random rows, quantized, in batches of ~32 MB split
// over the threads. Each row's values depend only on (seed, tensor, row), so
// the file is the same for any thread count.
class TensorWriter {
 public:
  TensorWriter(const ModelPreset& p, const MkModelOptions& opt, uint64_t file_bytes, gguf::Writer& w)
      : p_(p), opt_(opt), file_bytes_(file_bytes), w_(w) {
    n_threads_ = opt.n_threads > 0 ? opt.n_threads : static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads_ < 1) n_threads_ = 1;
    rows_.resize(static_cast<size_t>(n_threads_));
  }

  Status write(const PlannedTensor& t, size_t index) {
    if (t.role == TensorRole::kRopeFreqs) {
      std::vector<float> f = llama3_rope_factors(p_.head_dim, p_.rope_theta, p_.rope_factor, p_.rope_low_freq,
                                                 p_.rope_high_freq, static_cast<double>(p_.rope_orig_ctx));
      return w_.write(f.data(), f.size() * sizeof(float));
    }
    const int64_t ncols = t.ne[0];
    int64_t nrows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) nrows *= t.ne[d];
    const size_t rb = row_bytes(t.type, ncols);
    const int64_t batch = std::max<int64_t>(1, static_cast<int64_t>((size_t{32} << 20) / rb));
    for (int64_t r0 = 0; r0 < nrows; r0 += batch) {
      const int64_t nr = std::min(batch, nrows - r0);
      buf_.resize(static_cast<size_t>(nr) * rb);
      auto work = [&](int tid) {
        std::vector<float>& row = rows_[static_cast<size_t>(tid)];
        row.resize(static_cast<size_t>(ncols));
        for (int64_t r = tid; r < nr; r += n_threads_) {
          fill_row(opt_.seed, index, t.role, r0 + r, row.data(), ncols);
          quantize_row(t.type, row.data(), buf_.data() + static_cast<size_t>(r) * rb, ncols);
        }
      };
      run_threads(static_cast<int>(std::min<int64_t>(n_threads_, nr)), work);
      LAYA_TRY(w_.write(buf_.data(), buf_.size()));
      done_bytes_ += buf_.size();
      if (opt_.progress) opt_.progress(done_bytes_, file_bytes_);
    }
    return Status::Ok();
  }

 private:
  template <typename F>
  static void run_threads(int nt, F& work) {
    if (nt <= 1) return work(0);
    std::vector<std::thread> th;
    th.reserve(static_cast<size_t>(nt - 1));
    int k = 1;
    try {
      for (; k < nt; ++k) th.emplace_back(work, k);
    } catch (const std::system_error&) {
      // The OS refused a thread: the caller does the shares of those not
      // started (a row's values do not depend on the thread that makes it).
    }
    for (int j = k; j < nt; ++j) work(j);
    work(0);
    for (auto& x : th) x.join();
  }

  const ModelPreset& p_;
  const MkModelOptions& opt_;
  const uint64_t file_bytes_;
  gguf::Writer& w_;
  int n_threads_ = 1;
  std::vector<uint8_t> buf_;
  std::vector<std::vector<float>> rows_;
  uint64_t done_bytes_ = 0;
};

// config.json as transformers writes it for the preset, with mlx-lm's
// "quantization" (and its copy "quantization_config").
nlohmann::json mlx_config(const ModelPreset& p, int bits) {
  static const std::map<std::string, std::string> kClass = {
      {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
      {"gemma2", "Gemma2ForCausalLM"}, {"gemma3", "Gemma3ForCausalLM"}};
  // The family's transformers name (gemma3: gemma3_text, Gemma3ForCausalLM's).
  const char* model_type = find_arch_by_gguf_name(p.arch)->hf_model_types[0];
  nlohmann::json c = {{"model_type", model_type}, {"hidden_size", p.n_embd}, {"num_hidden_layers", p.n_layer},
                      {"num_attention_heads", p.n_head}, {"num_key_value_heads", p.n_head_kv}, {"head_dim", p.head_dim},
                      {"intermediate_size", p.n_ff}, {"vocab_size", p.n_vocab}, {"max_position_embeddings", p.n_ctx},
                      {"rms_norm_eps", p.rms_eps}, {"rope_theta", p.rope_theta}, {"tie_word_embeddings", p.tied},
                      {"attention_bias", p.qkv_bias}, {"torch_dtype", "bfloat16"}};
  if (auto it = kClass.find(p.arch); it != kClass.end()) c["architectures"] = {it->second};
  if (p.embd_scale > 0) c["embedding_multiplier"] = p.embd_scale;  // Granite's (see ModelPreset)
  if (p.residual_scale > 0) c["residual_multiplier"] = p.residual_scale;
  if (p.attn_scale > 0) c["attention_multiplier"] = p.attn_scale;
  if (p.logit_scale > 0) c["logits_scaling"] = p.logit_scale;
  if (p.sliding_window > 0) c["sliding_window"] = p.sliding_window;  // Gemma 2 / 3's (see ModelPreset)
  if (p.sliding_window > 0 && p.swa_period > 0) {  // which layers slide, as transformers 4.53+ writes it
    nlohmann::json types = nlohmann::json::array();
    for (int64_t i = 0; i < p.n_layer; ++i)
      types.push_back((i + 1) % p.swa_period != 0 ? "sliding_attention" : "full_attention");
    c["layer_types"] = types;
  }
  if (p.rope_theta_local > 0) c["rope_local_base_freq"] = p.rope_theta_local;
  if (p.attn_softcap > 0) c["attn_logit_softcapping"] = p.attn_softcap;
  if (p.final_softcap > 0) c["final_logit_softcapping"] = p.final_softcap;
  if (p.query_pre_attn_scalar > 0) c["query_pre_attn_scalar"] = p.query_pre_attn_scalar;
  if (p.rope_factor > 0) {
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", p.rope_factor}, {"low_freq_factor", p.rope_low_freq},
                         {"high_freq_factor", p.rope_high_freq}, {"original_max_position_embeddings", p.rope_orig_ctx}};
  }
  c["quantization"] = {{"group_size", 64}, {"bits", bits}, {"mode", "affine"}};
  c["quantization_config"] = c["quantization"];
  return c;
}

// The preset as an MLX folder: the GGUF plan's tensors with the same values
// (fill_row), under their Hugging Face names, each matrix and the embedding
// quantized (format/mlx_quantize.h), the rest BF16 (vectors F32).
Result<MkModelReport> make_random_mlx_folder(const ModelPreset& p, const MkModelOptions& opt, const std::string& dir,
                                             const std::string& tok_path) {
  const ArchSpec& arch = *find_arch_by_gguf_name(p.arch);
  std::map<std::string, std::string> hf_name;  // GGUF name → HF name
  for (const TensorSpec& s : arch.tensors()) {
    if (!s.hf) continue;
    if (!s.per_layer()) hf_name[s.gguf] = s.hf;
    for (int64_t il = 0; s.per_layer() && il < p.n_layer; ++il) {
      std::string h = s.hf;
      h.replace(h.find("{}"), 2, std::to_string(il));
      hf_name[s.gguf_name(il)] = h;
    }
  }
  MkModelReport rep;
  std::vector<SafetensorsArray> arrays;
  const std::vector<PlannedTensor> plan = plan_tensors(p, opt.type);
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const PlannedTensor& t = plan[ti];
    auto name = hf_name.find(t.name);
    if (name == hf_name.end()) continue;  // rope_freqs: config.json's rope_scaling says it
    const int64_t cols = t.ne[0], rows = t.ne.size() > 1 ? t.ne[1] : 1;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) fill_row(opt.seed, ti, t.role, r, w.data() + r * cols, cols);
    rep.n_params += static_cast<uint64_t>(rows * cols);
    std::vector<int64_t> shape(t.ne.rbegin(), t.ne.rend());
    if (const int bits = mlx_bits(t.type)) {
      MlxQuantizedMatrix m = mlx_quantize(w.data(), rows, cols, bits, 64, DType::BF16);
      const std::string mod = name->second.substr(0, name->second.size() - std::string_view(".weight").size());
      arrays.push_back({mod + ".weight", "U32", {rows, cols * bits / 32}, std::move(m.q)});
      arrays.push_back({mod + ".scales", "BF16", {rows, cols / 64}, std::move(m.scales)});
      arrays.push_back({mod + ".biases", "BF16", {rows, cols / 64}, std::move(m.biases)});
    } else {
      const DType ft = t.ne.size() > 1 ? DType::BF16 : DType::F32;
      std::vector<uint8_t> bytes(row_bytes(ft, cols) * static_cast<size_t>(rows));
      quantize_row(ft, w.data(), bytes.data(), rows * cols);
      arrays.push_back({name->second, dtype_name(ft), shape, std::move(bytes)});
    }
    if (opt.progress) opt.progress(ti + 1, plan.size());
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kIo, fmt::format("{}: cannot create the folder: {}", dir, ec.message()));
  const std::filesystem::path d(dir);
  const int bits = opt.type == MkType::kMlx4 ? 4 : 8;
  LAYA_TRY(write_file_atomic((d / "config.json").string(), mlx_config(p, bits).dump(2), opt.output));
  LAYA_TRY(write_safetensors((d / "model.safetensors").string(), arrays, opt.output));
  for (const SafetensorsArray& a : arrays) rep.file_bytes += a.bytes.size();
  rep.tokenizer_source = "none";
  if (!tok_path.empty()) {  // the fixture's tokenizer, as an HF folder carries it
    LAYA_ASSIGN_OR_RETURN(std::string tok, read_file(tok_path));
    LAYA_TRY(write_file_atomic((d / "tokenizer.json").string(), tok, opt.output));
    rep.tokenizer_source = tok_path;
  }
  return rep;
}

}  // namespace

Result<MkModelReport> make_random_model(const ModelPreset& p, const MkModelOptions& opt, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  MkModelReport rep;
  LAYA_TRY(ThreadPool::check_count(opt.n_threads));
  // The output may not be the tokenizer it reads (nor the config beside it);
  // checked before the minutes of work, not after.
  OutputOptions out_opt = opt.output;
  const std::string tok_path =
      opt.tokenizer_json.empty() ? modelgen::find_fixture_tokenizer(p, opt.fixtures_dir) : opt.tokenizer_json;
  if (!tok_path.empty()) {
    out_opt.inputs.push_back(tok_path);
    out_opt.inputs.push_back((std::filesystem::path(tok_path).parent_path() / "tokenizer_config.json").string());
  }
  if (!find_arch_by_gguf_name(p.arch)) {
    return Status(StatusCode::kUnsupported, fmt::format("preset '{}': architecture '{}' is not supported (supported: {})",
                                                        p.name, p.arch, supported_arch_list()));
  }
  if (is_mlx_type(opt.type)) {
    LAYA_ASSIGN_OR_RETURN(rep, make_random_mlx_folder(p, opt, path, tok_path));
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
  }
  LAYA_TRY(check_output(path, out_opt));
  gguf::Writer w(32);
  {
    VocabMeta vocab;  // freed once the writer holds the encoded bytes
    LAYA_TRY(load_vocab(p, opt, &vocab));
    rep.tokenizer_source = vocab.source;
    rep.n_tokens_real = vocab.n_real;
    write_metadata(p, opt.type, vocab, w);
  }
  const std::vector<PlannedTensor> plan = plan_tensors(p, opt.type);
  for (const auto& t : plan) {
    LAYA_ASSIGN_OR_RETURN(size_t idx, w.add_tensor(t.name, t.type, t.ne));
    (void)idx;
    int64_t ne = 1;
    for (int64_t d : t.ne) ne *= d;
    rep.n_params += static_cast<uint64_t>(ne);
    if (!can_quantize(t.type))
      return Status(StatusCode::kUnsupported, fmt::format("tensor '{}': no quantizer for {}", t.name, dtype_name(t.type)));
  }
  rep.file_bytes = w.file_size();
  LAYA_TRY(w.begin(path, out_opt));
  TensorWriter tw(p, opt, rep.file_bytes, w);
  for (size_t ti = 0; ti < plan.size(); ++ti) LAYA_TRY(tw.write(plan[ti], ti));
  if (opt.progress) opt.progress(rep.file_bytes, rep.file_bytes);  // the end, always said (the header is written too)
  LAYA_TRY(w.finish());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace laya
