// ExecutorHost: the daemon's executor service — opened from config, ticked when there is
// work (issue 14: an idle agent never wakes for a tick), its state in the status details.
#include "agent/daemon/executor_host.h"

#include <gtest/gtest.h>

#include <string>

#include "common/clock.h"
#include "sandbox/sandbox_registry.h"

#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::daemon {
namespace {

using namespace std::chrono_literals;

// node-1's config with its data in `dir`.
config::AgentConfig NodeConfig(const edge::testing::TempDir& dir) {
  config::AgentConfig config;
  config.node_id = "node-1";
  config.data_dir = dir.path();
  return config;
}

TEST(ExecutorHostTest, TicksPeriodicallyAndSaysSoInItsDetails) {
  edge::testing::TempDir dir("exec-host");
  const config::AgentConfig config = NodeConfig(dir);
  ExecutorHost host(
      config, "test", SystemClock::Instance(),
      ExecutorHost::Options{.threads = 1, .tick_interval = 5ms, .idle_tick_interval = 5ms});
  EXPECT_TRUE(host.Details().empty()) << "nothing to report before Start";
  ASSERT_TRUE(host.Start());
  ASSERT_NE(host.executor(), nullptr);
  auto ticks = [&] { return std::stoull(host.Details().at("ticks")); };
  const auto first = ticks();
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return ticks() >= first + 3; }))
      << "ticks stayed at " << ticks();
  const auto details = host.Details();
  EXPECT_EQ(details.at("running"), "0");
  EXPECT_EQ(details.at("draining"), "false");
  EXPECT_FALSE(details.at("isolation").empty());
  host.Stop();
  EXPECT_EQ(host.executor(), nullptr);
  EXPECT_TRUE(host.Details().empty());
}

// Issue 9 #6: the tick runs on the injected clock — a ManualClock moved by one interval runs
// exactly one more tick, and nothing runs while it stands still.
TEST(ExecutorHostTest, TicksFollowTheInjectedClock) {
  edge::testing::TempDir dir("exec-host");
  const config::AgentConfig config = NodeConfig(dir);
  ManualClock clock;
  ExecutorHost host(
      config, "test", clock,
      ExecutorHost::Options{.threads = 1, .tick_interval = 10s, .idle_tick_interval = 10s});
  ASSERT_TRUE(host.Start());
  auto ticks = [&] { return std::stoull(host.Details().at("ticks")); };
  EXPECT_EQ(ticks(), 0u);
  for (uint64_t n = 1; n <= 3; ++n) {
    clock.Advance(10s);
    ASSERT_TRUE(edge::testing::WaitUntil([&] { return ticks() == n; }))
        << "ticks " << ticks() << " after " << n << " intervals";
  }
  clock.Advance(9s);
  EXPECT_FALSE(edge::testing::WaitUntil([&] { return ticks() > 3; }, 200ms))
      << "a tick before its interval";
  host.Stop();
}

// Issue 14: with nothing to watch the tick comes once per idle interval, not every second;
// a sandbox with a TTL brings a tick at once and the next one at its expiry, which destroys
// it; then the executor is idle again.
TEST(ExecutorHostTest, TicksOnlyWhenThereIsWork) {
  edge::testing::TempDir dir("exec-host");
  const config::AgentConfig config = NodeConfig(dir);
  ManualClock clock;
  ExecutorHost host(
      config, "test", clock,
      ExecutorHost::Options{.threads = 1, .tick_interval = 1s, .idle_tick_interval = 10min});
  ASSERT_TRUE(host.Start());
  auto ticks = [&] { return std::stoull(host.Details().at("ticks")); };
  clock.Advance(10min - 1s);
  EXPECT_FALSE(edge::testing::WaitUntil([&] { return ticks() > 0; }, 200ms))
      << "an idle executor ticked before its idle interval";
  clock.Advance(1s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return ticks() == 1; }));

  sandbox::SpawnRequest sp;
  sp.id = "sb";
  sp.ttl = 30s;
  sandbox::Lease lease{
      .resource_id = "sb", .holder_id = "node-1", .generation = 1, .expires_at = clock.Now() + 1h};
  ASSERT_TRUE(host.executor()->Spawn(sp, &lease).has_value());
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return ticks() == 2; }))
      << "a new TTL to watch: a tick at once, which plans the next";
  clock.Advance(29s);
  EXPECT_FALSE(edge::testing::WaitUntil([&] { return ticks() > 2; }, 200ms));
  clock.Advance(1s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return ticks() == 3; })) << "at the sandbox's expiry";
  ASSERT_TRUE(edge::testing::WaitUntil([&] {
    auto st = host.executor()->Status("sb");
    return st && st->state == sandbox::SandboxState::kDestroyed;
  })) << "expired (ttl) and destroyed by that tick";
  clock.Advance(10min - 1s);
  EXPECT_FALSE(edge::testing::WaitUntil([&] { return ticks() > 3; }, 200ms)) << "idle again";
  clock.Advance(1s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return ticks() == 4; }));
  host.Stop();
}

}  // namespace
}  // namespace edge::daemon
