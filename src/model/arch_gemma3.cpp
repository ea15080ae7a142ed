// Gemma 3, text only (Gemma3ForCausalLM, model_type gemma3_text: 270M, 1B;
// the language model of the 4B-27B ones): Gemma 2's block (gemma_blocks.h)
// with per-head q/k RMSNorms (1 + w) before RoPE, five sliding-window layers
// to one global (sliding_window_pattern 6 or config.json's layer_types), and
// two RoPE tables: local layers rotate with rope_local_base_freq (10000),
// global ones with rope_theta (1e6) and its linear scaling where the config
// has it. No soft-capping unless the file asks for it (its configs leave both
// null). A folder with a vision tower (Gemma3ForConditionalGeneration's
// vision_config) is refused by name at load, as is a GGUF vision projector.
#include "model/arch.h"
#include "model/gemma_blocks.h"

namespace laya {

extern const ArchSpec kArchGemma3 = {
    .name = "gemma3",
    .hf_model_types = {"gemma3_text", "gemma3", nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = true,
    .gguf_rope_interleaved = false,
    .tied_by_default = true,
    .tensors = gemma2_family_tensors,
    .forward = gemma2_family_forward,
    .logits = gemma2_family_logits,
    .hf_norm_shift = 1.0f,
    .block = "RMSNorm (1 + w) before and after attention and feed-forward, per-head q/k norms, embeddings times "
             "sqrt(n_embd), five local (sliding-window) layers to one global, each with its RoPE base, GELU "
             "(tanh)-gated feed-forward",
    .attn = {.swa_period = 6, .swa_rope_base = 10000.0, .gguf_wide_scale_layers = 62},
};

}  // namespace laya
