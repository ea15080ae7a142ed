#include "session/session_store.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include <xxhash.h>

#include "core/atomic_file.h"
#include "core/mmap.h"
#include "core/utf8.h"

namespace laya {

namespace {

constexpr char kMagic[8] = {'L', 'A', 'Y', 'A', 'S', 'E', 'S', 'S'};

// Fixed-width fields in natural alignment: no padding, the same bytes on
// every little-endian compiler (checked below).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(FileHeader): where the payload starts
  uint64_t kv_identity;   // Engine::kv_seed()
  uint64_t n_vocab, n_layer, n_head_kv, head_dim;
  uint32_t kv_type;       // DType
  uint32_t reserved;
  uint64_t block_pos, block_bytes;
  uint64_t n_sessions, n_blocks;
  uint64_t records_bytes;  // the session records, first in the payload
  uint64_t payload_bytes;  // records + n_blocks * block_bytes
  uint64_t payload_xxh3;
  char model_name[96];  // the model file's name (for messages only)
  char arch[32];
  uint64_t header_xxh3;  // of every byte before this field
};
static_assert(sizeof(FileHeader) == 256, "FileHeader must have no padding");

// The fixed part of a session record (then: text, tokens, block indices,
// logits, chain, chain_heal — the sizes below).
struct RecordHead {
  uint64_t record_bytes;  // the whole record, this struct included
  uint32_t heal;
  int32_t fim;
  int32_t fim_suffix_tokens, fim_suffix_lines;
  int64_t context_tokens;
  uint64_t cursor_cp, window_cp;
  uint32_t window_dirty, reserved;
  uint64_t text_bytes, n_tokens, n_blocks, n_logits;
  int64_t logits_at;
  uint64_t n_chain, chain_start, heal_bytes;
};
static_assert(sizeof(RecordHead) == 120, "RecordHead must have no padding");

std::string kv_type_name(uint32_t t) {
  if (t == static_cast<uint32_t>(DType::F32)) return "f32";
  if (t == static_cast<uint32_t>(DType::F16)) return "f16";
  if (t == static_cast<uint32_t>(DType::Q8_0)) return "q8_0";
  return fmt::format("type #{}", t);
}

void copy_name(char* dst, size_t cap, const std::string& s) {
  std::memset(dst, 0, cap);
  std::memcpy(dst, s.data(), std::min(s.size(), cap - 1));
}

std::string name_of(const char* field, size_t cap) { return std::string(field, strnlen(field, cap)); }

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
void put_array(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// ---- saving ------------------------------------------------------------------------

struct Layout {
  size_t block_bytes;
  int64_t block_pos;
};

// One record; block ids are mapped to file indices (first use numbers them).
Status append_record(const Session& s, std::vector<int32_t>& file_index, std::vector<int32_t>& order,
                     std::string& out) {
  const Session::SavedState st = s.saved_state();
  const SessionOptions& o = s.options();
  const auto ids = s.kv_blocks().ids();
  RecordHead h{};
  h.heal = o.heal ? 1 : 0;
  h.fim = static_cast<int32_t>(o.fim);
  h.fim_suffix_tokens = o.fim_suffix_tokens;
  h.fim_suffix_lines = o.fim_suffix_lines;
  h.context_tokens = o.context_tokens;
  h.cursor_cp = st.cursor_cp;
  h.window_cp = st.window_cp;
  h.window_dirty = st.window_dirty ? 1 : 0;
  h.text_bytes = st.text.size();
  h.n_tokens = st.tokens.size();
  h.n_blocks = ids.size();
  h.n_logits = st.prompt_logits.size();
  h.logits_at = st.prompt_logits_at;
  h.n_chain = st.chain.size();
  h.chain_start = st.chain_start;
  h.heal_bytes = st.chain_heal.size();
  h.record_bytes = sizeof h + h.text_bytes + 4 * h.n_tokens + 4 * h.n_blocks + 4 * h.n_logits + 4 * h.n_chain +
                   h.heal_bytes;
  std::vector<uint32_t> idx(ids.size());
  for (size_t b = 0; b < ids.size(); ++b) {
    const auto id = static_cast<size_t>(ids[b]);
    if (id >= file_index.size()) {
      return Status(StatusCode::kInternal, fmt::format("save: block id {} outside the pool of {}", id, file_index.size()));
    }
    if (file_index[id] < 0) {
      file_index[id] = static_cast<int32_t>(order.size());
      order.push_back(ids[b]);
    }
    idx[b] = static_cast<uint32_t>(file_index[id]);
  }
  put(out, h);
  out.append(st.text);
  put_array(out, st.tokens);
  put_array(out, idx);
  put_array(out, st.prompt_logits);
  put_array(out, st.chain);
  out.append(st.chain_heal);
  return Status::Ok();
}

}  // namespace

Status save_sessions(std::span<const Session* const> sessions, const std::string& path) {
  if constexpr (std::endian::native != std::endian::little) {
    return Status(StatusCode::kUnsupported, "session files are little-endian; this host is not");
  }
  if (sessions.empty()) return Status(StatusCode::kInvalidArgument, fmt::format("save {}: no sessions", path));
  Engine& eng = sessions[0]->engine();
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (&sessions[i]->engine() != &eng) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("save {}: session {} belongs to another engine than session 0 (a file holds the KV "
                                "of one engine)", path, i));
    }
  }
  const KvBlockPool& pool = eng.kv_pool();
  const KvLayout& kv = pool.layout();
  std::string records;
  std::vector<int32_t> file_index(static_cast<size_t>(pool.n_blocks()), -1);
  std::vector<int32_t> order;  // pool block ids in file order
  for (const Session* s : sessions) LAYA_TRY(append_record(*s, file_index, order, records));

  const size_t bb = kv.block_bytes();
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kSessionFileVersion;
  h.header_bytes = sizeof h;
  h.kv_identity = eng.kv_seed();
  const HParams& hp = eng.hparams();
  h.n_vocab = static_cast<uint64_t>(hp.n_vocab);
  h.n_layer = static_cast<uint64_t>(kv.n_layer);
  h.n_head_kv = static_cast<uint64_t>(kv.n_head_kv);
  h.head_dim = static_cast<uint64_t>(kv.head_dim);
  h.kv_type = static_cast<uint32_t>(kv.type);
  h.block_pos = static_cast<uint64_t>(kv.block_pos);
  h.block_bytes = bb;
  h.n_sessions = sessions.size();
  h.n_blocks = order.size();
  h.records_bytes = records.size();
  h.payload_bytes = records.size() + order.size() * bb;
  copy_name(h.model_name, sizeof h.model_name, std::filesystem::path(eng.model().path()).filename().string());
  copy_name(h.arch, sizeof h.arch, hp.arch);
  XXH3_state_t* xs = XXH3_createState();
  if (!xs) return Status(StatusCode::kOutOfMemory, "save: no memory for the checksum state");
  XXH3_64bits_reset(xs);
  XXH3_64bits_update(xs, records.data(), records.size());
  // A block's bytes: read in place where the backend's memory is host
  // memory, else downloaded into one block of host memory (twice per block:
  // the checksum pass, then the write; a GPU copies a block in microseconds).
  std::vector<uint8_t> host_block(eng.backend().host_visible() ? 0 : bb);
  auto block = [&](int32_t id) -> Result<const uint8_t*> {
    if (host_block.empty()) return static_cast<const uint8_t*>(pool.memory() + static_cast<size_t>(id) * bb);
    LAYA_TRY(eng.read_kv_block(id, host_block.data()));
    return static_cast<const uint8_t*>(host_block.data());
  };
  for (int32_t id : order) {
    auto b = block(id);
    if (!b.ok()) {
      XXH3_freeState(xs);
      return b.status();
    }
    XXH3_64bits_update(xs, *b, bb);
  }
  h.payload_xxh3 = XXH3_64bits_digest(xs);
  XXH3_freeState(xs);
  h.header_xxh3 = XXH3_64bits(&h, offsetof(FileHeader, header_xxh3));

  OutputOptions oo;
  oo.kind = "a laya session file";
  oo.replaceable = [](const std::string& p) { return file_starts_with(p, std::string_view(kMagic, sizeof kMagic)); };
  oo.inputs = {eng.model().path()};
  LAYA_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path, oo));
  LAYA_TRY(f.write(&h, sizeof h));
  LAYA_TRY(f.write(records));
  for (int32_t id : order) {
    LAYA_ASSIGN_OR_RETURN(const uint8_t* b, block(id));
    LAYA_TRY(f.write(b, bb));
  }
  return f.commit();
}

Status save_session_dir(std::span<const Session* const> sessions, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kIo, fmt::format("save: cannot create the folder {}: {}", dir, ec.message()));
  return save_sessions(sessions, (std::filesystem::path(dir) / kSessionFileName).string());
}

// ---- loading -----------------------------------------------------------------------

namespace {

// Reads fields from [p, end) with every length checked first.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  size_t left() const { return left_; }
  bool take(void* dst, size_t n) {
    if (n > left_) return false;
    if (n) std::memcpy(dst, p_, n);
    p_ += n;
    left_ -= n;
    return true;
  }
  template <class T>
  bool take_array(std::vector<T>& v, uint64_t n) {
    if (n > left_ / sizeof(T)) return false;  // bounds before the allocation
    v.resize(static_cast<size_t>(n));
    return take(v.data(), static_cast<size_t>(n) * sizeof(T));
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

struct ParsedSession {
  SessionOptions options;
  Session::SavedState state;
  std::vector<uint32_t> blocks;  // file block indices
};

Status corrupt(const std::string& path, const std::string& what) {
  return Status(StatusCode::kCorrupt, fmt::format("{}: {}", path, what));
}

// The header, sizes and checksums: is this file intact and complete?
Result<FileHeader> check_file(const MappedFile& mf, const std::string& path) {
  FileHeader h{};
  if (mf.size() < sizeof h) {
    return corrupt(path, fmt::format("truncated: {} bytes, the header alone is {} (not a laya session file, or cut "
                                     "short while written)", mf.size(), sizeof h));
  }
  std::memcpy(&h, mf.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    return corrupt(path, "not a laya session file (magic bytes differ from \"LAYASESS\")");
  }
  // The version first (its offset is fixed in every version; a newer header
  // may be laid out otherwise, checksum included), the checksum telling a
  // newer file from a damaged one.
  const bool header_ok = h.header_xxh3 == XXH3_64bits(&h, offsetof(FileHeader, header_xxh3));
  if (h.version != kSessionFileVersion) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}: session file format version {}, this build reads version {}{}", path, h.version,
                              kSessionFileVersion, header_ok ? "" : " (or the header is damaged: its checksum differs too)"));
  }
  if (!header_ok) return corrupt(path, "header checksum mismatch: a byte of the header was changed or damaged");
  if (h.header_bytes != sizeof h) {
    return corrupt(path, fmt::format("header_bytes = {}, expected {}", h.header_bytes, sizeof h));
  }
  const uint64_t have = mf.size() - sizeof h;
  if (h.payload_bytes != have) {
    return corrupt(path, fmt::format("{}: the header says {} payload bytes, the file holds {}",
                                     have < h.payload_bytes ? "truncated" : "trailing bytes", h.payload_bytes, have));
  }
  if (h.block_bytes == 0 || h.records_bytes > have || h.n_blocks > (have - h.records_bytes) / h.block_bytes ||
      h.records_bytes + h.n_blocks * h.block_bytes != have) {
    return corrupt(path, fmt::format("payload of {} bytes is not {} record bytes + {} blocks of {} bytes", have,
                                     h.records_bytes, h.n_blocks, h.block_bytes));
  }
  if (h.payload_xxh3 != XXH3_64bits(mf.data() + sizeof h, static_cast<size_t>(have))) {
    return corrupt(path, "payload checksum mismatch: a byte of the sessions or their KV was changed or damaged");
  }
  return h;
}

// Another KV type, layout or model: a message saying which (empty: it matches).
std::string mismatch(const FileHeader& h, const Engine& eng, const std::string& path) {
  const KvLayout& kv = eng.kv_pool().layout();
  if (h.kv_type != static_cast<uint32_t>(kv.type)) {
    return fmt::format("{}: KV type {} in the file, the engine's is {} (run with --kv {}, or the sessions recompute)",
                       path, kv_type_name(h.kv_type), kv_type_name(static_cast<uint32_t>(kv.type)),
                       kv_type_name(h.kv_type));
  }
  const std::string file_model = fmt::format("'{}' ({}, n_vocab {}, {} layers, {} KV heads x {})",
                                             name_of(h.model_name, sizeof h.model_name), name_of(h.arch, sizeof h.arch),
                                             h.n_vocab, h.n_layer, h.n_head_kv, h.head_dim);
  const HParams& hp = eng.hparams();
  const std::string our_model = fmt::format("'{}' ({}, n_vocab {}, {} layers, {} KV heads x {})",
                                            std::filesystem::path(eng.model().path()).filename().string(), hp.arch,
                                            hp.n_vocab, kv.n_layer, kv.n_head_kv, kv.head_dim);
  const std::string other_model =
      fmt::format("{}: written with another model: {}, this engine runs {}", path, file_model, our_model);
  if (h.n_layer != static_cast<uint64_t>(kv.n_layer) || h.n_head_kv != static_cast<uint64_t>(kv.n_head_kv) ||
      h.head_dim != static_cast<uint64_t>(kv.head_dim) || h.n_vocab != static_cast<uint64_t>(hp.n_vocab)) {
    return other_model;
  }
  // The identity covers the block size too: the layout is told apart first.
  if (h.block_pos != static_cast<uint64_t>(kv.block_pos) || h.block_bytes != kv.block_bytes()) {
    return fmt::format("{}: KV layout of blocks of {} positions ({} bytes), the engine's are {} positions ({} bytes)",
                       path, h.block_pos, h.block_bytes, kv.block_pos, kv.block_bytes());
  }
  if (h.kv_identity != eng.kv_seed()) return other_model;
  return {};
}

Status check_record(const RecordHead& r, const FileHeader& h, const std::string& where) {
  auto bad = [&](const std::string& what) { return Status(StatusCode::kCorrupt, fmt::format("{}: {}", where, what)); };
  if (r.fim < 0 || r.fim > static_cast<int32_t>(FimOrder::kSpm)) return bad(fmt::format("fim order {}, expected 0..2", r.fim));
  if (r.fim_suffix_tokens < 1 || r.fim_suffix_tokens > 4096 || r.fim_suffix_lines < 1 || r.context_tokens < 0) {
    return bad(fmt::format("options fim_suffix_tokens {} (1..4096), fim_suffix_lines {} (>= 1), context_tokens {} "
                           "(>= 0)", r.fim_suffix_tokens, r.fim_suffix_lines, r.context_tokens));
  }
  const uint64_t want_blocks = (r.n_tokens + h.block_pos - 1) / h.block_pos;
  if (r.n_blocks != want_blocks) {
    return bad(fmt::format("{} KV blocks for {} tokens, expected {}", r.n_blocks, r.n_tokens, want_blocks));
  }
  if (r.n_logits != 0 && r.n_logits != h.n_vocab) return bad(fmt::format("{} logits, expected n_vocab = {}", r.n_logits, h.n_vocab));
  if (r.logits_at < -1 || (r.logits_at >= 0 && static_cast<uint64_t>(r.logits_at) > r.n_tokens)) {
    return bad(fmt::format("logits at position {}, past the {} tokens", r.logits_at, r.n_tokens));
  }
  return Status::Ok();
}

Result<ParsedSession> parse_record(Reader& rd, const FileHeader& h, const std::string& where) {
  RecordHead r{};
  if (!rd.take(&r, sizeof r)) return corrupt(where, fmt::format("record header cut short ({} bytes left)", rd.left()));
  if (r.record_bytes < sizeof r || r.record_bytes - sizeof r > rd.left()) {
    return corrupt(where, fmt::format("record of {} bytes, {} left in the records", r.record_bytes, rd.left() + sizeof r));
  }
  LAYA_TRY(check_record(r, h, where));
  ParsedSession p;
  p.options.heal = r.heal != 0;
  p.options.fim = static_cast<FimOrder>(r.fim);
  p.options.fim_suffix_tokens = r.fim_suffix_tokens;
  p.options.fim_suffix_lines = r.fim_suffix_lines;
  p.options.context_tokens = r.context_tokens;
  Session::SavedState& st = p.state;
  st.cursor_cp = static_cast<size_t>(r.cursor_cp);
  st.window_cp = static_cast<size_t>(r.window_cp);
  st.window_dirty = r.window_dirty != 0;
  st.prompt_logits_at = r.logits_at;
  st.chain_start = static_cast<size_t>(r.chain_start);
  std::vector<uint8_t> text;
  std::vector<uint8_t> heal;
  const bool ok = rd.take_array(text, r.text_bytes) && rd.take_array(st.tokens, r.n_tokens) &&
                  rd.take_array(p.blocks, r.n_blocks) && rd.take_array(st.prompt_logits, r.n_logits) &&
                  rd.take_array(st.chain, r.n_chain) && rd.take_array(heal, r.heal_bytes);
  const uint64_t used = sizeof r + r.text_bytes + 4 * (r.n_tokens + r.n_blocks + r.n_logits + r.n_chain) + r.heal_bytes;
  if (!ok || used != r.record_bytes) {
    return corrupt(where, fmt::format("record sizes (text {}, tokens {}, blocks {}, logits {}, chain {}) do not fill "
                                      "its {} bytes", r.text_bytes, r.n_tokens, r.n_blocks, r.n_logits, r.n_chain,
                                      r.record_bytes));
  }
  st.text.assign(text.begin(), text.end());
  st.chain_heal.assign(heal.begin(), heal.end());
  size_t n_cp = 0;
  if (!utf8::count(st.text, &n_cp, nullptr)) return corrupt(where, "the text is not valid UTF-8");
  if (st.cursor_cp > n_cp || st.window_cp > st.cursor_cp) {
    return corrupt(where, fmt::format("cursor {} / window {} outside the text of {} code points", st.cursor_cp,
                                      st.window_cp, n_cp));
  }
  for (size_t i = 0; i < st.tokens.size(); ++i) {
    if (st.tokens[i] < 0 || static_cast<uint64_t>(st.tokens[i]) >= h.n_vocab) {
      return corrupt(where, fmt::format("token {} at index {} outside the vocabulary of {}", st.tokens[i], i, h.n_vocab));
    }
  }
  for (size_t i = 0; i < st.chain.size(); ++i) {
    if (st.chain[i] < 0 || static_cast<uint64_t>(st.chain[i]) >= h.n_vocab) {
      return corrupt(where, fmt::format("chain token {} at index {} outside the vocabulary of {}", st.chain[i], i, h.n_vocab));
    }
  }
  for (uint32_t b : p.blocks) {
    if (b >= h.n_blocks) return corrupt(where, fmt::format("block index {}, the file holds {} blocks", b, h.n_blocks));
  }
  return p;
}

}  // namespace

Result<LoadedSessions> load_sessions(Engine& engine, const tok::Tokenizer& tokenizer, const std::string& path,
                                     const LoadOptions& opt) {
  if constexpr (std::endian::native != std::endian::little) {
    return Status(StatusCode::kUnsupported, "session files are little-endian; this host is not");
  }
  LAYA_ASSIGN_OR_RETURN(MappedFile mf, MappedFile::open(path));
  LAYA_ASSIGN_OR_RETURN(FileHeader h, check_file(mf, path));
  const std::string refused = mismatch(h, engine, path);
  if (!refused.empty() && !opt.text_fallback) return Status(StatusCode::kInvalidArgument, refused);
  if (h.n_sessions > h.records_bytes / sizeof(RecordHead)) {
    return corrupt(path, fmt::format("{} sessions cannot fit in {} record bytes", h.n_sessions, h.records_bytes));
  }
  // Every record is parsed and checked before the pool is touched.
  std::vector<ParsedSession> parsed;
  Reader rd(mf.data() + sizeof h, static_cast<size_t>(h.records_bytes));
  for (uint64_t i = 0; i < h.n_sessions; ++i) {
    LAYA_ASSIGN_OR_RETURN(ParsedSession p, parse_record(rd, h, fmt::format("{}: session {}", path, i)));
    parsed.push_back(std::move(p));
  }
  if (rd.left() != 0) return corrupt(path, fmt::format("{} bytes after the last session record", rd.left()));

  LoadedSessions out;
  out.file_bytes = mf.size();
  out.warm = refused.empty();
  out.note = refused;
  const uint8_t* blocks = mf.data() + sizeof h + h.records_bytes;
  const int64_t pool_before = engine.kv_pool().n_in_use();
  int64_t held = 0;
  for (const ParsedSession& p : parsed) {
    auto s = std::make_unique<Session>(engine, tokenizer, p.options);
    std::string note;
    std::function<const uint8_t*(int64_t)> src;
    if (refused.empty()) {
      src = [&](int64_t b) { return blocks + static_cast<size_t>(p.blocks[static_cast<size_t>(b)]) * h.block_bytes; };
      LAYA_TRY(s->restore(p.state, src, &note).with_context(path));
    } else {
      // Another model's ids, logits and chain mean nothing here: the text only.
      Session::SavedState text_only;
      text_only.text = p.state.text;
      text_only.cursor_cp = p.state.cursor_cp;
      text_only.window_cp = p.state.window_cp;
      text_only.window_dirty = p.state.window_dirty;
      LAYA_TRY(s->restore(text_only, src, &note).with_context(path));
    }
    if (!note.empty() && out.warm) {
      out.warm = false;
      out.note = fmt::format("{}: session {} restored from its text: {}", path, out.sessions.size(), note);
    }
    held += s->kv_blocks().n_blocks();
    out.sessions.push_back(std::move(s));
  }
  // Blocks the load put into use (copied from the file, or found cached);
  // the rest of what the sessions hold was already in use (shared).
  out.blocks_copied = engine.kv_pool().n_in_use() - pool_before;
  out.blocks_shared = held - out.blocks_copied;
  return out;
}

Result<LoadedSessions> load_session_dir(Engine& engine, const tok::Tokenizer& tokenizer, const std::string& dir,
                                        const LoadOptions& opt) {
  return load_sessions(engine, tokenizer, (std::filesystem::path(dir) / kSessionFileName).string(), opt);
}

}  // namespace laya
