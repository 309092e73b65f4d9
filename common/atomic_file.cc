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

Status WriteFileAtomic(const std::string& path, std::string_view data, AtomicWriteOptions options) {
  const std::string dir = DirName(path);
  if (options.create_parents_mode != 0) {
    if (auto st = MakeDirs(dir, options.create_parents_mode); !st) return st;
  }
  std::string tmp = path + ".tmp." + NewUuidV4().substr(0, 8);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, options.mode);
  if (fd < 0) {
    int err = errno;
    return MakeError(CodeForErrno(err), "create " + tmp + ": " + Errno(err));
  }
  auto fail = [&](const std::string& what, int err) -> Status {
    ::close(fd);
    ::unlink(tmp.c_str());
    return MakeError(CodeForErrno(err), what + " " + tmp + ": " + Errno(err));
  };
  // The umask may have narrowed the mode; set it exactly.
  if (::fchmod(fd, options.mode) != 0) return fail("chmod", errno);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write", errno);
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return MakeError(CodeForErrno(err), "close " + tmp + ": " + Errno(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return MakeError(CodeForErrno(err), "rename " + tmp + " -> " + path + ": " + Errno(err));
  }
  return SyncDirectory(dir);
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
