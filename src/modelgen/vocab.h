// Tokenizer metadata for mkmodel's GGUFs: a vocabulary read from a Hugging
// Face tokenizer.json as convert_hf_to_gguf.py writes it, or a synthetic
// byte-level one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "modelgen/presets.h"

namespace laya::modelgen {

// GGUF tokenizer.ggml.token_type values.
enum TokType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct VocabMeta {
  std::string model = "gpt2";
  std::string pre;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int32_t bos = -1, eos = -1, pad = -1;
  bool add_bos = false;
  std::string source;   // the tokenizer.json, or "synthetic"
  int64_t n_real = 0;   // tokens taken from the source (the rest is padding)
};

// GPT-2's 256 byte tokens, a few merges, BOS and EOS.
void synthetic_vocab(const ModelPreset& p, VocabMeta* v);
// Tokens / types / merges of a tokenizer.json as convert_hf_to_gguf.py's
// get_vocab_base writes them, padded ([PAD{i}], UNUSED) or truncated to n_vocab.
Status hf_vocab(const ModelPreset& p, const std::string& path, VocabMeta* v);
// The fixture tokenizer.json of the preset's tokenizer family, or "" (search:
// fixtures_dir, $LAYA_FIXTURES, shared/fixtures above the working directory).
std::string find_fixture_tokenizer(const ModelPreset& p, const std::string& fixtures_dir);

}  // namespace laya::modelgen
