// Crash-safe file replacement (design.md §5): the data goes to an unnamed file in the same
// directory (O_TMPFILE) with the final mode, is fsynced, linked in under a temporary name,
// renamed over the target, and the directory is fsynced. On any failure the target is
// untouched and nothing is left behind; a crash (kill -9, power) before the link leaves
// nothing either, and after it the complete new file under its temporary name for at most
// the instant before the rename. On filesystems without O_TMPFILE the temporary file is a
// named one (".<name>.tmp.<random>") from the start, removed on every failure and left behind
// only by a crash. Needs /proc (the link goes through /proc/self/fd).
#pragma once

#include <sys/types.h>

#include <expected>
#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace edge {

struct AtomicWriteOptions {
  mode_t mode = 0600;
  // Create missing parent directories with this mode (0 = do not create them).
  mode_t create_parents_mode = 0;
};

Status WriteFileAtomic(const std::string& path, std::string_view data,
                       AtomicWriteOptions options = {});

// Why ReplaceFileAt failed: errno and the step ("create", "chmod", "write", "fsync", "link",
// "close", "rename"), for callers that word their own errors (the file tools name the wire
// path).
struct ReplaceFailure {
  int err = 0;
  const char* step = "";
};

// The same replacement of `name` (one path component) in the open directory `dirfd`, with
// mode exactly `mode`. WriteFileAtomic and the file tools both write through it.
std::expected<void, ReplaceFailure> ReplaceFileAt(int dirfd, const std::string& name,
                                                  std::string_view data, mode_t mode);

// The new file's bytes one piece per call, in order: each piece stays valid until the next
// call, and an empty one ends them. For bytes made as they are written (file_write decodes
// its base64 a piece at a time, common/base64.h), so they never exist whole in memory.
using ContentPieces = std::function<std::string_view()>;

// `data` as the only piece (it must outlive the pieces).
ContentPieces OnePiece(std::string_view data);

// The same replacement with the bytes in pieces. Each piece of 1 MiB or more is handed to
// the disk as soon as it is written (sync_file_range, SYNC_FILE_RANGE_WRITE: no waiting), so
// the final fsync waits for the last pieces only.
//
// With `replaced_fd`, the file the rename replaced is held open (O_PATH) and its descriptor
// stored there (-1 when there was none, and on every failure); the caller owns and closes
// it. The kernel frees the old file's cached pages when its last reference goes, which is
// otherwise inside the rename (about 0.09 s for 256 MiB on ext4): held, that cost moves to
// the close, which the file tools make after their answer has gone. The new file is in
// place and durable either way; the old one's space returns at the close.
std::expected<void, ReplaceFailure> ReplaceFileAt(int dirfd, const std::string& name,
                                                  const ContentPieces& pieces, mode_t mode,
                                                  int* replaced_fd = nullptr);

// Reads a whole regular file; refuses anything larger than max_bytes.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 64 << 20);

// mkdir -p with `mode` for the directories it creates; an existing directory is fine.
Status MakeDirs(const std::string& path, mode_t mode);

// fsync a directory, so a rename inside it is durable.
Status SyncDirectory(const std::string& dir);

}  // namespace edge
