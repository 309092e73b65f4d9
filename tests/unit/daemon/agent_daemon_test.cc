// AgentDaemon's loop (issue 14: an idle agent costs nothing): it sleeps until there is work —
// a change a service reports, a failed service's retry, the watchdog's half interval, the
// status file's liveness interval — and the watchdog is fed only while no service is stuck
// (issue 16 item 5). Turn() is one pass of Run's loop; ManualClock only: no sleeping.
#include "agent/daemon/agent_daemon.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/daemon/status_file.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::daemon {
namespace {

using namespace std::chrono_literals;

class TestService : public Service {
 public:
  TestService(std::string name, int failures) : name_(std::move(name)), failures_(failures) {}
  std::string Name() const override { return name_; }
  Status Start() override {
    ++starts;
    if (failures_-- > 0) return MakeError(ErrorCode::kUnavailable, "controller unreachable");
    return OkStatus();
  }
  void Stop() override {}
  std::map<std::string, std::string> Details() const override { return {{"state", state}}; }
  std::optional<std::string> Stuck(int64_t) const override { return stuck; }
  size_t ReleaseMemory() override {
    ++cache_releases;
    return 1 << 20;
  }
  // What a service does when its state changes.
  void Change(std::string s) {
    state = std::move(s);
    NotifyStatusChanged();
  }
  int starts = 0;
  int cache_releases = 0;
  std::string state = "connected";
  std::optional<std::string> stuck;

 private:
  std::string name_;
  int failures_;
};

class AgentDaemonTest : public ::testing::Test {
 protected:
  std::unique_ptr<AgentDaemon> Make(std::optional<std::chrono::microseconds> watchdog,
                                    int failures = 0,
                                    std::function<void(DaemonOptions&)> tweak = {}) {
    config::AgentConfig cfg;
    cfg.node_id = "node-1";
    cfg.data_dir = dir_.path();
    DaemonOptions options{.version = "test"};
    options.watchdog = watchdog;
    options.watchdog_from_environment = false;
    options.notify = [this](std::string_view s) { notified_.emplace_back(s); };
    // The process's CPU time and the page release are the test's (a real release is
    // memory_trim_test's).
    options.process_cpu_time = [this] { return cpu_; };
    options.release_code_pages = [this]() -> Result<PageRelease> {
      ++releases_;
      if (release_error_) return MakeError(*release_error_, "madvise failed");
      return PageRelease{.mappings = 3, .resident_bytes = 6 << 20};
    };
    if (tweak) tweak(options);
    auto d = std::make_unique<AgentDaemon>(cfg, std::move(options), clock_);
    auto svc = std::make_unique<TestService>("edge", failures);
    service_ = svc.get();
    d->services().Add(std::move(svc));
    return d;
  }
  AgentStatus Read() {
    auto s = ReadStatusFile(dir_.path());
    EXPECT_TRUE(s.has_value());
    return s.value_or(AgentStatus{});
  }
  int64_t NowMs() const { return ToEpochMillis(clock_.Now()); }
  size_t Feeds() const { return std::count(notified_.begin(), notified_.end(), "WATCHDOG=1"); }
  // `elapsed` passes in which the process uses `cpu`, then a turn; the releases so far.
  int TurnAfter(AgentDaemon& d, std::chrono::milliseconds elapsed, std::chrono::milliseconds cpu) {
    clock_.Advance(elapsed);
    cpu_ += cpu;
    d.Turn();
    return releases_;
  }

  testing::TempDir dir_{"daemon"};
  ManualClock clock_;
  std::vector<std::string> notified_;
  TestService* service_ = nullptr;
  std::chrono::nanoseconds cpu_{0};
  int releases_ = 0;
  std::optional<ErrorCode> release_error_;
};

TEST_F(AgentDaemonTest, AnIdleDaemonSleepsUntilItsLivenessInterval) {
  auto d = Make(std::nullopt);
  d->Start();
  EXPECT_EQ(notified_, std::vector<std::string>{"READY=1"});
  const int64_t written = NowMs();
  AgentStatus s = Read();
  EXPECT_EQ(s.state, "running");
  EXPECT_EQ(s.updated_at_ms, written);
  EXPECT_EQ(s.update_interval_ms, 60'000) << "what `edge-agent status` measures freshness by";
  EXPECT_EQ(d->Turn(), 60s) << "no work: one wake-up a minute, not every 5 s";

  clock_.Advance(30s);
  EXPECT_EQ(d->Turn(), 30s);
  EXPECT_EQ(Read().updated_at_ms, written) << "nothing changed, not due: not rewritten";

  clock_.Advance(30s);
  EXPECT_EQ(d->Turn(), 60s);
  EXPECT_EQ(Read().updated_at_ms, NowMs()) << "the liveness write";
  std::string why;
  EXPECT_TRUE(IsHealthy(Read(), clock_.Now(), &why)) << why;
}

TEST_F(AgentDaemonTest, CodePagesAreDroppedAfterAQuietMinuteOnceUntilTheAgentWorksAgain) {
  auto d = Make(std::nullopt);
  d->Start();
  // 20 ms of CPU in a minute (0.03 %): quiet. Start-up counts as work, so what it mapped goes.
  EXPECT_EQ(TurnAfter(*d, 60s, 20ms), 1);
  EXPECT_EQ(service_->cache_releases, 1) << "the services' caches go with the code";
  // Quiet again: the idle path maps little, no release every minute.
  EXPECT_EQ(TurnAfter(*d, 60s, 20ms), 1);
  EXPECT_EQ(service_->cache_releases, 1);
  // A status change between liveness turns is no trim turn, however quiet.
  d->StatusChanged();
  EXPECT_EQ(TurnAfter(*d, 30s, 0ms), 1);
  // A busy minute (2 s of CPU: 3.3 % of a core) releases nothing while it works...
  EXPECT_EQ(TurnAfter(*d, 30s, 2000ms), 1);
  // ...and the quiet minute after it does.
  EXPECT_EQ(TurnAfter(*d, 60s, 30ms), 2);
  // At the share (1 % = 600 ms a minute) is busy; just under it is quiet.
  EXPECT_EQ(TurnAfter(*d, 60s, 600ms), 2);
  EXPECT_EQ(TurnAfter(*d, 60s, 599ms), 3);
}

TEST_F(AgentDaemonTest, AFailedReleaseWaitsForTheNextQuietSpellAndAZeroShareNeverReleases) {
  release_error_ = ErrorCode::kInternal;
  auto d = Make(std::nullopt);
  d->Start();
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 1);
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 1) << "a failure is not retried every quiet minute";
  EXPECT_EQ(TurnAfter(*d, 60s, 5000ms), 1);
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 2) << "the next quiet spell tries again";

  releases_ = 0;
  release_error_.reset();
  auto off = Make(std::nullopt, 0, [](DaemonOptions& o) { o.idle_cpu_fraction = 0; });
  off->Start();
  for (int i = 0; i < 3; ++i) {
    // Not a nanosecond of CPU: still not under a share of 0.
    EXPECT_EQ(TurnAfter(*off, 60s, 0ms), 0) << "idle_cpu_fraction 0: never";
  }
}

TEST_F(AgentDaemonTest, AReleaseStoppedByALibraryLoadIsTriedAgainAtTheNextQuietTurn) {
  release_error_ = ErrorCode::kUnavailable;  // a library came or went while it listed them
  auto d = Make(std::nullopt);
  d->Start();
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 1);
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 2) << "quiet again: tried again";
  release_error_.reset();
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 3) << "and done";
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 3) << "then once per quiet spell, as always";
  release_error_ = ErrorCode::kFailedPrecondition;  // a tracer: kept until the next spell
  EXPECT_EQ(TurnAfter(*d, 60s, 5000ms), 3);
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 4);
  EXPECT_EQ(TurnAfter(*d, 60s, 10ms), 4);
}

TEST_F(AgentDaemonTest, AChangeAServiceReportsIsWrittenAtTheNextTurn) {
  auto d = Make(std::nullopt);
  d->Start();
  clock_.Advance(10s);
  service_->Change("backoff");
  EXPECT_EQ(d->Turn(), 60s) << "the liveness interval counts from this write";
  AgentStatus s = Read();
  EXPECT_EQ(s.updated_at_ms, NowMs());
  ASSERT_EQ(s.services.size(), 1u);
  EXPECT_EQ(s.services[0].details["state"], "backoff");
  // Written once: the next turn (a spurious wake-up) has nothing to do.
  clock_.Advance(1s);
  EXPECT_EQ(d->Turn(), 59s);
  EXPECT_EQ(Read().updated_at_ms, NowMs() - 1000);
  // StatusChanged (the listener the registry gives every service) from any thread works alike.
  d->StatusChanged();
  d->Turn();
  EXPECT_EQ(Read().updated_at_ms, NowMs());
}

TEST_F(AgentDaemonTest, TheWatchdogIsFedAtHalfItsIntervalOnlyWhileNoServiceIsStuck) {
  auto d = Make(90s);  // WatchdogSec=90s
  d->Start();
  EXPECT_EQ(Read().update_interval_ms, 45'000) << "one wake-up feeds and proves liveness";
  EXPECT_EQ(d->Turn(), 45s);
  EXPECT_EQ(Feeds(), 0u);
  clock_.Advance(44s);
  EXPECT_EQ(d->Turn(), 1s);
  EXPECT_EQ(Feeds(), 0u) << "not before its time";
  clock_.Advance(1s);
  EXPECT_EQ(d->Turn(), 45s);
  EXPECT_EQ(Feeds(), 1u);
  EXPECT_EQ(Read().updated_at_ms, NowMs());

  service_->stuck = "connected, but no heartbeat for 95 s";
  clock_.Advance(45s);
  d->Turn();
  clock_.Advance(45s);
  d->Turn();
  EXPECT_EQ(Feeds(), 1u) << "a wedged agent starves the watchdog: systemd restarts it";

  service_->stuck.reset();
  clock_.Advance(45s);
  d->Turn();
  EXPECT_EQ(Feeds(), 2u) << "healthy again: fed again";
}

// Review finding: a stall seen at one feed time must not cost a restart when it ends before
// WatchdogSec — while the feed is withheld the services are looked at every 5 s, and at once
// when one reports a change.
TEST_F(AgentDaemonTest, AStallThatEndsInTimeIsFedAgainBeforeTheWatchdogFires) {
  auto d = Make(90s);  // WatchdogSec=90s: fed at 45 s
  d->Start();
  service_->stuck = "connected, but no heartbeat for 95 s";
  clock_.Advance(45s);
  EXPECT_EQ(d->Turn(), 5s) << "withheld: looked at again in 5 s, not in 45";
  EXPECT_EQ(Feeds(), 0u);
  clock_.Advance(5s);
  EXPECT_EQ(d->Turn(), 5s) << "still stuck";
  EXPECT_EQ(Feeds(), 0u);
  service_->stuck.reset();
  clock_.Advance(5s);  // t = 55 s, well inside the 90 s
  EXPECT_EQ(d->Turn(), 35s) << "fed; the next wake-up is the liveness write due at 90 s";
  EXPECT_EQ(Feeds(), 1u);

  // A change the service reports while the feed is withheld is looked at at once.
  service_->stuck = "connected, but no heartbeat for 95 s";
  clock_.Advance(45s);
  d->Turn();
  EXPECT_EQ(Feeds(), 1u);
  clock_.Advance(1s);
  service_->stuck.reset();
  service_->Change("connected");
  d->Turn();
  EXPECT_EQ(Feeds(), 2u) << "fed at the change, 1 s after it was withheld";
}

TEST_F(AgentDaemonTest, AFailedServiceIsStartedAgainWhenItsRetryIsDue) {
  auto d = Make(std::nullopt, /*failures=*/2);
  d->Start();
  ASSERT_EQ(Read().services.at(0).state, ServiceState::kFailed);
  EXPECT_EQ(d->Turn(), 1s) << "the loop wakes for the retry, not for a poll";
  clock_.Advance(1s);
  EXPECT_EQ(d->Turn(), 2s);
  EXPECT_EQ(service_->starts, 2);
  AgentStatus s = Read();
  EXPECT_EQ(s.updated_at_ms, NowMs()) << "the failed attempt is shown at once";
  EXPECT_EQ(s.services.at(0).failed_attempts, 2);
  clock_.Advance(2s);
  EXPECT_EQ(d->Turn(), 60s);
  EXPECT_EQ(service_->starts, 3);
  EXPECT_EQ(Read().services.at(0).state, ServiceState::kRunning);
}

TEST(StatusFileTest, StaleAfterThreeLivenessIntervals) {
  ManualClock clock;
  AgentStatus s;
  s.pid = ::getpid();
  s.state = "running";
  s.update_interval_ms = 60'000;
  s.updated_at_ms = ToEpochMillis(clock.Now());
  std::string why;
  clock.Advance(180s);
  EXPECT_TRUE(IsHealthy(s, clock.Now(), &why)) << why;
  clock.Advance(1s);
  EXPECT_FALSE(IsHealthy(s, clock.Now(), &why));
  EXPECT_EQ(why, "status not refreshed for 181 s");
}

}  // namespace
}  // namespace edge::daemon
