// Saving sessions and reading them back warm (issue 12, scope 2): a session's
// text, cursor, window, options and cached tokens, the logits and greedy
// chain it would start the next suggestion from, and the K/V bytes of its
// sequence's blocks. A restored session's next suggest computes nothing it
// would not have computed without the save (measured: 0 prompt tokens).
//
// One file format for one session and for a set: a header, the session
// records, then the KV blocks, each block written once however many
// sessions share it (documents with a common head). A set goes to a folder
// as ONE file, <dir>/sessions.laya, rather than one file per session plus a
// manifest: the whole set is then replaced by one atomic rename (a crash
// can never pair a new manifest with old session files), shared blocks are
// stored once, and loading is one map and one checksum. The cost: saving
// rewrites the whole set (an editor saving on exit or every few minutes
// does not mind). The folder leaves room for more files later.
//
// Writing goes through AtomicFile (temporary file, fsync, rename): a crash or
// power loss mid-save leaves the old file or the new one, never a mix.
//
// Reading maps the file and checks everything before the KV pool is touched:
// size, magic, version, a checksum (XXH3-64) of the header and one of the
// payload, the KV type and layout, the model identity (Engine::kv_seed:
// hyper-parameters, tensor shapes, sampled weight bytes), and every count and
// index of every record against the bytes that are really there (no
// allocation is sized by a header field alone). Refusals:
//   - damaged (not a session file, truncated, a changed byte, inconsistent
//     counts): kCorrupt; a newer format version: kUnsupported. Nothing in such
//     a file is trusted, so the caller gets the error and no session.
//   - intact but written with another model or another KV type / layout:
//     the text is still good, so with LoadOptions::text_fallback (the default)
//     the sessions are restored from their text (they recompute at their next
//     suggest) and LoadedSessions::note says which mismatch; without it,
//     kInvalidArgument with that message.
// Native byte order (little-endian hosts: x86-64, arm64); a big-endian host is
// refused with kUnsupported.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "session/session.h"

namespace laya {

inline constexpr char kSessionFileName[] = "sessions.laya";  // in a store folder
inline constexpr uint32_t kSessionFileVersion = 1;

// Writes the sessions (all of one engine, each not in use by another thread)
// to `path`. kInvalidArgument when they do not share one engine, kUnsupported
// for a backend whose memory is not host-visible; I/O errors name the path.
// An existing file at `path` is replaced only when it is a session file.
Status save_sessions(std::span<const Session* const> sessions, const std::string& path);
inline Status save_session(const Session& s, const std::string& path) {
  const Session* one = &s;
  return save_sessions(std::span<const Session* const>(&one, 1), path);
}
// The same into <dir>/sessions.laya (the folder is created when absent).
Status save_session_dir(std::span<const Session* const> sessions, const std::string& dir);

struct LoadOptions {
  // An intact file of another model / KV format restores the texts (see the top).
  bool text_fallback = true;
};

struct LoadedSessions {
  std::vector<std::unique_ptr<Session>> sessions;  // in the order they were saved
  bool warm = false;  // every session got its KV back (else `note` says why)
  std::string note;
  int64_t blocks_copied = 0;  // KV blocks the load put into use (copied from the file)
  int64_t blocks_shared = 0;  // blocks found already in use (a shared head): no copy
  size_t file_bytes = 0;
};

// Reads a file written by save_sessions into new sessions on `engine` and
// `tokenizer` (both must outlive them).
Result<LoadedSessions> load_sessions(Engine& engine, const tok::Tokenizer& tokenizer, const std::string& path,
                                     const LoadOptions& opt = {});
Result<LoadedSessions> load_session_dir(Engine& engine, const tok::Tokenizer& tokenizer, const std::string& dir,
                                        const LoadOptions& opt = {});

}  // namespace laya
