// The rules behind validate.h. Each check says why the value matters to the
// forward pass; the limits are wide enough for every published model of the
// supported architectures and narrow enough that a NaN, a sign flip or a
// corrupted count never reaches a kernel or an allocation.
#include "model/validate.h"

#include <cfloat>
#include <cmath>

#include <fmt/format.h>

namespace laya {

namespace {

// The longest trained context of a published model is 10M tokens (Llama 4
// Scout); 2^26 keeps every position product far inside int64 and every
// position inside int32.
constexpr int64_t kMaxContext = int64_t{1} << 26;

Status corrupt(const MetaKeys& k, const std::string& what) {
  return Status(StatusCode::kCorrupt, fmt::format("{}: {}", k.file, what));
}
Status unsupported(const MetaKeys& k, const std::string& what) {
  return Status(StatusCode::kUnsupported, fmt::format("{}: {}", k.file, what));
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

Status check_rope_scaling(const RopeScaling& r, const MetaKeys& k) {
  if (r.type == "linear" && !finite_positive(r.factor)) {
    return corrupt(k, fmt::format("{} = {:g}, expected a finite number > 0 (linear rope scaling divides every "
                                  "frequency by it; 0, negative or NaN gives infinite or NaN angles)",
                                  k.rope_factor, r.factor));
  }
  if (r.type == "llama3" && !k.gguf) {
    const bool ok = finite_positive(r.factor) && finite_positive(r.low_freq_factor) &&
                    std::isfinite(r.high_freq_factor) && r.high_freq_factor > r.low_freq_factor &&
                    finite_positive(r.original_ctx);
    if (!ok) {
      return corrupt(k, fmt::format("llama3 rope scaling: factor = {:g}, low_freq_factor = {:g}, high_freq_factor = {:g}, "
                                    "original_max_position_embeddings = {:g}: expected finite numbers with factor > 0, "
                                    "high_freq_factor > low_freq_factor > 0 and original_max_position_embeddings > 0 "
                                    "(Llama 3.1 uses 8, 1, 4, 8192)",
                                    r.factor, r.low_freq_factor, r.high_freq_factor, r.original_ctx));
    }
  }
  return Status::Ok();
}

// The head layout: how the q/k/v rows split into heads.
Status check_heads(const HParams& h, const DeclaredMeta& d, const MetaKeys& k) {
  if (!d.head_dim_given && h.n_embd % h.n_head != 0) {
    return corrupt(k, fmt::format("{} = {} is not a multiple of {} = {} and {} is absent, so the head size "
                                  "n_embd / n_head would be rounded down (a wrong head count?)",
                                  k.n_embd, h.n_embd, k.n_head, h.n_head, k.head_dim));
  }
  if (h.head_dim % 2 != 0) {
    // RoPE rotates pairs of dimensions.
    return corrupt(k, fmt::format("head size {} ({}) is odd: RoPE rotates pairs of dimensions, so it must be even",
                                  h.head_dim, d.head_dim_given ? k.head_dim + " = " + std::to_string(h.head_dim)
                                                               : k.n_embd + " / " + k.n_head));
  }
  if (h.n_head_kv > h.n_head || h.n_head % h.n_head_kv != 0) {
    // Grouped-query attention: each KV head serves n_head / n_head_kv query heads.
    return corrupt(k, fmt::format("{} = {} does not divide {} = {} (each key/value head serves n_head / n_head_kv "
                                  "query heads; a head count from another model?)",
                                  k.n_head_kv, h.n_head_kv, k.n_head, h.n_head));
  }
  if (d.n_rot != 0 && d.n_rot != h.head_dim) {
    // The forward pass rotates the whole head, as llama, qwen2 and qwen3 do
    // (llama.cpp refuses n_rot != head_dim for them too).
    if (d.n_rot < h.head_dim && d.n_rot % 2 == 0) {
      return unsupported(k, fmt::format("{} = {} but the head size is {}: partial rotary embeddings are not supported "
                                        "(laya rotates the whole head, as {} does)",
                                        k.n_rot, d.n_rot, h.head_dim, k.arch));
    }
    return corrupt(k, fmt::format("{} = {} but the head size is {}: RoPE can rotate at most the whole head, in pairs "
                                  "(a wrong head size or a corrupted value?)",
                                  k.n_rot, d.n_rot, h.head_dim));
  }
  if (!(d.partial_rotary == 1.0)) {
    return unsupported(k, fmt::format("partial_rotary_factor = {:g}: partial rotary embeddings are not supported (laya "
                                      "rotates the whole head, as {} does)", d.partial_rotary, k.arch));
  }
  if (d.value_dim != 0 && d.value_dim != h.head_dim) {
    return unsupported(k, fmt::format("{} = {} differs from the key head size {}: value heads of their own size are "
                                      "not supported (llama, qwen2 and qwen3 use one head size)",
                                      k.value_dim, d.value_dim, h.head_dim));
  }
  return Status::Ok();
}

// A BOS / EOS id the metadata names: -1 (none) or a row of the embedding.
Status check_special_id(int64_t id, const std::string& key, int64_t n_vocab, const MetaKeys& k) {
  if (id >= -1 && id < n_vocab) return Status::Ok();
  return corrupt(k, fmt::format("{} = {} is not a token id (the vocabulary has {} tokens, ids 0..{}): a token id "
                                "from another vocabulary?", key, id, n_vocab, n_vocab - 1));
}

// The attention's extras: the sliding window and its layers, soft-capping,
// the sliding layers' RoPE base.
Status check_attention(const HParams& h, const MetaKeys& k) {
  const std::string p = k.gguf ? k.arch + "." : "";
  if (h.sliding_window < 0 || h.sliding_window > kMaxContext) {
    return corrupt(k, fmt::format("{}{} = {}, expected 0 (none) to {} positions", p,
                                  k.gguf ? "attention.sliding_window" : "sliding_window", h.sliding_window, kMaxContext));
  }
  if (!h.swa_layers.empty() && static_cast<int64_t>(h.swa_layers.size()) != h.n_layer) {
    return corrupt(k, fmt::format("{} lists {} layers' attention but the model has {} = {} layers",
                                  k.gguf ? p + "attention.sliding_window_pattern" : "layer_types", h.swa_layers.size(),
                                  k.n_layer, h.n_layer));
  }
  for (auto [key, v] : {std::pair{"attn_logit_softcapping", h.attn_softcap},
                        std::pair{"final_logit_softcapping", h.final_softcap}}) {
    if (!(std::isfinite(v) && v >= 0 && v < 1e6)) {
      return corrupt(k, fmt::format("{}{} = {:g}, expected a finite number >= 0 (0: none; x becomes cap * tanh(x / "
                                    "cap), so a negative or NaN cap flips or poisons every score; Gemma 2 uses 50 and "
                                    "30)", p, key, v));
    }
  }
  if (h.rope_theta_local != 0 && !(std::isfinite(h.rope_theta_local) && h.rope_theta_local > 1 &&
                                   h.rope_theta_local <= FLT_MAX)) {
    return corrupt(k, fmt::format("{} = {:g}, expected a finite number > 1 (the sliding layers' RoPE base; Gemma 3 "
                                  "uses 10000)", k.gguf ? p + "rope.freq_base_swa" : std::string("rope_local_base_freq"),
                                  h.rope_theta_local));
  }
  return Status::Ok();
}

}  // namespace

MetaKeys MetaKeys::for_gguf(const std::string& path, const std::string& arch) {
  const std::string a = arch + ".";
  MetaKeys k;
  k.file = path;
  k.gguf = true;
  k.arch = arch;
  k.n_embd = a + "embedding_length";
  k.n_layer = a + "block_count";
  k.n_head = a + "attention.head_count";
  k.n_head_kv = a + "attention.head_count_kv";
  k.head_dim = a + "attention.key_length";
  k.n_ff = a + "feed_forward_length";
  k.n_ctx = a + "context_length";
  k.rms_eps = a + "attention.layer_norm_rms_epsilon";
  k.rope_theta = a + "rope.freq_base";
  k.n_rot = a + "rope.dimension_count";
  k.value_dim = a + "attention.value_length";
  k.n_vocab = a + "vocab_size";
  k.bos = "tokenizer.ggml.bos_token_id";
  k.eos = "tokenizer.ggml.eos_token_id";
  k.rope_factor = a + "rope.scaling.factor";
  k.embedding = "token_embd.weight";
  k.layer_prefix = "blk.";
  return k;
}

MetaKeys MetaKeys::for_hf(const std::string& config_path, const std::string& arch) {
  MetaKeys k;
  k.file = config_path;
  k.gguf = false;
  k.arch = arch;
  k.n_embd = "hidden_size";
  k.n_layer = "num_hidden_layers";
  k.n_head = "num_attention_heads";
  k.n_head_kv = "num_key_value_heads";
  k.head_dim = "head_dim";
  k.n_ff = "intermediate_size";
  k.n_ctx = "max_position_embeddings";
  k.rms_eps = "rms_norm_eps";
  k.rope_theta = "rope_theta";
  k.n_rot = "partial_rotary_factor";
  k.value_dim = "head_dim";
  k.n_vocab = "vocab_size";
  k.bos = "bos_token_id";
  k.eos = "eos_token_id";
  k.rope_factor = "rope_scaling.factor";
  k.embedding = "model.embed_tokens.weight";
  k.layer_prefix = "model.layers.";
  return k;
}

Status validate_hparams(const HParams& h, const DeclaredMeta& d, const MetaKeys& k) {
  // RMSNorm divides by sqrt(mean(x^2) + eps): NaN or infinity poisons every
  // activation, zero or a negative value can divide by zero or take the root
  // of a negative number. Checked as read and as the float32 the kernels use
  // (1e-50 is positive but rounds to 0).
  if (!(std::isfinite(d.rms_eps) && d.rms_eps > 0 && d.rms_eps < 1) || !(h.rms_eps > 0)) {
    return corrupt(k, fmt::format("{} = {:g}, expected a finite number in (0, 1) that float32 can hold (RMSNorm adds it "
                                  "to the mean square before the square root: NaN, infinite, zero or negative gives NaN "
                                  "or infinite logits; published models use 1e-5 or 1e-6 — a corrupted or hand-edited "
                                  "file?)", k.rms_eps, d.rms_eps));
  }
  // RoPE angles are pos * theta^(-2i/d), computed in float32: the base must be
  // a float32 above 1 (0 gives infinite frequencies, a negative base NaN).
  if (!(std::isfinite(h.rope_theta) && h.rope_theta > 1 && h.rope_theta <= FLT_MAX)) {
    return corrupt(k, fmt::format("{} = {:g}, expected a finite number > 1 (the RoPE base: frequencies are "
                                  "base^(-2i/head_dim), so 0, negative, NaN or infinite gives NaN, infinite or constant "
                                  "angles; published models use 1e4 to 1e7)", k.rope_theta, h.rope_theta));
  }
  if (h.n_ctx_train > kMaxContext) {
    return corrupt(k, fmt::format("{} = {} is past {} tokens (the longest published model is trained for 10M): a "
                                  "corrupted value?", k.n_ctx, h.n_ctx_train, kMaxContext));
  }
  LAYA_TRY(check_heads(h, d, k));
  LAYA_TRY(check_attention(h, k));
  return check_rope_scaling(d.rope, k);
}

void rope_factors_from_metadata(const RopeScaling& r, const MetaKeys& k, HParams* h) {
  const size_t half = static_cast<size_t>(h->head_dim / 2);
  if (r.type == "linear") {
    h->rope_freq_factors.assign(half, static_cast<float>(r.factor));
  } else if (r.type == "llama3" && !k.gguf) {
    h->rope_freq_factors = llama3_rope_factors(h->head_dim, h->rope_theta, r.factor, r.low_freq_factor,
                                               r.high_freq_factor, r.original_ctx);
  }
}

Status validate_with_tensors(const HParams& h, const DeclaredMeta& d, const MetaKeys& k, const TensorFacts& t) {
  // One embedding row per token id: a stated vocabulary of another size means
  // the metadata and the weights come from different models.
  if (d.n_vocab != 0 && d.n_vocab != t.embedding_rows) {
    return corrupt(k, fmt::format("{} = {} but tensor '{}' has {} rows (one per token): the metadata and the weights "
                                  "disagree (from different models, or an edited vocabulary?)",
                                  k.n_vocab, d.n_vocab, k.embedding, t.embedding_rows));
  }
  // llama.cpp creates token_embd with one row per entry of tokenizer.ggml.tokens
  // and refuses any other size; convert_hf_to_gguf.py pads the list with
  // [PAD] tokens to the embedding's size, so a GGUF's list is never shorter.
  if (k.gguf && d.n_tokens != 0 && d.n_tokens != t.embedding_rows) {
    return corrupt(k, fmt::format("tokenizer.ggml.tokens has {} entries but tensor '{}' has {} rows: a GGUF has one "
                                  "token per embedding row (convert_hf_to_gguf.py pads the list with [PAD] tokens); "
                                  "the vocabulary and the weights come from different models?",
                                  d.n_tokens, k.embedding, t.embedding_rows));
  }
  LAYA_TRY(check_special_id(d.bos_id, k.bos, t.embedding_rows, k));
  LAYA_TRY(check_special_id(d.eos_id, k.eos, t.embedding_rows, k));
  // Every layer the weights hold is run, and only those: a block count that
  // disagrees would drop trained layers silently or read tensors that do not
  // exist (and a count of two billion would be an allocation of terabytes).
  if (t.n_layer_in_file != h.n_layer) {
    const std::string held = t.n_layer_in_file == 0
                                 ? "no layer tensors"
                                 : fmt::format("tensors of {} layers ({}0 … {}{})", t.n_layer_in_file, k.layer_prefix,
                                               k.layer_prefix, t.n_layer_in_file - 1);
    if (t.n_layer_in_file < h.n_layer) {
      return Status(StatusCode::kNotFound,
                    fmt::format("{}: tensor '{}' is missing: {} = {} but the weights have {}", k.file,
                                t.next_layer_tensor, k.n_layer, h.n_layer, held));
    }
    return corrupt(k, fmt::format("{} = {} but the weights have {}: the extra layers would be skipped silently "
                                  "(a wrong block count?)", k.n_layer, h.n_layer, held));
  }
  // Llama 3 rope scaling lives in a GGUF only as rope_freqs.weight (llama.cpp
  // treats the tensor as optional): a file that lost it runs, with every
  // low-frequency angle off by the scaling factor. Refuse where the metadata
  // says the scaling is there: the type stated, or the unmistakable signature
  // of Llama 3.1+ (the Llama 3 base 500000 with a context past Llama 3.0's
  // 8192, which only the scaled models have).
  if (k.gguf && !t.rope_freqs_tensor) {
    if (d.rope.type == "llama3") {
      return Status(StatusCode::kNotFound,
                    fmt::format("{}: tensor 'rope_freqs.weight' is missing but {}.rope.scaling.type = 'llama3' calls "
                                "for it (convert_hf_to_gguf.py stores Llama 3 rope scaling as that tensor; without it "
                                "every low-frequency angle would be silently wrong): re-convert the model",
                                k.file, k.arch));
    }
    if (d.rope.type.empty() && k.arch == "llama" && h.rope_theta == 500000.0 && h.n_ctx_train > 8192) {
      return Status(StatusCode::kNotFound,
                    fmt::format("{}: tensor 'rope_freqs.weight' is missing but {} = 500000 with {} = {} is Llama 3.1 "
                                "or later, whose 'llama3' rope scaling convert_hf_to_gguf.py stores as that tensor "
                                "(without it the logits would be silently wrong): re-convert the model, or if it truly "
                                "has no rope scaling, set {}.rope.scaling.type = 'none'",
                                k.file, k.rope_theta, k.n_ctx, h.n_ctx_train, k.arch));
    }
  }
  if (t.rope_freqs_tensor && d.rope.type == "linear") {
    return unsupported(k, fmt::format("{}.rope.scaling.type = 'linear' and tensor 'rope_freqs.weight' both scale RoPE; "
                                      "only one of them is supported", k.arch));
  }
  // The divisors of the RoPE frequencies (from the tensor or the metadata).
  for (size_t i = 0; i < h.rope_freq_factors.size(); ++i) {
    const float f = h.rope_freq_factors[i];
    if (!(std::isfinite(f) && f > 0)) {
      return corrupt(k, fmt::format("{}[{}] = {:g}, expected a finite divisor > 0 (rope scaling divides each RoPE "
                                    "frequency by it; a corrupted tensor?)",
                                    t.rope_freqs_tensor ? "tensor 'rope_freqs.weight'" : "rope scaling factor", i, f));
    }
  }
  return Status::Ok();
}

Status validate_tokenizer_size(const HParams& h, const MetaKeys& k, int64_t n_tokens, const std::string& tokenizer) {
  if (n_tokens <= h.n_vocab) return Status::Ok();
  return Status(StatusCode::kCorrupt,
                fmt::format("{}: the tokenizer has {} token ids but the model's tensor '{}' ({}) has {} rows: ids {}..{} "
                            "would have no embedding (a tokenizer from another model?)",
                            tokenizer, n_tokens, k.embedding, k.file, h.n_vocab, h.n_vocab, n_tokens - 1));
}

}  // namespace laya
