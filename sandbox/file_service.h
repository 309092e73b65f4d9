// File operations on one sandbox workspace (issue 4 "Files"): every path comes from the
// wire and is resolved beneath the workspace root by ScopedRoot, so `..`, absolute paths and
// symlinks (present or raced) cannot reach outside it. Writes are atomic (temp file in the
// target directory, fsync, rename, fsync directory). Owns its ScopedRoot.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/error.h"
#include "sandbox/sandbox_types.h"
#include "sandbox/scoped_root.h"
#include "sandbox/unique_fd.h"

namespace edge::sandbox {

// "0644", "644", "0755": up to 4 octal digits, permission bits only. INVALID_ARGUMENT naming
// `field` otherwise, and for setuid/setgid/sticky bits ("4755" is refused, not masked).
Result<mode_t> ParseOctalMode(std::string_view text, std::string_view field = "mode");

// Polled by long operations (recursive delete, large reads, listings, globs): true = stop
// and fail with CANCELLED, leaving what was already done (a delete cancelled part-way has
// removed part of the tree; nothing is half-written).
using CancelCheck = std::function<bool()>;

// One file.search hit: the path relative to the searched directory and what it is.
struct SearchCandidate {
  std::string path;
  std::string type;  // "file", "dir", "symlink" (never followed) or "other"
};
struct SearchResult {
  std::vector<SearchCandidate> candidates;
  // More matches exist than were returned, or the walk stopped at its entry cap before it
  // had seen everything.
  bool truncated = false;
  size_t visited = 0;  // directory entries looked at
};

class FileService {
 public:
  explicit FileService(ScopedRoot root, uint64_t max_read_bytes = 64ull << 20,
                       CancelCheck cancelled = {})
      : root_(std::move(root)), max_read_bytes_(max_read_bytes), cancelled_(std::move(cancelled)) {}

  // Creates or replaces `path` atomically with `mode` (octal string; "" = "0644"), creating
  // missing parent directories (0755).
  Status Write(std::string_view path, std::string_view content, std::string_view mode = "");
  // The same with the content in pieces (common/atomic_file.h): file_write's bytes as their
  // base64 is decoded, never whole in memory. With `replaced`, the file it replaced is held
  // there (empty when there was none) for the caller to release after answering
  // (ReplaceFileAt's replaced_fd).
  Status Write(std::string_view path, const ContentPieces& content, std::string_view mode = "",
               UniqueFd* replaced = nullptr);
  // `length` nullopt = to the end; more than max_read_bytes is RESOURCE_EXHAUSTED.
  Result<std::string> Read(std::string_view path, uint64_t offset = 0,
                           std::optional<uint64_t> length = std::nullopt) const;
  // The same bytes as their base64 text (common/base64.h), read and encoded 6 MiB at a time:
  // file_read's answer, without the file's bytes ever whole in memory.
  struct Base64Read {
    uint64_t size = 0;   // bytes read
    std::string base64;  // their text
  };
  Result<Base64Read> ReadBase64(std::string_view path, uint64_t offset = 0,
                                std::optional<uint64_t> length = std::nullopt) const;
  Result<FileInfo> Stat(std::string_view path) const;
  // Entries of a directory, sorted by name (symlinks are reported, not followed). A directory
  // with more than `max_entries` is RESOURCE_EXHAUSTED naming the limit, not a partial list:
  // the workload decides what a directory holds, and an answer for two million entries would
  // be gigabytes in the agent (Glob and Search have their own bounds).
  static constexpr size_t kMaxListEntries = 100000;
  Result<std::vector<FileInfo>> List(std::string_view path,
                                     size_t max_entries = kMaxListEntries) const;
  // A non-empty directory needs `recursive`; the root itself cannot be deleted.
  Status Delete(std::string_view path, bool recursive);
  Status Move(std::string_view from, std::string_view to);
  Status Chmod(std::string_view path, std::string_view mode);
  // Paths (relative to the root, sorted) matching a shell pattern such as "src/*.c"; at most
  // `max_matches`. Symlinked directories are not descended.
  Result<std::vector<std::string>> Glob(std::string_view pattern, size_t max_matches = 10000) const;
  // Entries beneath the directory `path` whose path relative to it contains `query`, ASCII
  // case-insensitively ("" matches every entry): breadth first (shallower first), names
  // sorted within a directory, at most `limit`. Symlinks are reported, never followed;
  // every directory is opened beneath the root. Bounded work: at most `max_visited` entries
  // are looked at (then `truncated`); an unreadable subdirectory is skipped.
  static constexpr size_t kMaxSearchVisited = 100000;
  Result<SearchResult> Search(std::string_view path, std::string_view query, size_t limit,
                              size_t max_visited = kMaxSearchVisited) const;

  const ScopedRoot& root() const { return root_; }

 private:
  bool Cancelled() const { return cancelled_ && cancelled_(); }

  // A regular file beneath the root opened for reading, and the part of it to read.
  struct OpenRead {
    UniqueFd fd;
    uint64_t offset = 0;  // where the part starts
    uint64_t want = 0;    // its bytes, within max_read_bytes_
  };
  // Read's and ReadBase64's checks: beneath the root, a regular file, `offset` within it,
  // the part within max_read_bytes_.
  Result<OpenRead> OpenForRead(std::string_view path, uint64_t offset,
                               std::optional<uint64_t> length) const;
  // Up to `count` bytes of the part from `from` into `out`, 4 MiB per pread, the cancel
  // checked between them: the bytes read (fewer at the file's end).
  Result<uint64_t> ReadInto(std::string_view path, const OpenRead& file, uint64_t from, char* out,
                            uint64_t count) const;

  ScopedRoot root_;
  uint64_t max_read_bytes_;
  CancelCheck cancelled_;
};

}  // namespace edge::sandbox
