// WaitUntil: polls a condition until it holds or a deadline passes. Real time, because it
// waits for other threads and processes; it never measures time (timing is the injected
// clock's job, design.md §9).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

namespace edge::testing {

// Polls at 2 ms at first, backing off to 50 ms (a condition may be costly: a CLI run, a
// file read); the condition is checked once more at the deadline.
inline bool WaitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::chrono::milliseconds poll(2);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace edge::testing
