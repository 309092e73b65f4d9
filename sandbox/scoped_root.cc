#include "sandbox/scoped_root.h"

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace edge::sandbox {
namespace {

long SysOpenat2(int dirfd, const char* path, int flags, mode_t mode, uint64_t resolve) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = resolve;
  return ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

std::string Join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out.empty() ? "." : out;
}

}  // namespace

Error PathError(int err, std::string_view path, std::string_view what) {
  const std::string p = "\"" + std::string(path) + "\"";
  switch (err) {
    case EXDEV:
      return {ErrorCode::kPathOutsideRoot, "path " + p + " resolves outside the sandbox root"};
    case ELOOP:
      return {ErrorCode::kPathOutsideRoot,
              "path " + p + " goes through a symlink that is not followed here"};
    case ENOENT:
      return {ErrorCode::kNotFound, "path " + p + " does not exist"};
    case ENOTDIR:
      return {ErrorCode::kFailedPrecondition, "path " + p + ": a component is not a directory"};
    case EISDIR:
      return {ErrorCode::kFailedPrecondition, "path " + p + " is a directory"};
    case EEXIST:
      return {ErrorCode::kAlreadyExists, "path " + p + " already exists"};
    case ENOTEMPTY:
      return {ErrorCode::kFailedPrecondition, "directory " + p + " is not empty"};
    case EACCES:
    case EPERM:
    case EROFS:
      return {ErrorCode::kPermissionDenied,
              std::string(what) + " " + p + ": " + std::strerror(err)};
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return {ErrorCode::kResourceExhausted,
              std::string(what) + " " + p + ": " + std::strerror(err)};
    case ENAMETOOLONG:
      return {ErrorCode::kInvalidArgument, "path " + p + " is too long"};
    case ECANCELED:
      return {ErrorCode::kCancelled, std::string(what) + " " + p + ": cancelled part-way"};
    default:
      return {ErrorCode::kInternal, std::string(what) + " " + p + ": " + std::strerror(err)};
  }
}

bool ScopedRoot::KernelHasOpenat2() {
  static const bool has = [] {
    long fd = SysOpenat2(AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, 0);
    if (fd >= 0) {
      ::close(static_cast<int>(fd));
      return true;
    }
    return errno != ENOSYS;
  }();
  return has;
}

Result<ScopedRoot> ScopedRoot::Open(const std::string& root, ResolveMode mode) {
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return MakeError(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kFailedPrecondition,
                     "sandbox root " + root + " cannot be opened: " + std::strerror(err));
  }
  if (mode == ResolveMode::kAuto)
    mode = KernelHasOpenat2() ? ResolveMode::kOpenat2 : ResolveMode::kWalk;
  if (mode == ResolveMode::kOpenat2 && !KernelHasOpenat2()) {
    ::close(fd);
    return MakeError(ErrorCode::kFailedPrecondition, "this kernel has no openat2");
  }
  return ScopedRoot(root, UniqueFd(fd), mode);
}

Result<std::vector<std::string>> ScopedRoot::Normalize(std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "path contains a NUL byte");
  }
  if (path.size() > 4096) {
    return MakeError(ErrorCode::kInvalidArgument, "path is longer than 4096 bytes");
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(i, slash - i);
    if (part == "..") {
      if (parts.empty()) {
        return MakeError(ErrorCode::kPathOutsideRoot,
                         "path \"" + std::string(path) + "\" climbs above the sandbox root");
      }
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      if (part.size() > 255) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "a component of the path is longer than 255 bytes");
      }
      parts.emplace_back(part);
    }
    i = slash + 1;
  }
  return parts;
}

Result<UniqueFd> ScopedRoot::OpenComponents(const std::vector<std::string>& parts, int flags,
                                            mode_t mode, std::string_view shown) const {
  flags |= O_CLOEXEC;
  if (parts.empty()) {
    // The root itself.
    int fd = ::openat(root_fd_.get(), ".", flags & ~(O_CREAT | O_EXCL | O_TRUNC), 0);
    if (fd < 0) return std::unexpected(PathError(errno, shown, "open"));
    return UniqueFd(fd);
  }
  if (mode_ == ResolveMode::kOpenat2) {
    const std::string rel = Join(parts, parts.size());
    // EAGAIN means a concurrent rename raced the lookup; retry a bounded number of times so
    // a hostile writer renaming in a loop cannot pin this thread.
    constexpr int kMaxAttempts = 64;
    long fd = -1;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      fd = SysOpenat2(root_fd_.get(), rel.c_str(), flags, mode,
                      RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
      if (fd >= 0 || errno != EAGAIN) break;
    }
    if (fd < 0 && errno == EAGAIN) {
      return MakeError(
          ErrorCode::kUnavailable,
          "path \"" + std::string(shown) + "\" kept changing while it was resolved; try again");
    }
    if (fd < 0) return std::unexpected(PathError(errno, shown, "open"));
    return UniqueFd(static_cast<int>(fd));
  }
  // Walk: every directory component opened O_NOFOLLOW relative to the previous one.
  UniqueFd dir(::openat(root_fd_.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    int next = ::openat(dir.get(), parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int err = errno;
      // O_NOFOLLOW|O_DIRECTORY on a symlink is ENOTDIR, not ELOOP: report the symlink.
      struct stat st {};
      if (err == ENOTDIR && ::fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        err = ELOOP;
      }
      return std::unexpected(PathError(err, shown, "open"));
    }
    dir = UniqueFd(next);
  }
  int fd = ::openat(dir.get(), parts.back().c_str(), flags | O_NOFOLLOW, mode);
  if (fd < 0) {
    int err = errno;
    struct stat st {};
    // With O_DIRECTORY (any mode) a symlink last component is ENOTDIR; it is a symlink that
    // is not followed, so PATH_OUTSIDE_ROOT like under openat2.
    if (err == ENOTDIR &&
        ::fstatat(dir.get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      err = ELOOP;
    }
    return std::unexpected(PathError(err, shown, "open"));
  }
  if (flags & O_PATH) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
      ::close(fd);
      return std::unexpected(PathError(ELOOP, shown, "open"));
    }
  }
  return UniqueFd(fd);
}

Result<UniqueFd> ScopedRoot::OpenBeneath(std::string_view path, int flags, mode_t mode) const {
  auto parts = Normalize(path);
  if (!parts) return std::unexpected(parts.error());
  return OpenComponents(*parts, flags, mode, path);
}

Result<std::pair<UniqueFd, std::string>> ScopedRoot::OpenParent(std::string_view path,
                                                                bool create_parents,
                                                                mode_t dir_mode) const {
  auto parts = Normalize(path);
  if (!parts) return std::unexpected(parts.error());
  if (parts->empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "path \"" + std::string(path) + "\" names the sandbox root");
  }
  std::string name = parts->back();
  parts->pop_back();
  if (create_parents) {
    for (size_t n = 1; n <= parts->size(); ++n) {
      std::vector<std::string> prefix(parts->begin(),
                                      parts->begin() + static_cast<std::ptrdiff_t>(n));
      auto probe = OpenComponents(prefix, O_PATH | O_DIRECTORY, 0, path);
      if (probe) continue;
      if (probe.error().code != ErrorCode::kNotFound) return std::unexpected(probe.error());
      std::vector<std::string> up(prefix.begin(), prefix.end() - 1);
      auto parent = OpenComponents(up, O_PATH | O_DIRECTORY, 0, path);
      if (!parent) return std::unexpected(parent.error());
      if (::mkdirat(parent->get(), prefix.back().c_str(), dir_mode) != 0 && errno != EEXIST) {
        return std::unexpected(PathError(errno, path, "mkdir"));
      }
    }
  }
  auto dir = OpenComponents(*parts, O_PATH | O_DIRECTORY, 0, path);
  if (!dir) return std::unexpected(dir.error());
  return std::make_pair(std::move(*dir), std::move(name));
}

}  // namespace edge::sandbox
