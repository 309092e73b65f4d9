// ForkedAgent: a child process standing in for an agent that a test kills with -9 — the way
// to test what the next start finds. `body` runs in the forked child and calls `ready()` once
// what the test waits for has started; the child then exits 0 when `body` returns (bodies
// keep running until they are killed). Test code only. It forks only a process that has no
// other thread (else it says so on stderr and WaitReady is false): under ASan (gcc 12's
// libsanitizer takes no allocator lock around fork) a child forked while another thread is
// inside the allocator inherits its lock held and hangs where it first needs it, and even an
// io thread seen idle can still be freeing its last handler. A fixture with an io thread
// stops it (and joins it) before, and starts it again after.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>

namespace edge::testing {

class ForkedAgent {
 public:
  using Body = std::function<void(const std::function<void()>& ready)>;
  explicit ForkedAgent(Body body);
  ~ForkedAgent();  // SIGKILLs and reaps the child if it is still there
  ForkedAgent(const ForkedAgent&) = delete;
  ForkedAgent& operator=(const ForkedAgent&) = delete;

  // Waits until the child called ready(); false when it ended (or failed to fork) first, or
  // did not get there within `timeout` (a hung child fails the test instead of hanging it).
  bool WaitReady(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // SIGKILL, then reaps it; false when it was already gone.
  bool Kill9();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1;
};

}  // namespace edge::testing
