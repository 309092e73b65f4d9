#include "sandbox/log_buffer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace edge::sandbox {
namespace {

// The last `want` bytes of the file `fd` of `size` bytes (fewer when it is shorter, or when
// the read fails: then none).
std::string ReadTail(int fd, off_t size, size_t want) {
  const size_t n = std::min<uint64_t>(static_cast<uint64_t>(size), want);
  std::string tail(n, '\0');
  if (n == 0) return tail;
  ssize_t got = ::pread(fd, tail.data(), n, size - static_cast<off_t>(n));
  tail.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return tail;
}

Error FileError(const std::string& path, const std::string& what, int err) {
  return Error{err == ENOSPC || err == EDQUOT || err == EFBIG ? ErrorCode::kResourceExhausted
                                                              : ErrorCode::kInternal,
               "console log " + path + ": " + what + ": " + std::strerror(err)};
}

}  // namespace

Result<std::unique_ptr<LogBuffer>> LogBuffer::Open(const std::string& file_path, Options options) {
  if (options.max_lines == 0 || options.max_bytes == 0 || options.max_line_bytes == 0 ||
      options.max_file_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "console log bounds max_lines (" + std::to_string(options.max_lines) +
                         "), max_bytes (" + std::to_string(options.max_bytes) +
                         "), max_line_bytes (" + std::to_string(options.max_line_bytes) +
                         ") and max_file_bytes (" + std::to_string(options.max_file_bytes) +
                         ") must all be positive");
  }
  options.max_line_bytes =
      std::min({options.max_line_bytes, options.max_bytes, size_t{UINT32_MAX}});
  const size_t slash = file_path.rfind('/');
  const std::string dir_path = slash == std::string::npos ? "." : file_path.substr(0, slash + 1);
  const std::string name = file_path.substr(slash == std::string::npos ? 0 : slash + 1);
  UniqueFd dir(::open(dir_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  int fd = dir.get() < 0 ? -1
                         : ::openat(dir.get(), name.c_str(),
                                    O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    return MakeError(e == ENOENT ? ErrorCode::kNotFound : ErrorCode::kFailedPrecondition,
                     "console log " + file_path + " cannot be opened: " + std::strerror(e));
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "console log " + file_path + " is not a regular file");
  }
  // Seed the ring from the end of what an earlier run wrote: the last max_bytes + 1 bytes of
  // the rotated file and the current one, in that order. While the current file is read from
  // its start, at least one byte of the rotated one is read too: a rotation can fall inside a
  // line, and only that byte says whether the current file begins with a whole one.
  const size_t want = options.max_bytes + 1;
  std::string tail = ReadTail(fd, st.st_size, want);
  bool from_start = tail.size() == static_cast<size_t>(st.st_size);
  if (from_start) {
    // O_NONBLOCK: a FIFO in its place must not hang the agent (fstat then refuses it).
    UniqueFd older(
        ::openat(dir.get(), (name + ".1").c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat ost {};
    if (older.get() >= 0 && ::fstat(older.get(), &ost) == 0 && S_ISREG(ost.st_mode) &&
        ost.st_size > 0) {
      std::string before =
          ReadTail(older.get(), ost.st_size, std::max<size_t>(want - tail.size(), 1));
      from_start = before.size() == static_cast<size_t>(ost.st_size);
      tail.insert(0, before);
    }
  }
  std::unique_ptr<LogBuffer> buf(new LogBuffer(file_path, name, std::move(dir), std::move(owned),
                                               options, static_cast<size_t>(st.st_size)));
  // Unless the read began at the start of the log, its first line is a fragment.
  if (!from_start) {
    size_t nl = tail.find('\n');
    tail.erase(0, nl == std::string::npos ? tail.size() : nl + 1);
  }
  std::lock_guard lock(buf->mu_);
  buf->IngestLocked(tail);
  return buf;
}

void LogBuffer::PushLineLocked(std::string_view head, std::string_view tail) {
  const size_t size = head.size() + tail.size();  // at most max_line_bytes
  if (text_.size() + size > text_.capacity()) {
    // Geometric growth, but never past what the ring holds before it compacts: one and a
    // half times max_bytes and a line or two.
    const size_t limit = options_.max_bytes + options_.max_bytes / 2 + 2 * options_.max_line_bytes;
    text_.reserve(std::max(text_.size() + size, std::min(2 * text_.capacity(), limit)));
  }
  text_.append(head);
  text_.append(tail);
  sizes_.push_back(static_cast<uint32_t>(size));
  bytes_ += size;
  while (sizes_.size() > options_.max_lines || bytes_ > options_.max_bytes) {
    text_start_ += sizes_.front();
    bytes_ -= sizes_.front();
    sizes_.pop_front();
  }
  // The dead prefix goes once it is half the live bytes: each byte is moved at most twice.
  if (text_start_ >= 4096 && 2 * text_start_ >= bytes_) {
    text_.erase(0, text_start_);
    text_start_ = 0;
  }
}

void LogBuffer::IngestLocked(std::string_view bytes) {
  // What the last max_lines complete lines of `bytes` would push out of the ring anyway (each
  // is at least one entry) is skipped, the held partial line with it: a chunk of many short
  // lines costs at most max_lines entries, and the ring ends as it would have.
  if (bytes.size() > options_.max_lines) {
    size_t search = bytes.size(), lines = 0;
    while (search > 0) {
      const void* nl = ::memrchr(bytes.data(), '\n', search);
      if (nl == nullptr) break;
      search = static_cast<size_t>(static_cast<const char*>(nl) - bytes.data());
      if (++lines > options_.max_lines) {
        text_.clear();
        text_start_ = 0;
        sizes_.clear();
        bytes_ = 0;
        partial_.clear();
        bytes.remove_prefix(search + 1);
        break;
      }
    }
  }
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    std::string_view chunk = bytes.substr(0, nl);
    // Cut what would make the held line longer than max_line_bytes.
    while (partial_.size() + chunk.size() > options_.max_line_bytes) {
      size_t take = options_.max_line_bytes - partial_.size();
      PushLineLocked(partial_, chunk.substr(0, take));
      partial_.clear();
      chunk.remove_prefix(take);
    }
    if (nl == std::string_view::npos) {
      partial_.append(chunk);
      return;
    }
    PushLineLocked(partial_, chunk);
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

Status LogBuffer::Append(std::string_view bytes) {
  std::lock_guard lock(mu_);
  IngestLocked(bytes);
  Status st = WriteLocked(bytes);
  if (!st && !failing_) {
    log::Get("sandbox")->warn(
        "{} (the log goes on in memory; further failures are not logged "
        "until a write succeeds)",
        st.error().message);
  }
  failing_ = !st;
  return st;
}

// An append that would take the file past max_file_bytes rotates it first; one larger than
// max_file_bytes fills whole files, and only its last two stay on disk.
Status LogBuffer::WriteLocked(std::string_view rest) {
  while (!rest.empty()) {
    if (!fd_ || (file_bytes_ > 0 && file_bytes_ + rest.size() > options_.max_file_bytes)) {
      if (auto st = RotateLocked(); !st) return st;
    }
    const size_t room = options_.max_file_bytes - std::min(file_bytes_, options_.max_file_bytes);
    ssize_t n = ::write(fd_.get(), rest.data(), std::min(rest.size(), room));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return std::unexpected(FileError(file_path_, "write failed", e));
    }
    file_bytes_ += static_cast<size_t>(n);
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

// The file becomes "<file>.1" (the one before is removed) and a new, empty file takes its
// place, both in the directory the file was opened in. When the removal or the rename fails,
// nothing moved and the next append tries again. When the new file cannot be made, the old
// one is already "<file>.1" and is written no more; the next append finds no current file,
// keeps "<file>.1" and tries the new file again. Once the directory itself is gone, that
// fails for good.
Status LogBuffer::RotateLocked() {
  const std::string older = name_ + ".1";
  struct stat current {};
  if (::fstatat(dir_.get(), name_.c_str(), &current, AT_SYMLINK_NOFOLLOW) != 0) {
    return OpenNewLocked();  // nothing to rotate: the last rotation's file is kept
  }
  // The older file goes first: a rename over an existing file makes ext4 (auto_da_alloc)
  // write the renamed file's data out at once, 16 MiB of disk writes per rotation that the
  // log never asked for (measured: 15 % of a 512 MiB exec_stream's throughput).
  if (::unlinkat(dir_.get(), older.c_str(), 0) != 0 && errno != ENOENT) {
    const int e = errno;
    return std::unexpected(
        FileError(file_path_, "rotating it: the older " + file_path_ + ".1 cannot be removed", e));
  }
  if (::renameat(dir_.get(), name_.c_str(), dir_.get(), older.c_str()) != 0 && errno != ENOENT) {
    const int e = errno;
    return std::unexpected(FileError(file_path_, "rotating it to " + file_path_ + ".1 failed", e));
  }
  return OpenNewLocked();
}

Status LogBuffer::OpenNewLocked() {
  fd_ = UniqueFd();
  file_bytes_ = 0;
  int fd = ::openat(dir_.get(), name_.c_str(),
                    O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    return std::unexpected(FileError(file_path_, "a new file after rotation failed", e));
  }
  fd_ = UniqueFd(fd);
  return OkStatus();
}

std::vector<std::string> LogBuffer::Tail(size_t n) const {
  std::lock_guard lock(mu_);
  n = std::min(n, sizes_.size());
  std::vector<std::string> lines(n);
  size_t end = text_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t size = sizes_[sizes_.size() - 1 - i];
    end -= size;
    lines[n - 1 - i].assign(text_, end, size);
  }
  return lines;
}

void LogBuffer::FlushPartial() {
  std::lock_guard lock(mu_);
  if (partial_.empty()) return;
  PushLineLocked(partial_);
  partial_.clear();
}

size_t LogBuffer::line_count() const {
  std::lock_guard lock(mu_);
  return sizes_.size();
}

size_t LogBuffer::byte_count() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace edge::sandbox
