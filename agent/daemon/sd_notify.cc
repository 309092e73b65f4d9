#include "agent/daemon/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace edge::daemon {

bool SdNotify(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                       reinterpret_cast<const sockaddr*>(&addr), addr_len);
  ::close(fd);
  return n == static_cast<ssize_t>(state.size());
}

std::optional<std::chrono::microseconds> SdWatchdogInterval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  if (const char* pid = std::getenv("WATCHDOG_PID"); pid != nullptr) {
    if (std::strtol(pid, nullptr, 10) != ::getpid()) return std::nullopt;
  }
  char* end = nullptr;
  long long v = std::strtoll(usec, &end, 10);
  if (end == usec || *end != '\0' || v <= 0) return std::nullopt;
  return std::chrono::microseconds(v);
}

}  // namespace edge::daemon
