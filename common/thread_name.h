// Thread names for `ps -L`, `top -H`, /proc/PID/task/*/comm and debuggers, so that a count of
// threads by name says whose they are. A thread otherwise inherits the name of the thread that
// started it — gRPC's callback threads are all `nexting_thread`, so threads started from them
// would be counted as gRPC's. Linux keeps 15 bytes of a name; a longer one is cut there. A
// name is diagnostics only: these never fail their caller.
#pragma once

#include <string>
#include <string_view>

namespace edge {

// Names the calling thread (call it first thing in a thread of ours).
void NameThisThread(std::string_view name);

// Names the calling thread `name` while it lives and then gives back the name it had: threads
// started meanwhile inherit `name` — for pools whose threads run no code of ours before their
// first task (boost::asio::thread_pool). Not for a thread whose name others rely on meanwhile.
class ScopedThreadName {
 public:
  explicit ScopedThreadName(std::string_view name);
  ~ScopedThreadName();
  ScopedThreadName(const ScopedThreadName&) = delete;
  ScopedThreadName& operator=(const ScopedThreadName&) = delete;

 private:
  std::string previous_;
};

}  // namespace edge
