// ReconnectLoop on a ManualClock: attempts spaced by the backoff's delays on the clock, the
// owner told of each wait once its timer is armed, the backoff reset once per stream that the
// server took, SkipBackoff ending the wait and every later one, Stop ending a wait or an
// attempt in progress and interrupting the owner once. Nothing sleeps for timing.
#include "common/reconnect_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "tests/support/manual_clock.h"
#include "tests/support/wait_until.h"

namespace edge::testing {
namespace {

using namespace std::chrono_literals;

// Counts its calls; the delays are 1 s, 2 s, 3 s, ... from the last reset.
class CountingBackoff final : public Backoff {
 public:
  std::chrono::milliseconds Next() override { return 1000ms * ++since_reset; }
  void Reset() override {
    since_reset = 0;
    ++resets;
  }
  std::atomic<int> since_reset{0};
  std::atomic<int> resets{0};
};

// The owner: each attempt is counted and returns what the test says; an attempt may block
// until it is interrupted.
class Owner {
 public:
  ReconnectLoop::Hooks Hooks() {
    return {
        .attempt =
            [this] {
              std::unique_lock lock(mu);
              ++attempts;
              cv.wait(lock, [this] { return !block || interrupted; });
              return interrupted ? ReconnectLoop::Next::kExit : next;
            },
        .interrupt =
            [this] {
              std::lock_guard lock(mu);
              ++interrupts;
              interrupted = true;
              cv.notify_all();
            },
        .backing_off =
            [this](std::chrono::milliseconds d) {
              std::lock_guard lock(mu);
              waits.push_back(d);
            },
        .ended =
            [this] {
              std::lock_guard lock(mu);
              ended = true;
            },
    };
  }
  int Attempts() {
    std::lock_guard lock(mu);
    return attempts;
  }
  std::vector<std::chrono::milliseconds> Waits() {
    std::lock_guard lock(mu);
    return waits;
  }
  bool Ended() {
    std::lock_guard lock(mu);
    return ended;
  }

  std::mutex mu;
  std::condition_variable cv;
  ReconnectLoop::Next next = ReconnectLoop::Next::kBackoff;
  bool block = false;
  bool interrupted = false;
  int attempts = 0;
  int interrupts = 0;
  bool ended = false;
  std::vector<std::chrono::milliseconds> waits;
};

class ReconnectLoopTest : public ::testing::Test {
 protected:
  void Advance(std::chrono::milliseconds d) {
    clock_.Advance(d);
    timers_.Poke();
  }
  std::chrono::nanoseconds UntilNextTimer() {
    auto due = timers_.NextDue();
    return due ? *due - clock_.Monotonic() : std::chrono::nanoseconds::max();
  }

  ManualClock clock_;
  TimerQueue timers_{clock_};
  CountingBackoff backoff_;
  Owner owner_;
};

TEST_F(ReconnectLoopTest, AttemptsAreSpacedByTheBackoffOnTheClock) {
  ReconnectLoop loop(timers_, backoff_, owner_.Hooks());
  ASSERT_TRUE(loop.Start());
  EXPECT_FALSE(loop.Start()) << "started twice";
  for (int n = 1; n <= 3; ++n) {
    const auto delay = 1000ms * n;
    ASSERT_TRUE(WaitUntil([&] { return owner_.Waits().size() == static_cast<size_t>(n); }));
    EXPECT_EQ(owner_.Waits().back(), delay);
    EXPECT_EQ(owner_.Attempts(), n);
    // The owner is told once the timer is armed: it is the one pending, due after the delay.
    EXPECT_EQ(UntilNextTimer(), delay);
    Advance(delay - 1ms);
    EXPECT_EQ(owner_.Attempts(), n);
    Advance(1ms);
    ASSERT_TRUE(WaitUntil([&] { return owner_.Attempts() == n + 1; }));
  }
  loop.Stop();
  EXPECT_TRUE(owner_.Ended());
  EXPECT_EQ(owner_.interrupts, 1);
}

TEST_F(ReconnectLoopTest, TakenResetsTheBackoffOncePerStream) {
  ReconnectLoop loop(timers_, backoff_, owner_.Hooks());
  loop.Taken();  // before any stream: the first stream counts as opened
  EXPECT_EQ(backoff_.resets, 1);
  loop.StreamOpened();
  EXPECT_EQ(backoff_.resets, 1) << "opening a stream proves nothing";
  loop.Taken();
  loop.Taken();
  EXPECT_EQ(backoff_.resets, 2);
  loop.StreamOpened();
  loop.Taken();
  EXPECT_EQ(backoff_.resets, 3);
}

TEST_F(ReconnectLoopTest, SkipBackoffEndsTheWaitAndEveryLaterOne) {
  ReconnectLoop loop(timers_, backoff_, owner_.Hooks());
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(WaitUntil([&] { return owner_.Waits().size() == 1; }));
  {
    std::lock_guard lock(owner_.mu);
    owner_.next = ReconnectLoop::Next::kBackoff;
  }
  loop.SkipBackoff();
  // No clock move: the attempts follow one another, and no delay is drawn for them.
  ASSERT_TRUE(WaitUntil([&] { return owner_.Attempts() >= 3; }));
  {
    std::lock_guard lock(owner_.mu);
    owner_.next = ReconnectLoop::Next::kExit;
  }
  ASSERT_TRUE(WaitUntil([&] { return owner_.Ended(); }));
  EXPECT_EQ(owner_.Waits().size(), 1u);
  EXPECT_EQ(backoff_.since_reset, 1);
  loop.Stop();
}

TEST_F(ReconnectLoopTest, StopEndsABackoffWaitAndInterruptsTheOwnerOnce) {
  ReconnectLoop loop(timers_, backoff_, owner_.Hooks());
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(WaitUntil([&] { return owner_.Waits().size() == 1; }));
  loop.Stop();  // the clock never moved
  EXPECT_TRUE(owner_.Ended());
  EXPECT_EQ(owner_.Attempts(), 1);
  loop.Stop();
  EXPECT_EQ(owner_.interrupts, 1) << "a second Stop must not reach the owner";
  EXPECT_EQ(timers_.Pending(), 0u) << "the wait's timer is cancelled";
}

TEST_F(ReconnectLoopTest, StopInterruptsAnAttemptInProgress) {
  owner_.block = true;
  ReconnectLoop loop(timers_, backoff_, owner_.Hooks());
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(WaitUntil([&] { return owner_.Attempts() == 1; }));
  loop.Stop();
  EXPECT_TRUE(owner_.Ended());
  EXPECT_EQ(owner_.interrupts, 1);
  EXPECT_TRUE(owner_.Waits().empty());
  EXPECT_EQ(backoff_.since_reset, 0) << "no delay drawn after a stop";
}

TEST_F(ReconnectLoopTest, StopBeforeStartOnlyInterrupts) {
  ReconnectLoop loop(timers_, backoff_, owner_.Hooks());
  loop.Stop();
  EXPECT_EQ(owner_.interrupts, 1);
  EXPECT_EQ(owner_.Attempts(), 0);
  EXPECT_FALSE(owner_.Ended());
}

}  // namespace
}  // namespace edge::testing
