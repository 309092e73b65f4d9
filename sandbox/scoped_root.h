// Resolves paths that come from the wire beneath one root directory (design.md §6): an
// absolute path is taken relative to the root, ".." cannot climb out of it, and no symlink —
// present before the call or swapped in during it — can lead outside it. Every file
// operation of the sandbox goes through a ScopedRoot; it owns an O_PATH fd of the root.
//
// Two resolvers, chosen once per process: openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
// where the kernel has it (symlinks that stay inside the root are followed), and otherwise a
// component-by-component openat(O_NOFOLLOW) walk that refuses every symlink (stricter).
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "sandbox/unique_fd.h"

namespace edge::sandbox {

enum class ResolveMode { kAuto, kOpenat2, kWalk };

class ScopedRoot {
 public:
  // `root` must be an existing directory.
  static Result<ScopedRoot> Open(const std::string& root, ResolveMode mode = ResolveMode::kAuto);

  // The components of `path` below the root ("/a/./b//c/" -> [a, b, c]); ".." pops a
  // component and is PATH_OUTSIDE_ROOT when there is none to pop. Rejects NUL bytes.
  static Result<std::vector<std::string>> Normalize(std::string_view path);

  // Opens `path` beneath the root with open(2) `flags` (O_NOFOLLOW is implied for the last
  // component in walk mode; O_CREAT uses `mode`).
  Result<UniqueFd> OpenBeneath(std::string_view path, int flags, mode_t mode = 0) const;

  // The directory that holds `path`'s last component (opened O_PATH|O_DIRECTORY beneath the
  // root) and that component's name; with `create_parents`, missing directories are created
  // with `dir_mode`. The root itself has no parent: INVALID_ARGUMENT.
  Result<std::pair<UniqueFd, std::string>> OpenParent(std::string_view path, bool create_parents,
                                                      mode_t dir_mode = 0755) const;

  const std::string& root() const { return root_; }
  int fd() const { return root_fd_.get(); }
  ResolveMode mode() const { return mode_; }
  // Whether this kernel offers openat2 (probed once).
  static bool KernelHasOpenat2();

 private:
  ScopedRoot(std::string root, UniqueFd fd, ResolveMode mode)
      : root_(std::move(root)), root_fd_(std::move(fd)), mode_(mode) {}
  Result<UniqueFd> OpenComponents(const std::vector<std::string>& parts, int flags, mode_t mode,
                                  std::string_view shown) const;

  std::string root_;
  UniqueFd root_fd_;
  ResolveMode mode_;
};

// Maps an errno from resolving `path` to the sandbox's error codes.
Error PathError(int err, std::string_view path, std::string_view what);

}  // namespace edge::sandbox
