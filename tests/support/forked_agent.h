// ForkedAgent: a child process standing in for an agent that a test kills with -9 — the way
// to test what the next start finds. `body` runs in the forked child and calls `ready()` once
// what the test waits for has started; the child then exits 0 when `body` returns (bodies
// keep running until they are killed). Test code only; fork from a test, before the test
// starts threads of its own that the child would need, and only while no other thread of the
// test can be allocating: under ASan (gcc 12's libsanitizer takes no allocator lock around
// fork) a child forked while another thread is inside the allocator inherits its lock held
// and hangs at its first allocation. A fixture with an io thread lets it go idle first.
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
