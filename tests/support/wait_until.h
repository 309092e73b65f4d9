// WaitUntil: polls a condition until it holds or a deadline passes. Real time, because it
// waits for other threads and processes; it never measures time (timing is the injected
// clock's job, design.md §9).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace edge::testing {

inline bool WaitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace edge::testing
