// The heartbeat loop on a ManualSleeper (no sleeping): the body, the interval between
// successes, the backoff after failures and its reset, and a prompt stop.
#include <gtest/gtest.h>

#include "agent/worker_rpc/heartbeat.h"
#include "tests/support/manual_clock.h"

namespace edge::workerrpc {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class StepBackoff final : public Backoff {
 public:
  std::chrono::milliseconds Next() override { return std::chrono::milliseconds(1000 << n_++); }
  void Reset() override {
    n_ = 0;
    ++resets;
  }
  int resets = 0;

 private:
  int n_ = 0;
};

TEST(Heartbeat, BodyAndRpcUrl) {
  HeartbeatFacts f{.hostname = "host-1",
                   .draining = true,
                   .providers = {"local"},
                   .capabilities = {"exec"},
                   .max_sandboxes = 10,
                   .rpc_url = RpcUrl("0.0.0.0:7430", 7430, false, "host-1")};
  EXPECT_EQ(HeartbeatBody(f), json::parse(R"({"hostname":"host-1","status":"draining",
    "providers":["local"],"capabilities":["exec"],"capacity":{"max_sandboxes":10,
    "max_sandboxes_per_owner":0,"preview_domain":"","rpc_url":"http://host-1:7430"}})"));
  EXPECT_EQ(RpcUrl("10.0.0.5:0", 4321, true, "h"), "https://10.0.0.5:4321");
  f.draining = false;
  EXPECT_EQ(HeartbeatBody(f)["status"], "online");
}

TEST(Heartbeat, IntervalBackoffAndStop) {
  ManualClock clock;
  ManualSleeper sleeper(clock);
  StepBackoff backoff;
  std::vector<json> bodies;
  int calls = 0;
  // ok, fail, fail, ok, then stopped during the 5th wait.
  HeartbeatLoop loop(
      [&](const json& body) -> Result<json> {
        bodies.push_back(body);
        ++calls;
        if (calls == 2 || calls == 3) return MakeError(ErrorCode::kUnavailable, "down");
        return json::object();
      },
      [] { return HeartbeatFacts{.hostname = "h"}; }, sleeper, backoff, 30s);
  sleeper.StopAt(5);
  loop.Run();
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(sleeper.slept(), (std::vector<std::chrono::milliseconds>{30s, 1s, 2s, 30s, 30s}));
  EXPECT_EQ(loop.sent(), 3u);
  EXPECT_EQ(loop.failed(), 2u);
  EXPECT_EQ(loop.last_error(), "");
  EXPECT_EQ(bodies[0]["hostname"], "h");
}

TEST(Heartbeat, StoppedBeforeStartSendsNothing) {
  ManualClock clock;
  ManualSleeper sleeper(clock);
  StepBackoff backoff;
  sleeper.Stop("test");
  int calls = 0;
  HeartbeatLoop loop(
      [&](const json&) -> Result<json> {
        ++calls;
        return json::object();
      },
      [] { return HeartbeatFacts{}; }, sleeper, backoff, 30s);
  loop.Run();
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace edge::workerrpc
