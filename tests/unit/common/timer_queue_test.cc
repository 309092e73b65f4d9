// TimerQueue on a ManualClock: timers run only once the clock has passed them, in due order
// (ties in scheduling order), can be cancelled, may schedule and cancel from a callback, and
// Stop is prompt and drops what is pending. Nothing sleeps for timing: the clock is advanced,
// Poke() wakes the queue, and the test waits on conditions with a real-time deadline.
#include "common/timer_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "tests/support/manual_clock.h"
#include "tests/support/wait_until.h"

namespace edge::testing {
namespace {

using namespace std::chrono_literals;

// What ran, in order; thread-safe.
class Record {
 public:
  TimerQueue::Callback Add(std::string name) {
    return [this, name = std::move(name)] {
      std::lock_guard lock(mu_);
      ran_.push_back(name);
    };
  }
  std::vector<std::string> Ran() const {
    std::lock_guard lock(mu_);
    return ran_;
  }
  size_t Count() const { return Ran().size(); }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> ran_;
};

class TimerQueueTest : public ::testing::Test {
 protected:
  // Advances the clock, pokes the queue, and returns once every timer due by now has run: a
  // barrier timer due now runs after all of them (due order), so no sleeping is needed to
  // show that a timer did NOT run.
  void AdvanceAndSettle(std::chrono::milliseconds d) {
    clock_.Advance(d);
    queue_.Poke();
    Settle();
  }
  void Settle() {
    auto done = std::make_shared<std::atomic<bool>>(false);
    ASSERT_NE(queue_.After(0ms, [done] { *done = true; }), 0u);
    ASSERT_TRUE(WaitUntil([&] { return done->load(); })) << "the queue did not run a due timer";
  }

  // The queue is declared last, so it stops before what its callbacks touch is destroyed.
  ManualClock clock_;
  Record record_;
  TimerQueue queue_{clock_};
};

TEST_F(TimerQueueTest, RunsInDueOrderOnlyAfterTheClockPassesThem) {
  const auto start = clock_.Monotonic();
  queue_.After(300ms, record_.Add("c"));
  queue_.After(100ms, record_.Add("a"));
  queue_.After(200ms, record_.Add("b"));
  EXPECT_EQ(queue_.Pending(), 3u);
  ASSERT_TRUE(queue_.NextDue());
  EXPECT_EQ(*queue_.NextDue(), start + 100ms);

  Settle();
  EXPECT_TRUE(record_.Ran().empty());
  AdvanceAndSettle(99ms);
  EXPECT_TRUE(record_.Ran().empty());

  // Poke alone (no barrier) wakes the queue once the clock passed "a".
  clock_.Advance(1ms);
  queue_.Poke();
  ASSERT_TRUE(WaitUntil([&] { return record_.Count() == 1; }));
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(*queue_.NextDue(), start + 200ms);

  AdvanceAndSettle(150ms);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"a", "b"}));
  AdvanceAndSettle(50ms);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(queue_.Pending(), 0u);
  EXPECT_FALSE(queue_.NextDue());
}

TEST_F(TimerQueueTest, OneBigAdvanceRunsEverythingDueInOrder) {
  queue_.After(3s, record_.Add("3"));
  queue_.After(1s, record_.Add("1"));
  queue_.After(10s, record_.Add("10"));
  queue_.After(2s, record_.Add("2"));
  AdvanceAndSettle(5s);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(queue_.Pending(), 1u);
}

TEST_F(TimerQueueTest, EqualDueTimesRunInSchedulingOrder) {
  for (const char* name : {"first", "second", "third"})
    queue_.After(1s, record_.Add(name));
  AdvanceAndSettle(1s);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"first", "second", "third"}));
}

TEST_F(TimerQueueTest, ZeroOrNegativeDelayRunsWithoutAdvancing) {
  queue_.After(0ms, record_.Add("zero"));
  queue_.After(-5s, record_.Add("negative"));
  ASSERT_TRUE(WaitUntil([&] { return record_.Count() == 2; }));
  // A negative delay is not "earlier than now": both are due now, in scheduling order.
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"zero", "negative"}));
}

TEST_F(TimerQueueTest, CancelRemovesAPendingTimer) {
  const auto a = queue_.After(1s, record_.Add("a"));
  const auto b = queue_.After(2s, record_.Add("b"));
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(queue_.IsPending(a));

  EXPECT_TRUE(queue_.Cancel(a));
  EXPECT_FALSE(queue_.IsPending(a));
  EXPECT_TRUE(queue_.IsPending(b));
  EXPECT_EQ(queue_.Pending(), 1u);
  EXPECT_FALSE(queue_.Cancel(a)) << "a second cancel";
  EXPECT_FALSE(queue_.Cancel(987654)) << "an unknown id";

  AdvanceAndSettle(5s);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"b"}));
  EXPECT_FALSE(queue_.IsPending(b));
  EXPECT_FALSE(queue_.Cancel(b)) << "a timer that already ran";
}

TEST_F(TimerQueueTest, CallbacksMayScheduleAndCancel) {
  TimerQueue::TimerId victim = queue_.After(2s, record_.Add("victim"));
  queue_.After(1s, [&] {
    record_.Add("outer")();
    queue_.After(500ms, record_.Add("inner"));
    queue_.Cancel(victim);
  });
  AdvanceAndSettle(1s);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"outer"}));
  EXPECT_FALSE(queue_.IsPending(victim));
  EXPECT_EQ(queue_.Pending(), 1u);  // "inner", due 500 ms after the callback ran
  AdvanceAndSettle(499ms);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"outer"}));
  AdvanceAndSettle(1ms);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"outer", "inner"}));
  AdvanceAndSettle(10s);
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"outer", "inner"}));
}

TEST_F(TimerQueueTest, StopIsPromptAndDropsPendingTimers) {
  queue_.After(1h, record_.Add("later"));
  queue_.After(1s, record_.Add("soon"));
  // Stop does not wait for the pending timers (an hour on the clock that never moves).
  auto stopped = std::async(std::launch::async, [&] { queue_.Stop(); });
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready) << "Stop hung";
  stopped.get();

  EXPECT_EQ(queue_.Pending(), 0u);
  EXPECT_FALSE(queue_.NextDue());
  EXPECT_EQ(queue_.After(1ms, record_.Add("after-stop")), 0u);
  EXPECT_EQ(queue_.Pending(), 0u);
  // The thread is joined: nothing can run any more, whatever the clock does.
  clock_.Advance(2h);
  queue_.Poke();
  EXPECT_TRUE(record_.Ran().empty());
  queue_.Stop();  // idempotent
  EXPECT_TRUE(record_.Ran().empty());
}

TEST_F(TimerQueueTest, StopDuringACallbackWaitsForItAndRunsNothingElse) {
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> running{false};
  queue_.After(1s, [&, released] {
    running = true;
    released.wait();
    record_.Add("blocking")();
  });
  queue_.After(1s, record_.Add("next"));  // due too, queued behind the blocking one
  clock_.Advance(1s);
  queue_.Poke();
  ASSERT_TRUE(WaitUntil([&] { return running.load(); }));

  auto stopped = std::async(std::launch::async, [&] { queue_.Stop(); });
  // Stop has dropped "next" (and marked the queue stopping) before it waits for the thread.
  ASSERT_TRUE(WaitUntil([&] { return queue_.Pending() == 0; }));
  EXPECT_EQ(stopped.wait_for(0ms), std::future_status::timeout)
      << "Stop returned while a callback was still running";
  release.set_value();
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready) << "Stop hung";
  stopped.get();
  EXPECT_EQ(record_.Ran(), (std::vector<std::string>{"blocking"}));
}

TEST(TimerQueueDestructorTest, DestructorReturnsWithPendingTimers) {
  ManualClock clock;
  auto destroyed = std::async(std::launch::async, [&] {
    TimerQueue queue(clock);
    EXPECT_EQ(&queue.clock(), &clock);
    EXPECT_NE(queue.After(1min, [] {}), 0u);
    EXPECT_EQ(queue.Pending(), 1u);
  });
  ASSERT_EQ(destroyed.wait_for(10s), std::future_status::ready) << "~TimerQueue hung";
  destroyed.get();
}

}  // namespace
}  // namespace edge::testing
