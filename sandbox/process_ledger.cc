#include "sandbox/process_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string_view>

#include "common/log.h"

namespace edge::sandbox {
namespace {

std::string PathIn(const std::string& state_dir) {
  return state_dir + "/" + ProcessLedger::kFileName;
}

Error Failed(const std::string& what, const std::string& path, int err) {
  return Error{ErrorCode::kInternal,
               "process ledger " + path + ": " + what + ": " + std::strerror(err)};
}

// Calls `each(index, bytes)` for every slot of the ledger open as `fd`, in order; the last
// one may be short (the file's end). Errors name the file.
Status ForEachSlot(int fd, const std::string& path,
                   const std::function<void(size_t, std::string_view)>& each) {
  std::string slot(ProcessLedger::kSlotBytes, '\0');
  for (size_t index = 0;; ++index) {
    const ssize_t n = ::pread(fd, slot.data(), slot.size(),
                              static_cast<off_t>(index * ProcessLedger::kSlotBytes));
    if (n < 0) return std::unexpected(Failed("read", path, errno));
    if (n == 0) return OkStatus();
    each(index, std::string_view(slot.data(), static_cast<size_t>(n)));
  }
}

}  // namespace

Result<std::unique_ptr<ProcessLedger>> ProcessLedger::Open(const std::string& state_dir) {
  const std::string path = PathIn(state_dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return std::unexpected(Failed("open", path, errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "process ledger " + path + " is in use by another runner");
    }
    return std::unexpected(Failed("flock", path, e));
  }
  // Records an earlier runner left (not read by KillStaleGroups) keep their slots, for the
  // next KillStaleGroups; only free slots are used.
  std::unique_ptr<ProcessLedger> ledger(new ProcessLedger(fd, path));
  auto st = ForEachSlot(fd, path, [&](size_t index, std::string_view bytes) {
    ledger->slots_ = index + 1;
    if (bytes[0] == '\0') ledger->free_.push_back(index);
  });
  if (!st) return std::unexpected(st.error());
  return ledger;
}

ProcessLedger::~ProcessLedger() {
  ::close(fd_);
}

Result<size_t> ProcessLedger::Add(std::string_view record) {
  if (record.size() + 1 > kSlotBytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "process ledger record of " + std::to_string(record.size()) +
                         " bytes does not fit a slot of " + std::to_string(kSlotBytes) +
                         " bytes with its closing NUL");
  }
  if (const size_t nul = record.find('\0'); nul != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "process ledger record holds a NUL at byte " + std::to_string(nul) + " of " +
                         std::to_string(record.size()) +
                         ": a NUL ends a record, so it cannot be inside one");
  }
  size_t slot;
  {
    std::lock_guard lock(mu_);
    if (free_.empty()) {
      slot = slots_++;
    } else {
      slot = free_.back();
      free_.pop_back();
    }
  }
  std::string bytes(record);
  bytes.push_back('\0');
  const auto offset = static_cast<off_t>(slot * kSlotBytes);
  if (::pwrite(fd_, bytes.data(), bytes.size(), offset) != static_cast<ssize_t>(bytes.size())) {
    const int e = errno;
    Remove(slot);
    return std::unexpected(Failed("write slot " + std::to_string(slot), path_, e));
  }
  return slot;
}

void ProcessLedger::Remove(size_t slot) {
  const char nul = '\0';
  if (::pwrite(fd_, &nul, 1, static_cast<off_t>(slot * kSlotBytes)) != 1) {
    log::Get("sandbox")->warn("process ledger {}: cannot free slot {}: {}", path_, slot,
                              std::strerror(errno));
  }
  std::lock_guard lock(mu_);
  free_.push_back(slot);
}

Status ProcessLedger::Drain(const std::string& state_dir,
                            const std::function<void(const std::string& record)>& each) {
  const std::string path = PathIn(state_dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return OkStatus();
    return std::unexpected(Failed("open", path, errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "process ledger " + path + " is in use by a live runner");
    }
    return std::unexpected(Failed("flock", path, errno));
  }
  std::vector<std::string> records;
  auto st = ForEachSlot(fd, path, [&](size_t, std::string_view bytes) {
    // A record ends at its NUL; a slot cut short by the file's end (a record whose write
    // never finished) has none and is no record.
    const size_t end = bytes.find('\0');
    if (end != std::string_view::npos && end > 0) records.emplace_back(bytes.substr(0, end));
  });
  if (!st) return st;
  for (const auto& record : records)
    each(record);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return std::unexpected(Failed("unlink", path, errno));
  }
  return OkStatus();
}

}  // namespace edge::sandbox
