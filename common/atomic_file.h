// Crash-safe file replacement (design.md §5): write a temp file in the same directory
// with the final mode, fsync it, rename it over the target, fsync the directory.
// On any failure the temp file is removed and the target is untouched.
#pragma once

#include <sys/types.h>

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

// Reads a whole regular file; refuses anything larger than max_bytes.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 64 << 20);

// mkdir -p with `mode` for the directories it creates; an existing directory is fine.
Status MakeDirs(const std::string& path, mode_t mode);

// fsync a directory, so a rename inside it is durable.
Status SyncDirectory(const std::string& dir);

}  // namespace edge
