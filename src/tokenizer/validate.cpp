// The vocabulary checks shared by the GGUF and tokenizer.json loaders, run
// once the tables are built and before finish_init indexes them. A loader
// checks what only its format can get wrong (a GGUF token type, a
// tokenizer.json decoder); what any vocabulary can get wrong is here.
#include <fmt/format.h>

#include "core/shown.h"
#include "tokenizer/internal.h"

namespace laya::tok {

Status TokenizerBuilder::check_vocabulary(const Tokenizer& t, const std::string& name) {
  const size_t n = t.text_.size();
  if (t.bytes_.size() != n || t.kind_.size() != n)
    return Status(StatusCode::kInternal, name + ": tokenizer tables have different sizes");
  // Special ids index the tables; -1 means none.
  const std::pair<int32_t, const char*> ids[] = {{t.bos_id_, "bos token id"},
                                                 {t.eos_id_, "eos token id"},
                                                 {t.unk_id_, "unknown token id"},
                                                 {t.eot_id_, "end-of-turn token id"},
                                                 {t.eom_id_, "end-of-message token id"}};
  for (const auto& [id, what] : ids) {
    if (id < -1 || id >= int64_t(n))
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: {} = {} is out of range (vocabulary has {} tokens)", name, what, id, n));
  }
  for (const auto* list : {&t.prefix_ids_, &t.suffix_ids_}) {
    for (int32_t id : *list) {
      if (id < 0 || id >= int64_t(n))
        return Status(StatusCode::kCorrupt, fmt::format("{}: post_processor: special token id {} is out of range "
                                                        "(vocabulary has {} tokens)", name, id, n));
    }
  }
  // An added token is cut out of raw text by its content: empty content would
  // match nowhere (or, to a naive matcher, everywhere).
  for (const auto& a : t.added_) {
    if (a.id < 0 || a.id >= int64_t(n))
      return Status(StatusCode::kInternal, fmt::format("{}: added token id {} is out of range", name, a.id));
    if (a.content.empty())
      return Status(StatusCode::kCorrupt, fmt::format("{}: added token id {} has empty content (an added token is "
                                                      "matched by its text, so it needs some)", name, a.id));
  }
  return Status::Ok();
}

}  // namespace laya::tok
