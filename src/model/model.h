// A loaded model: hyper-parameters + zero-copy weight views into the mapped
// files (GGUF, or safetensors of a Hugging Face / MLX folder).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/hparams.h"
#include "model/mlx_quant.h"
#include "model/validate.h"
#include "core/tensor.h"

namespace laya {

namespace gguf { class File; }
namespace safetensors { class File; }

// The fields are what the forward pass reads by name (L.wq, L.bq ...); which
// tensor binds to which field, and when a model has it, is the architecture's
// table (model/arch.h).
struct LayerWeights {
  Tensor attn_norm;                 // (n_embd)
  Tensor wq, wk, wv;                // (q_dim|kv_dim rows, n_embd cols)
  Tensor bq, bk, bv;                // qwen2 only
  Tensor q_norm, k_norm;            // qwen3 only, (head_dim)
  Tensor wo;                        // (n_embd rows, q_dim cols)
  Tensor ffn_norm;                  // (n_embd)
  Tensor w_gate, w_up;              // (n_ff rows, n_embd cols)
  Tensor w_down;                    // (n_embd rows, n_ff cols)
  // Fused forms (phi3), split by the loader into wq/wk/wv and w_gate/w_up,
  // which are views of their rows (TensorRole::kFused).
  Tensor wqkv;                      // (q_dim + 2 kv_dim rows, n_embd cols)
  Tensor w_gate_up;                 // (2 n_ff rows, n_embd cols): gate rows, then up rows
  // LayerNorm biases and the other projections' biases (starcoder2).
  Tensor attn_norm_b, ffn_norm_b;   // (n_embd)
  Tensor bo;                        // (n_embd)
  Tensor b_up;                      // (n_ff)
  Tensor b_down;                    // (n_embd)
  // RMSNorms of the attention's and the feed-forward's outputs before they
  // join the residual stream (gemma2, gemma3).
  Tensor attn_post_norm, ffn_post_norm;  // (n_embd)
};

struct ModelWeights {
  Tensor tok_embd;                  // (n_vocab rows, n_embd cols)
  Tensor output_norm;               // (n_embd)
  Tensor output_norm_b;             // (n_embd): LayerNorm's bias (starcoder2)
  Tensor output;                    // (n_vocab rows, n_embd cols); == tok_embd when tied
  std::vector<LayerWeights> layers;
  // Whose tensor table the accessors below walk (set by the loader).
  const ArchSpec* arch = nullptr;

  // Every present matrix a matmul multiplies (output, then each layer's wq,
  // wk, wv, wo, w_gate, w_up, w_down), once per data pointer: a tied output
  // is tok_embd's data. What a backend prepares (the CPU backend packs them).
  std::vector<const Tensor*> matrices() const;
  // Every present, bound weight tensor (embedding, norms, biases, matrices,
  // output), once per data pointer. What the engine locks in memory.
  std::vector<const Tensor*> all() const;
  // Calls fn for every present bound tensor with its table entry: model-wide
  // ones first, then layer by layer. Not deduplicated: a tied output is
  // visited as tok_embd (kEmbedding) and as output (kMatrix).
  void for_each(const std::function<void(const TensorSpec&, const Tensor&)>& fn) const;
};

enum class ModelFormat { kGguf, kHfFolder };

class Model {
 public:
  // `path` is a .gguf file or a folder with config.json + safetensors.
  static Result<std::unique_ptr<Model>> load(const std::string& path);
  ~Model();

  const HParams& hparams() const { return hp_; }
  const ArchSpec& arch() const { return *arch_; }
  // The optional tensors this model has (q/k/v biases, q/k norms, ...): the
  // architecture's flags, or present in the file for every layer.
  const TensorFlags& flags() const { return flags_; }
  const ModelWeights& weights() const { return w_; }
  ModelFormat format() const { return format_; }
  const std::string& path() const { return path_; }
  // The GGUF file (for tokenizer metadata), or nullptr for a folder.
  const gguf::File* gguf_file() const { return gguf_.get(); }
  // Whether a tokenizer of n_tokens ids (named `tokenizer` in the message)
  // fits this model: no id past the embedding (model/validate.h).
  Status check_tokenizer_size(int64_t n_tokens, const std::string& tokenizer) const;

  // An MLX folder's quantization (config.json); present false otherwise.
  const MlxQuant& mlx_quant() const { return mlx_; }
  // Every tensor, in file order (for `laya info`).
  const std::vector<Tensor>& all_tensors() const { return all_; }
  uint64_t n_params() const;
  uint64_t weight_bytes() const;
  // kIo naming the file when a mapped file was truncated or rewritten since
  // load (MappedFile::check_unchanged): the engine checks before each forward
  // pass, where reading a truncated page would raise SIGBUS.
  Status check_files_unchanged() const;

 private:
  Model() = default;
  Status load_gguf(const std::string& path);
  Status load_hf(const std::string& dir);
  Status bind_weights();  // fill w_ from all_ with shape checks
  // What the tensors say about the metadata (model/validate.h), once the
  // model-wide tensors are bound.
  TensorFacts tensor_facts() const;
  // The tensor of `spec` (in layer `layer`) into *out, shape- and type-checked;
  // leaves *out empty when the model need not have it and has not.
  Status bind_tensor(const TensorSpec& spec, int64_t layer, Tensor* out) const;
  Status set_rope_factors(const Tensor& rope_freqs);
  // The views of a layer's fused matrices (LayerWeights::wqkv, w_gate_up).
  static void split_fused(const HParams& h, LayerWeights* L);
  // Norms and biases must be float32 for the kernels.
  Status convert_vectors_to_f32();
  Status vector_to_f32(Tensor& t);
  // t (a float32 vector) + shift, into an owned buffer (ArchSpec::hf_norm_shift).
  void shift_vector(Tensor& t, float shift);
  // HF folder: the safetensors shards' tensors under their GGUF names.
  Status map_hf_tensors(const std::string& dir, bool tied);

  std::string path_;
  ModelFormat format_ = ModelFormat::kGguf;
  const ArchSpec* arch_ = nullptr;
  TensorFlags flags_;
  HParams hp_;
  DeclaredMeta meta_;  // what the metadata states beside hp_, for validation
  MetaKeys keys_;      // its keys as the file spells them, for messages
  ModelWeights w_;
  std::vector<Tensor> all_;
  std::unique_ptr<gguf::File> gguf_;
  std::vector<std::unique_ptr<safetensors::File>> shards_;
  std::deque<std::vector<float>> owned_f32_;  // converted norms / biases
  MlxQuant mlx_;
};

}  // namespace laya
