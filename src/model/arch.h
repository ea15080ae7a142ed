// An architecture is a table and a block: its list of tensors (TensorSpec),
// a few flags, and the forward and logits functions the engine calls
// (model/forward.h). Every reader of "which tensors does a model have" —
// the GGUF and Hugging Face loaders, the float32 conversion of vectors,
// ModelWeights::matrices()/all() (the backend's packer, the memory locker),
// `laya bench`'s bytes per token and mkmodel's planner — walks the table;
// only the architecture's own forward function knows how its block computes.
// Llama, Qwen2 and Qwen3 share the Llama family's table and block
// (model/llama_family.cpp); a family with another block (other norms, another
// activation, fused projections) brings its own table and forward function
// instead of adding flags to that one. The rows tables share are
// model/tensor_rows.h's.
//
// Adding an architecture = one new file src/model/arch_<name>.cpp defining
// `const ArchSpec kArch<Name>` (the name with its first letter upper-cased,
// e.g. arch_qwen2.cpp → kArchQwen2). No list to edit: CMake generates
// the registry (model/arch_list.inc, read by archs.cpp) from the files that
// match src/model/arch_*.cpp. A generated list rather than self-registering
// static objects, because the engine is a static library and the linker
// drops an object file that nothing references.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"

namespace laya {

class Backend;
class Model;
struct ForwardScratch;
struct HParams;
struct KvLayerView;
struct LayerWeights;
struct ModelWeights;
struct RopeTables;

// An architecture's forward pass and its logits (the contract of both:
// model/forward.h). Function pointers, so that an ArchSpec is constant-
// initialized wherever it is defined.
using ForwardFn = Status (*)(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                             ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0);
using LogitsFn = Status (*)(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m,
                            float* logits);

// What a tensor is to the forward pass.
enum class TensorRole : uint8_t {
  kMatrix,     // multiplied by a matmul (packed by the CPU backend)
  kEmbedding,  // rows gathered per token (one row read per token)
  kNorm,       // RMSNorm weight vector (converted to float32 at load)
  kBias,       // added vector (converted to float32 at load)
  kRopeFreqs,  // per-frequency RoPE divisors, copied into HParams::rope_freq_factors
  // A matrix stored fused (phi3's attn_qkv, its ffn_up holding gate and up):
  // bound whole, then split by the loader into views of its rows (the table's
  // kSplit entries), which are what the matmuls multiply. Neither packed nor
  // locked itself: its views are.
  kFused,
};

// A dimension in terms of the hyper-parameters.
// kQkvDim: q_dim + 2 kv_dim (a fused q/k/v); kFf2: 2 n_ff (a fused gate and up).
enum class Dim : uint8_t { kEmbd, kVocab, kQDim, kKvDim, kFf, kHeadDim, kHalfHeadDim, kQkvDim, kFf2 };
int64_t dim_value(Dim d, const HParams& h);

// When a model has the tensor.
enum class When : uint8_t {
  kAlways,
  kQkvBias,       // ArchSpec::qkv_bias
  kQkNorm,        // ArchSpec::qk_norm
  kUntiedOutput,  // the file decides: absent means the output is tok_embd
  kRopeFreqs,     // the file decides: present for Llama 3 rope scaling
  kSplit,         // never in the file: a view of a kFused tensor's rows, made by the loader
};

// Which conditional tensors a model has: the loader takes the first two from
// the ArchSpec (the file decides the others), mkmodel takes all from a preset.
struct TensorFlags {
  bool qkv_bias = false;
  bool qk_norm = false;
  bool untied_output = false;
  bool rope_freqs = false;
};

// Where the model-wide tensors go in a file written the way
// convert_hf_to_gguf.py writes it: before or after the layers.
enum class Placement : uint8_t { kBeforeLayers, kLayer, kAfterLayers };

struct TensorSpec {
  const char* gguf;           // "token_embd.weight", "blk.{}.attn_q.weight" ({} = layer index)
  const char* hf;             // "model.layers.{}.self_attn.q_proj.weight"; nullptr: not in HF checkpoints
  TensorRole role;
  Dim shape[2];               // ggml order: shape[0] = row length
  int n_dims;
  When when;
  Placement placement;
  const char* hint;           // what a wrong shape means, for the error message
  Tensor LayerWeights::*layer_field;  // where a per-layer tensor binds
  Tensor ModelWeights::*model_field;  // where a model-wide tensor binds (nullptr: not bound, e.g. rope factors)

  bool per_layer() const { return placement == Placement::kLayer; }
  // A model with flags `f` has it (for a loader: the file must have it).
  bool expected(const TensorFlags& f) const;
  // The GGUF name of this tensor in layer `layer` (ignored for model-wide ones).
  std::string gguf_name(int64_t layer) const;
};

// What a family's files may leave unsaid about its attention (llama.cpp's and
// transformers' defaults), and how its layers alternate when no file lists them.
struct AttentionDefaults {
  // 0: every layer slides (when the model has a window); p > 0: layer i
  // slides unless (i + 1) % p == 0 (Gemma 2: 2, Gemma 3: 6).
  int swa_period = 0;
  // The RoPE base of the sliding layers when the file does not state it
  // (Gemma 3: 10000); 0: rope_theta.
  double swa_rope_base = 0;
  // A GGUF file without the keys (Gemma 2: a window of 4096, soft-caps 50 and 30).
  int64_t gguf_window = 0;
  float gguf_attn_softcap = 0, gguf_final_softcap = 0;
  // GGUF has no query_pre_attn_scalar: queries are scaled by head_dim^-0.5
  // except in a model of this many layers, by (n_embd / n_head)^-0.5 (the
  // Gemma 2 / 3 27B models, as llama.cpp decides). 0: none.
  int64_t gguf_wide_scale_layers = 0;
};

struct ArchSpec {
  const char* name;                  // GGUF general.architecture
  const char* hf_model_types[4];     // config.json "model_type" values (nullptr-terminated)
  bool qkv_bias;                     // q/k/v projections carry a bias
  bool qk_norm;                      // per-head RMSNorm of q and k before RoPE
  bool gguf_rope_interleaved;        // convert_hf_to_gguf permuted the q/k rows
  bool tied_by_default;              // HF default of tie_word_embeddings
  // The tensors, model-wide ones first, then one layer's; within each group
  // in the order a converted file stores them. A function rather than a span
  // so that an ArchSpec in another file is constant-initialized.
  std::span<const TensorSpec> (*tensors)();
  ForwardFn forward;  // every layer over a batch of tokens (model/forward.h)
  LogitsFn logits;    // final norm and output projection of some rows

  // The block's norms are LayerNorms with a bias (StarCoder2): the epsilon
  // is <arch>.attention.layer_norm_epsilon in GGUF, norm_epsilon in config.json.
  bool layer_norm = false;
  // Added to every norm weight of a Hugging Face checkpoint at load: Gemma's
  // RMSNorm multiplies by (1 + w), and convert_hf_to_gguf.py stores w + 1.
  float hf_norm_shift = 0.0f;
  // The block in a few words, for `laya info`.
  const char* block = "";
  AttentionDefaults attn = {};

  TensorFlags flags() const { return {.qkv_bias = qkv_bias, .qk_norm = qk_norm}; }
};

// The Llama family (model/llama_family.cpp). Its tensors: all of the
// family's optional ones too, each under its flag, so a loader of any of
// these architectures accepts and binds them when a file has them. Its
// block uses the optional ones the model has (Model::flags()).
std::span<const TensorSpec> llama_family_tensors();
Status llama_family_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                            ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0);
Status llama_family_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m,
                           float* logits);

// Every registered architecture (one per src/model/arch_*.cpp).
std::span<const ArchSpec* const> registered_archs();
// nullptr when unknown.
const ArchSpec* find_arch_by_gguf_name(std::string_view name);
const ArchSpec* find_arch_by_hf_type(std::string_view model_type);
// "llama, qwen2, qwen3" for error messages.
const char* supported_arch_list();

}  // namespace laya
