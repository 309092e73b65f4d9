// StopSource, ManualSleeper and TerminationSignalStop: a stop ends a wait at once.
#include "common/stop.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <thread>

#include "common/signals.h"
#include "tests/support/manual_clock.h"

namespace edge {
namespace {

using namespace std::chrono_literals;

TEST(StopSource, StopEndsAWaitInAnotherThreadAtOnce) {
  StopSource stop;
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    stop.Stop("SIGTERM");
  });
  EXPECT_FALSE(stop.SleepFor(std::chrono::milliseconds(60'000)));
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(stop.Stopped());
  EXPECT_EQ(stop.StopReason(), "SIGTERM");
}

TEST(StopSource, AStoppedSourceDoesNotWaitAndKeepsTheFirstReason) {
  StopSource stop;
  stop.Stop("first");
  stop.Stop("second");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stop.SleepFor(std::chrono::milliseconds(60'000)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(stop.StopReason(), "first");
}

TEST(StopSource, ShortWaitPassesWhenNotStopped) {
  StopSource stop;
  EXPECT_TRUE(stop.SleepFor(1ms));
  EXPECT_FALSE(stop.Stopped());
  EXPECT_EQ(stop.StopReason(), "");
}

TEST(StopSource, CallbacksRunOnceOnStopAndNotAfterTheirHandleIsGone) {
  StopSource stop;
  int kept = 0, dropped = 0;
  auto keep = stop.OnStop([&] { ++kept; });
  {
    auto drop = stop.OnStop([&] { ++dropped; });
  }
  stop.Stop("x");
  stop.Stop("y");
  EXPECT_EQ(kept, 1);
  EXPECT_EQ(dropped, 0);
  int late = 0;
  auto after = stop.OnStop([&] { ++late; });
  EXPECT_EQ(late, 1) << "registered after the stop: runs at once";
}

TEST(ManualSleeper, AdvancesTheClockAndStopsAtTheGivenWait) {
  ManualClock clock;
  ManualSleeper sleeper(clock);
  sleeper.StopAt(3);
  const auto t0 = clock.Monotonic();
  EXPECT_TRUE(sleeper.SleepFor(100ms));
  EXPECT_TRUE(sleeper.SleepFor(200ms));
  EXPECT_EQ(clock.Monotonic() - t0, 300ms);
  EXPECT_FALSE(sleeper.SleepFor(400ms));
  EXPECT_EQ(clock.Monotonic() - t0, 300ms) << "an interrupted wait does not pass its time";
  EXPECT_TRUE(sleeper.Stopped());
  EXPECT_EQ(sleeper.StopReason(), "SIGTERM");
  EXPECT_FALSE(sleeper.SleepFor(1ms));
  EXPECT_EQ(sleeper.slept().size(), 3u);
}

TEST(TerminationSignalStop, ASignalStopsTheSourceAndEndsTheWait) {
  // Blocked in this thread before the watcher starts; the watcher inherits the mask.
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGQUIT);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
  {
    StopSource stop;
    TerminationSignalStop watcher(stop);
    std::thread sender([] {
      std::this_thread::sleep_for(50ms);
      ::kill(::getpid(), SIGTERM);
    });
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(stop.SleepFor(std::chrono::milliseconds(60'000)));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    sender.join();
    EXPECT_EQ(stop.StopReason(), "SIGTERM");
  }
  {
    StopSource stop;
    { TerminationSignalStop watcher(stop); }  // goes without a signal, promptly
    EXPECT_FALSE(stop.Stopped());
  }
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
}

}  // namespace
}  // namespace edge
