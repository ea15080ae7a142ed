// Output files that are never lost (issue 11): every file laya writes goes to
// a temporary file in the destination's folder (same filesystem, so the
// rename is atomic), every write and the close are checked, the data is
// fsynced, then renamed over the destination and the folder fsynced. On any
// failure the temporary file is removed and the destination is untouched: a
// full disk or `ulimit -f` never leaves a truncated file where a good one was
// (a process killed mid-write leaves a `.NAME.tmp-PID-N` beside it, never a
// truncated NAME). Replacing makes a new inode: other hard links keep the old.
//
// Before any work a command calls check_output() with the paths it reads, so
// that `logits -m X -o X` or `bench-typing T --json T` is refused at once.
// A destination that is not a regular file (/dev/null, /dev/full, a FIFO,
// /dev/stdout) has nothing to lose and cannot be renamed over: it is written
// in place, still with every write checked.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace laya {

struct OutputOptions {
  // Replace an existing, non-empty destination (mkmodel --force). Without it
  // an existing file is replaced only when `replaceable` says it is an output
  // of the same kind; an empty file is always replaceable (nothing to lose).
  bool overwrite = false;
  // Returns true when the existing file at the path is clearly an earlier
  // output of the same kind (a .npy for a .npy, this command's JSON...).
  std::function<bool(const std::string& path)> replaceable;
  // What `replaceable` accepts, for the refusal message ("a .npy file").
  std::string kind;
  // Paths the command reads (model file or folder, traces, tokenizer): the
  // destination may not be one of them (same device and inode) nor a file
  // inside an input folder.
  std::vector<std::string> inputs;
  // The option that names the destination ("-o", "--json"), for messages.
  std::string option = "output";
  // The flag that allows replacing, named in the refusal ("--force"); empty: none.
  std::string force_flag;
};

// Ok when `dest` may be written under `opt`: not an input, not a folder, an
// existing file replaceable, its folder present. kInvalidArgument otherwise,
// naming the path, what is wrong and what to do.
Status check_output(const std::string& dest, const OutputOptions& opt);

class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();  // an uncommitted file is discarded (its temporary removed)
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&& o) noexcept;

  // Checks `dest` (check_output) and creates the temporary file beside it.
  static Result<AtomicFile> create(const std::string& dest, const OutputOptions& opt);

  Status write(const void* data, size_t n);
  Status write(std::string_view s) { return write(s.data(), s.size()); }
  // Flushes, fsyncs, closes and renames over the destination, then fsyncs the
  // folder. After a failure the destination is as it was.
  Status commit();
  // Removes the temporary file; the destination is untouched.
  void discard();

  const std::string& path() const { return dest_; }
  bool is_open() const { return f_ != nullptr; }

 private:
  // Discards the file (and closes `fd`, not yet a stream) and names the error.
  Status io_error(const std::string& what, int err, int fd = -1);

  std::FILE* f_ = nullptr;
  std::string dest_;  // as the user named it (messages)
  std::string final_;  // where the rename goes (a symlink's target)
  std::string tmp_;    // empty when writing in place (a device, a FIFO)
};

// The whole of `data` to `dest` through an AtomicFile.
Status write_file_atomic(const std::string& dest, std::string_view data, const OutputOptions& opt);

// True when the file at `path` starts with `prefix` (used by `replaceable`).
bool file_starts_with(const std::string& path, std::string_view prefix);

}  // namespace laya
