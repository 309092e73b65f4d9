#include "sandbox/log_buffer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
  options.max_line_bytes = std::min(options.max_line_bytes, options.max_bytes);
  int fd = ::open(file_path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return MakeError(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kFailedPrecondition,
                     "console log " + file_path + " cannot be opened: " + std::strerror(errno));
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "console log " + file_path + " is not a regular file");
  }
  std::unique_ptr<LogBuffer> buf(
      new LogBuffer(file_path, std::move(owned), options, static_cast<size_t>(st.st_size)));
  // Seed the ring from the end of what an earlier run wrote: the last max_bytes + 1 bytes of
  // the rotated file and the current one, in that order.
  const size_t want = options.max_bytes + 1;
  std::string tail = ReadTail(fd, st.st_size, want);
  bool from_start = tail.size() == static_cast<size_t>(st.st_size);
  if (from_start && tail.size() < want) {
    UniqueFd older(::open((file_path + ".1").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat ost {};
    if (older.get() >= 0 && ::fstat(older.get(), &ost) == 0 && S_ISREG(ost.st_mode)) {
      std::string before = ReadTail(older.get(), ost.st_size, want - tail.size());
      from_start = before.size() == static_cast<size_t>(ost.st_size);
      tail.insert(0, before);
    }
  }
  // Unless the read began at the start of the log, its first line is a fragment.
  if (!from_start) {
    size_t nl = tail.find('\n');
    tail.erase(0, nl == std::string::npos ? tail.size() : nl + 1);
  }
  std::lock_guard lock(buf->mu_);
  buf->IngestLocked(tail);
  return buf;
}

void LogBuffer::PushLineLocked(std::string line) {
  bytes_ += line.size();
  lines_.push_back(std::move(line));
  while (lines_.size() > options_.max_lines || bytes_ > options_.max_bytes) {
    bytes_ -= lines_.front().size();
    lines_.pop_front();
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
        lines_.clear();
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
      partial_.append(chunk.substr(0, take));
      chunk.remove_prefix(take);
      PushLineLocked(std::move(partial_));
      partial_.clear();
    }
    partial_.append(chunk);
    if (nl == std::string_view::npos) return;
    PushLineLocked(std::move(partial_));
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

Status LogBuffer::Append(std::string_view bytes) {
  std::lock_guard lock(mu_);
  IngestLocked(bytes);
  return WriteLocked(bytes);
}

// An append that would take the file past max_file_bytes rotates it first; one larger than
// max_file_bytes fills whole files, and only its last two stay on disk.
Status LogBuffer::WriteLocked(std::string_view rest) {
  while (!rest.empty()) {
    if (file_bytes_ > 0 && file_bytes_ + rest.size() > options_.max_file_bytes) {
      if (auto st = RotateLocked(); !st) return st;
    }
    const size_t room = options_.max_file_bytes - std::min(file_bytes_, options_.max_file_bytes);
    ssize_t n = ::write(fd_.get(), rest.data(), std::min(rest.size(), room));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(FileError(file_path_, "write failed", errno));
    }
    file_bytes_ += static_cast<size_t>(n);
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

// The file becomes "<file>.1" (the one before is replaced) and a new, empty file takes its
// place. When the rename fails nothing moved; when the new file cannot be made, the next
// append tries again (and finds no file to rename): the log stops growing either way.
Status LogBuffer::RotateLocked() {
  const std::string older = file_path_ + ".1";
  if (::rename(file_path_.c_str(), older.c_str()) != 0) {
    const int e = errno;
    return std::unexpected(FileError(file_path_, "rotating it to " + older + " failed", e));
  }
  int fd = ::open(file_path_.c_str(),
                  O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return std::unexpected(FileError(file_path_, "a new file after rotation failed", errno));
  }
  fd_ = UniqueFd(fd);
  file_bytes_ = 0;
  return OkStatus();
}

std::vector<std::string> LogBuffer::Tail(size_t n) const {
  std::lock_guard lock(mu_);
  n = std::min(n, lines_.size());
  return std::vector<std::string>(lines_.end() - static_cast<std::ptrdiff_t>(n), lines_.end());
}

void LogBuffer::FlushPartial() {
  std::lock_guard lock(mu_);
  if (partial_.empty()) return;
  PushLineLocked(std::move(partial_));
  partial_.clear();
}

size_t LogBuffer::line_count() const {
  std::lock_guard lock(mu_);
  return lines_.size();
}

size_t LogBuffer::byte_count() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace edge::sandbox
