#include "tests/support/forked_agent.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <iterator>

namespace edge::testing {

namespace {

size_t ThreadsOfThisProcess() {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/self/task", ec);
  return ec ? 0 : static_cast<size_t>(std::distance(tasks, {}));
}

}  // namespace

ForkedAgent::ForkedAgent(Body body) {
  // A thread that holds a lock (the allocator's, the logger's) at the fork leaves the child
  // a lock nobody releases: the child hangs where it first needs it, which a test then reads
  // as the code under test never getting there (CI, stop 47).
  // A thread just joined can still be listed for a moment (the kernel wakes the joiner
  // before it reaps the thread): a second to be gone.
  size_t threads = ThreadsOfThisProcess();
  for (int i = 0; i < 100 && threads != 1; ++i) {
    ::usleep(10'000);
    threads = ThreadsOfThisProcess();
  }
  if (threads != 1) {
    std::cerr << "ForkedAgent: not forking: this process has " << threads
              << " threads; stop the others first\n";
    return;
  }
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
