#include "tests/support/forked_agent.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace edge::testing {

ForkedAgent::ForkedAgent(Body body) {
  int fds[2];
  if (::pipe(fds) != 0) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(fds[0]);
    const int ready_fd = fds[1];
    body([ready_fd] {
      char ok = 1;
      ssize_t w = ::write(ready_fd, &ok, 1);
      (void)w;
    });
    ::_exit(0);
  }
  ::close(fds[1]);
  if (pid_ < 0) {
    ::close(fds[0]);
    return;
  }
  ready_fd_ = fds[0];
}

ForkedAgent::~ForkedAgent() {
  Kill9();
  if (ready_fd_ >= 0) ::close(ready_fd_);
}

bool ForkedAgent::WaitReady(std::chrono::milliseconds timeout) {
  if (ready_fd_ < 0) return false;
  struct pollfd p {};
  p.fd = ready_fd_;
  p.events = POLLIN;
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (n < 0 && errno == EINTR);
  if (n != 1) return false;
  char ok = 0;
  return ::read(ready_fd_, &ok, 1) == 1;
}

bool ForkedAgent::Kill9() {
  if (pid_ <= 0) return false;
  const bool killed = ::kill(pid_, SIGKILL) == 0;
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return killed;
}

}  // namespace edge::testing
