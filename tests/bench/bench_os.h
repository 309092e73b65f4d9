// What the benchmarks ask the OS: CPU-seconds by clock (this thread, this process) and of the
// waited-for children (with their own waited-for children), and a connected loopback TCP pair.
// Header-only; benchmarks only, never a test assertion.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <utility>

namespace edge::bench {

// `clock`: CLOCK_THREAD_CPUTIME_ID (this thread) or CLOCK_PROCESS_CPUTIME_ID (every thread).
inline double CpuSeconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// User + system time of every child waited for so far, and of what they waited for.
inline double ChildrenCpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// A connected TCP pair on 127.0.0.1 (a port the kernel picks), TCP_NODELAY on both ends:
// {accepted end, connecting end}; {-1, -1} with errno set when a step fails. The caller owns
// and closes both descriptors.
inline std::pair<int, int> LoopbackTcpPair() {
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(lfd, 1) != 0 || ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (lfd >= 0) ::close(lfd);
    return {-1, -1};
  }
  const int cfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (cfd < 0 || ::connect(cfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (cfd >= 0) ::close(cfd);
    ::close(lfd);
    return {-1, -1};
  }
  const int sfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(lfd);
  if (sfd < 0) {
    ::close(cfd);
    return {-1, -1};
  }
  const int one = 1;
  ::setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {sfd, cfd};
}

}  // namespace edge::bench
