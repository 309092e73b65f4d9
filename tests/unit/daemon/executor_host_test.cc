// ExecutorHost: the daemon's executor service — opened from config, ticked periodically, its
// state in the status details.
#include "agent/daemon/executor_host.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::daemon {
namespace {

using namespace std::chrono_literals;

TEST(ExecutorHostTest, TicksPeriodicallyAndSaysSoInItsDetails) {
  edge::testing::TempDir dir("exec-host");
  config::AgentConfig config;
  config.node_id = "node-1";
  config.data_dir = dir.path();
  ExecutorHost host(config, "test", SystemClock::Instance(),
                    ExecutorHost::Options{.threads = 1, .tick_interval = 5ms});
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

}  // namespace
}  // namespace edge::daemon
