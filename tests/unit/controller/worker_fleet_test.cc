// WorkerFleet over a real SqliteStore and a ManualClock: a worker is stale exactly after two
// missed heartbeat intervals (and online again with the next heartbeat), draining is shown as
// reported, and a call is prepared only for a known worker with an rpc_url and a credential,
// with the lease's ttl bounded by max_lease_ttl.
#include <gtest/gtest.h>

#include "agent/identity/worker_token.h"
#include "controller/worker_fleet.h"
#include "tests/support/manual_clock.h"
#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class WorkerFleetTest : public StoreTestBase {
 protected:
  void SetUp() override {
    StoreTestBase::SetUp();
    store_ = OpenStore();
    auth_.worker_signing_key = "fleet-signing-key-kkkkkkkk";
  }
  WorkerFleet Fleet(config::WorkerAuth auth) {
    return WorkerFleet(*store_, clock_, {.heartbeat_interval = 10s, .max_lease_ttl = 1h}, auth);
  }
  std::string StateOf(WorkerFleet& fleet, const std::string& id) {
    auto all = fleet.List();
    EXPECT_TRUE(all);
    for (const auto& v : *all)
      if (v.record.worker_id == id) return v.state;
    return "";
  }

  ManualClock clock_;
  config::WorkerAuth auth_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(WorkerFleetTest, StaleAfterTwoMissedIntervalsAndBackWithTheNextHeartbeat) {
  auto fleet = Fleet(auth_);
  const json body = {{"hostname", "h"}, {"capacity", {{"rpc_url", "http://127.0.0.1:7430"}}}};
  ASSERT_TRUE(fleet.RecordHeartbeat("w1", body, "127.0.0.1:1"));
  EXPECT_EQ(StateOf(fleet, "w1"), "online");
  clock_.Advance(20s);  // exactly two intervals: not yet
  EXPECT_EQ(StateOf(fleet, "w1"), "online");
  clock_.Advance(1ms);
  EXPECT_EQ(StateOf(fleet, "w1"), "stale");
  json draining = body;
  draining["status"] = "draining";
  ASSERT_TRUE(fleet.RecordHeartbeat("w1", draining, "127.0.0.1:1"));
  EXPECT_EQ(StateOf(fleet, "w1"), "draining");
}

TEST_F(WorkerFleetTest, PrepareCallNeedsAKnownWorkerWithAnRpcUrlAndACredential) {
  auto fleet = Fleet(auth_);
  auto unknown = fleet.PrepareCall("w1", "", 0ms);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(fleet.RecordHeartbeat("w1", json::object(), "r"));
  auto no_url = fleet.PrepareCall("w1", "", 0ms);
  ASSERT_FALSE(no_url);
  EXPECT_EQ(no_url.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(no_url.error().message.find("rpc_url"), std::string::npos);
  ASSERT_TRUE(
      fleet.RecordHeartbeat("w1", {{"capacity", {{"rpc_url", "http://127.0.0.1:7430"}}}}, "r"));

  auto plan = fleet.PrepareCall("w1", "sb-1", 0ms);
  ASSERT_TRUE(plan) << plan.error().ToString();
  EXPECT_EQ(plan->rpc_url, "http://127.0.0.1:7430");
  ASSERT_TRUE(plan->lease);
  EXPECT_EQ(plan->lease->generation, 1);
  // The default ttl (5 minutes) from the clock's now.
  EXPECT_EQ(plan->lease->expires_at_ms, std::chrono::duration_cast<std::chrono::milliseconds>(
                                            (clock_.Now() + 5min).time_since_epoch())
                                            .count());
  // The token is a signed aud=worker:rpc token for that worker.
  identity::WorkerTokenVerifyOptions o;
  o.worker_id = "w1";
  o.audience = std::string(identity::kWorkerRpcAudience);
  o.keys = {auth_.worker_signing_key};
  EXPECT_TRUE(identity::WorkerToken::Verify(plan->token, o, clock_.Now()));

  auto too_long = fleet.PrepareCall("w1", "sb-2", 2h);
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(too_long.error().message.find("max_lease_ttl"), std::string::npos);
  auto bad_resource = fleet.PrepareCall("w1", "sb 1", 0ms);
  ASSERT_FALSE(bad_resource);
  EXPECT_EQ(bad_resource.error().code, ErrorCode::kInvalidArgument);
  auto bad_id = fleet.PrepareCall("../w1", "", 0ms);
  ASSERT_FALSE(bad_id);
  EXPECT_EQ(bad_id.error().code, ErrorCode::kInvalidArgument);

  auto none = Fleet(config::WorkerAuth{});
  auto no_cred = none.PrepareCall("w1", "", 0ms);
  ASSERT_FALSE(no_cred);
  EXPECT_EQ(no_cred.error().code, ErrorCode::kUnauthenticated);
}

TEST_F(WorkerFleetTest, RenewChecksThePresentedLeaseAgainstThePath) {
  auto fleet = Fleet(auth_);
  ASSERT_TRUE(fleet.RecordHeartbeat("w1", {{"capacity", {{"rpc_url", "http://h:1"}}}}, "r"));
  ASSERT_TRUE(fleet.PrepareCall("w1", "sb-1", 1min));
  const json lease = {{"resource_id", "sb-1"}, {"holder_id", "w1"}, {"generation", 1}};
  auto ok = fleet.RenewForWorker("w1", "sb-1", {{"ttl", 120}, {"lease", lease}});
  ASSERT_TRUE(ok) << ok.error().ToString();
  EXPECT_EQ(ok->generation, 2);
  for (const auto& [body, words] : std::vector<std::pair<json, std::string>>{
           {json::array(), "JSON object"},
           {{{"lease", "x"}}, "lease object is required"},
           {{{"resource_id", "sb-2"}, {"lease", lease}}, "resource_id sb-2"},
           {{{"ttl", "soon"}, {"lease", lease}}, "ttl soon"},
           {{{"ttl", -5}, {"lease", lease}}, "ttl -5"},
           {{{"lease", {{"resource_id", "sb-1"}, {"holder_id", "w1"}}}}, "lease.generation"},
       }) {
    auto r = fleet.RenewForWorker("w1", "sb-1", body);
    ASSERT_FALSE(r) << body.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << body.dump();
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace edge::controller
