#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/random.h"

namespace edge {
namespace {

std::string Errno(int err) {
  return std::strerror(err);
}

std::string DirName(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

ErrorCode CodeForErrno(int err) {
  switch (err) {
    case ENOENT:
      return ErrorCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS:
      return ErrorCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
      return ErrorCode::kResourceExhausted;
    default:
      return ErrorCode::kInternal;
  }
}

}  // namespace

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return MakeError(CodeForErrno(err), "open directory " + dir + ": " + Errno(err));
  }
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return MakeError(CodeForErrno(err), "fsync directory " + dir + ": " + Errno(err));
  return OkStatus();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  std::error_code ec;
  std::filesystem::path p(path);
  std::filesystem::path acc;
  for (const auto& part : p) {
    acc /= part;
    if (acc.string() == "/") continue;
    if (::mkdir(acc.c_str(), mode) != 0) {
      int err = errno;
      if (err == EEXIST) {
        struct stat st {};
        if (::stat(acc.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
        return MakeError(ErrorCode::kFailedPrecondition,
                         acc.string() + " exists and is not a directory");
      }
      return MakeError(CodeForErrno(err), "mkdir " + acc.string() + ": " + Errno(err));
    }
  }
  return OkStatus();
}

std::expected<void, ReplaceFailure> ReplaceFileAt(int dirfd, const std::string& name,
                                                  std::string_view data, mode_t mode) {
  return ReplaceFileAt(dirfd, name, OnePiece(data), mode);
}

ContentPieces OnePiece(std::string_view data) {
  return [data, given = false]() mutable -> std::string_view {
    if (given) return {};
    given = true;
    return data;
  };
}

std::expected<void, ReplaceFailure> ReplaceFileAt(int dirfd, const std::string& name,
                                                  const ContentPieces& pieces, mode_t mode,
                                                  int* replaced_fd) {
  if (replaced_fd != nullptr) *replaced_fd = -1;
  const std::string tmp = "." + name.substr(0, 200) + ".tmp." + NewUuidV4().substr(0, 8);
  bool named = false;  // true once `tmp` exists in the directory
  int fd = ::openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // No O_TMPFILE on this filesystem (or kernel): a named temporary file.
    fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    named = fd >= 0;
  }
  if (fd < 0) return std::unexpected(ReplaceFailure{errno, "create"});
  auto fail = [&](int err, const char* step) {
    if (fd >= 0) ::close(fd);
    if (named) ::unlinkat(dirfd, tmp.c_str(), 0);
    return std::unexpected(ReplaceFailure{err, step});
  };
  // The umask may have narrowed the mode; set it exactly.
  if (::fchmod(fd, mode) != 0) return fail(errno, "chmod");
  off_t written = 0;  // bytes of the file so far
  for (std::string_view piece = pieces(); !piece.empty(); piece = pieces()) {
    const off_t start = written;
    for (size_t off = 0; off < piece.size();) {
      ssize_t n = ::write(fd, piece.data() + off, piece.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(errno, "write");
      }
      off += static_cast<size_t>(n);
    }
    written += static_cast<off_t>(piece.size());
    // Start this piece's writeback now, while the next is made; fsync below still decides.
    // (A filesystem without it refuses, which changes nothing.)
    constexpr size_t kEarlyWritebackMin = size_t{1} << 20;
    if (piece.size() >= kEarlyWritebackMin) {
      ::sync_file_range(fd, start, written - start, SYNC_FILE_RANGE_WRITE);
    }
  }
  if (::fsync(fd) != 0) return fail(errno, "fsync");
  if (!named) {
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    if (::linkat(AT_FDCWD, proc.c_str(), dirfd, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      return fail(errno, "link");
    }
    named = true;
  }
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail(errno, "close");
  // The file about to be replaced, held so its release happens at the caller's close (none
  // there, or a name raced away, is fine: the rename decides).
  const int old =
      replaced_fd != nullptr ? ::openat(dirfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    const int err = errno;
    if (old >= 0) ::close(old);
    return fail(err, "rename");
  }
  ::fsync(dirfd);
  if (replaced_fd != nullptr) *replaced_fd = old;
  return {};
}

Status WriteFileAtomic(const std::string& path, std::string_view data, AtomicWriteOptions options) {
  const std::string dir = DirName(path);
  if (options.create_parents_mode != 0) {
    if (auto st = MakeDirs(dir, options.create_parents_mode); !st) return st;
  }
  int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    int err = errno;
    return MakeError(CodeForErrno(err), "open directory " + dir + ": " + Errno(err));
  }
  auto replaced =
      ReplaceFileAt(dirfd, std::filesystem::path(path).filename().string(), data, options.mode);
  ::close(dirfd);
  if (!replaced) {
    return MakeError(
        CodeForErrno(replaced.error().err),
        std::string(replaced.error().step) + " " + path + ": " + Errno(replaced.error().err));
  }
  return OkStatus();
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return MakeError(CodeForErrno(err), "open " + path + ": " + Errno(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeError(ErrorCode::kInvalidArgument, path + " is not a regular file");
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return MakeError(CodeForErrno(err), "read " + path + ": " + Errno(err));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return MakeError(ErrorCode::kResourceExhausted,
                       path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace edge
