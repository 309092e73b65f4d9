// SignalWaiter: a daemon loop's sleep ends for a termination signal or for another thread's
// Wake, and never misses a Wake that came first (issue 14: no polling for work).
#include "common/signals.h"

#include <pthread.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <thread>

namespace edge {
namespace {

using namespace std::chrono_literals;

TEST(SignalWaiter, TimesOutWithNothingToDo) {
  SignalWaiter waiter;
  EXPECT_EQ(waiter.Wait(0ms), std::nullopt);
}

TEST(SignalWaiter, AWakeBeforeTheWaitIsNotLostAndIsConsumed) {
  SignalWaiter waiter;
  waiter.Wake();
  waiter.Wake();  // two wakes before a wait: one wake-up
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(waiter.Wait(std::nullopt), std::nullopt);  // would block forever if lost
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(waiter.Wait(0ms), std::nullopt);
}

TEST(SignalWaiter, AnotherThreadsWakeEndsAnEndlessWait) {
  SignalWaiter waiter;
  std::thread waker([&] { waiter.Wake(); });
  EXPECT_EQ(waiter.Wait(std::nullopt), std::nullopt);
  waker.join();
}

TEST(SignalWaiter, ReturnsABlockedTerminationSignal) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
  {
    SignalWaiter waiter;
    waiter.Wake();
    ASSERT_EQ(pthread_kill(pthread_self(), SIGHUP), 0);
    EXPECT_EQ(waiter.Wait(std::nullopt), SIGHUP) << "a signal comes before a pending wake";
    EXPECT_EQ(waiter.Wait(0ms), std::nullopt) << "then the wake";
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace
}  // namespace edge
