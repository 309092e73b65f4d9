#include "sandbox/log_buffer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace edge::sandbox {

Result<std::unique_ptr<LogBuffer>> LogBuffer::Open(const std::string& file_path, Options options) {
  if (options.max_lines == 0 || options.max_bytes == 0 || options.max_line_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "console log bounds max_lines (" + std::to_string(options.max_lines) +
                         "), max_bytes (" + std::to_string(options.max_bytes) +
                         ") and max_line_bytes (" + std::to_string(options.max_line_bytes) +
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
  std::unique_ptr<LogBuffer> buf(new LogBuffer(file_path, std::move(owned), options));
  // Seed the ring from the end of what an earlier run wrote.
  const off_t want = static_cast<off_t>(std::min<uint64_t>(
      static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(options.max_bytes) + 1));
  if (want > 0) {
    std::string tail(static_cast<size_t>(want), '\0');
    ssize_t n = ::pread(fd, tail.data(), tail.size(), st.st_size - want);
    if (n > 0) {
      tail.resize(static_cast<size_t>(n));
      // Unless the read began at the start of the file, its first line is a fragment.
      if (want < st.st_size) {
        size_t nl = tail.find('\n');
        tail.erase(0, nl == std::string::npos ? tail.size() : nl + 1);
      }
      std::lock_guard lock(buf->mu_);
      buf->IngestLocked(tail);
    }
  }
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
  std::string_view rest = bytes;
  while (!rest.empty()) {
    ssize_t n = ::write(fd_.get(), rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeError(errno == ENOSPC || errno == EDQUOT || errno == EFBIG
                           ? ErrorCode::kResourceExhausted
                           : ErrorCode::kInternal,
                       "console log " + file_path_ + ": write failed: " + std::strerror(errno));
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
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
