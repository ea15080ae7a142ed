// Range and consistency checks of a model's metadata, run at load before the
// forward pass can see a value: every hyper-parameter it uses is finite and in
// range, the values the file states beside them (vocab_size, the RoPE
// dimension, the value head size, rope scaling) agree with them, and all of it
// agrees with the tensors. One place for every rule, shared by the GGUF and the
// Hugging Face loaders; each error names the file, the key as that file spells
// it, the value, and what probably went wrong.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/hparams.h"

namespace laya {

// How the file asks for RoPE scaling: GGUF <arch>.rope.scaling.*, HF
// rope_scaling / rope_parameters. GGUF has no keys for llama3's parameters:
// convert_hf_to_gguf.py stores the computed divisors as rope_freqs.weight.
struct RopeScaling {
  std::string type;  // "" (not said), "none", "linear", "llama3" (others are refused while reading)
  double factor = 0;
  double low_freq_factor = 0, high_freq_factor = 0, original_ctx = 0;  // HF llama3 only
};

// What the metadata states beside the hyper-parameters: values the forward
// pass does not read but which must agree with it and with the tensors, and
// raw values kept wider than HParams holds them so a check sees what the file
// says. 0 (or -1 for ids) where the file says nothing.
struct DeclaredMeta {
  bool head_dim_given = false;  // key_length / head_dim present (else n_embd / n_head)
  double rms_eps = 0;           // as read (HParams keeps a float)
  int64_t n_rot = 0;            // GGUF <arch>.rope.dimension_count
  double partial_rotary = 1;    // HF partial_rotary_factor
  int64_t value_dim = 0;        // GGUF <arch>.attention.value_length
  int64_t n_vocab = 0;          // <arch>.vocab_size / vocab_size
  int64_t n_tokens = 0;         // GGUF tokenizer.ggml.tokens entries
  int64_t bos_id = -1, eos_id = -1;
  RopeScaling rope;
};

// The keys as the file spells them, for messages.
struct MetaKeys {
  std::string file;  // the .gguf or the config.json
  bool gguf = true;
  std::string arch;
  std::string n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx, rms_eps, rope_theta, n_rot, value_dim,
      n_vocab, bos, eos, rope_factor, embedding, layer_prefix;

  static MetaKeys for_gguf(const std::string& path, const std::string& arch);
  static MetaKeys for_hf(const std::string& config_path, const std::string& arch);
};

// What the tensors say, gathered by the loader once the model-wide ones are bound.
struct TensorFacts {
  int64_t embedding_rows = 0;
  int64_t n_layer_in_file = 0;  // 1 + the largest layer index of any tensor name
  std::string next_layer_tensor;  // the first tensor of layer n_layer_in_file (for "is missing")
  bool rope_freqs_tensor = false;
};

// The metadata on its own: ranges, and the stated values against the
// hyper-parameters. Before anything is derived from them.
Status validate_hparams(const HParams& h, const DeclaredMeta& d, const MetaKeys& k);

// The per-frequency RoPE divisors the metadata defines (linear; HF llama3),
// into h->rope_freq_factors. After validate_hparams.
void rope_factors_from_metadata(const RopeScaling& r, const MetaKeys& k, HParams* h);

// The metadata against the tensors: the vocabulary size, the special ids, the
// layer count, the rope scaling tensor the metadata calls for, and the values
// of the RoPE divisors. Before the layers are bound (a block count of two
// billion must fail here, not in an allocation).
Status validate_with_tensors(const HParams& h, const DeclaredMeta& d, const MetaKeys& k, const TensorFacts& t);

// A tokenizer of n_tokens ids for a model whose embedding has
// h.n_vocab rows: more ids than rows is an error (an id past the table has no
// embedding); fewer is the padding Hugging Face models carry.
Status validate_tokenizer_size(const HParams& h, const MetaKeys& k, int64_t n_tokens, const std::string& tokenizer);

}  // namespace laya
