// The controller's engine side (ComputeHub, ComputeTokens) on a ManualClock with fake member
// streams: dispatch by tags (intersection, tenant, random among equals), the contract's
// dispatch errors (NO_COMPUTE_MEMBER_FOR_TAG after the wait, COMPUTE_MEMBER_DISCONNECTED for
// every pending call of a member that leaves, DISPATCH_TIMEOUT), server keep-alives, and the
// end of a silent member with DEADLINE_EXCEEDED.
#include <gtest/gtest.h>

#include <future>

#include "controller/compute_hub.h"
#include "controller/compute_tokens.h"
#include "tests/support/manual_clock.h"

namespace edge::controller {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using compute::CalculationRequest;

class FakeSink final : public MemberSink {
 public:
  bool Send(const compute::ce::CloudEvent& event) override {
    std::lock_guard lock(mu);
    if (closed) return false;
    auto d = compute::DecodeCloudEvent(event);
    EXPECT_TRUE(d) << d.error().ToString();
    if (d) events.push_back(*d);
    return true;
  }
  void Close(const grpc::Status& status) override {
    std::lock_guard lock(mu);
    closed = true;
    close_status = status;
  }
  std::vector<compute::DecodedEvent> Events() {
    std::lock_guard lock(mu);
    return events;
  }
  std::mutex mu;
  std::vector<compute::DecodedEvent> events;
  bool closed = false;
  grpc::Status close_status;
};

// Always picks the last candidate (so "random among equals" is observable).
class LastRandom final : public Random {
 public:
  uint64_t Uniform(uint64_t bound) override { return bound == 0 ? 0 : bound - 1; }
};

class ComputeHubTest : public ::testing::Test {
 protected:
  ComputeHubTest()
      : hub_(clock_, random_,
             ComputeSettings{.keepalive_interval = 10s,
                             .keepalive_timeout = 30s,
                             .dispatch_timeout = 5s,
                             .member_wait = 0ms}) {}

  std::shared_ptr<FakeSink> Join(const std::string& id, const std::string& tenant,
                                 std::vector<std::string> tags) {
    auto sink = std::make_shared<FakeSink>();
    hub_.Join(id, tenant, tags, "sub", "ipv4:127.0.0.1:1", sink);
    return sink;
  }
  // Dispatches and returns a future of the result.
  std::shared_future<DispatchResult> Dispatch(std::vector<std::string> tags,
                                              std::optional<std::chrono::milliseconds> wait = {},
                                              const std::string& tenant = "acme") {
    auto p = std::make_shared<std::promise<DispatchResult>>();
    DispatchRequest r;
    r.tenant = tenant;
    r.tags = std::move(tags);
    r.name = "enrich";
    r.data = json{{"n", 1}};
    r.member_wait = wait;
    r.auth = {{"authtype", "user"}, {"authid", "op"}};
    hub_.Dispatch(r, [p](DispatchResult res) { p->set_value(std::move(res)); });
    return p->get_future().share();
  }
  static bool Ready(const std::shared_future<DispatchResult>& f) {
    return f.wait_for(0ms) == std::future_status::ready;
  }

  ManualClock clock_;
  LastRandom random_;
  ComputeHub hub_;
};

TEST_F(ComputeHubTest, DispatchGoesToAMemberWithACommonTagAndItsAnswerComesBack) {
  auto a = Join("m-a", "acme", {"x"});
  auto b = Join("m-b", "acme", {"y", "z"});
  auto other = Join("m-c", "globex", {"z"});
  auto f = Dispatch({"z", "w"});
  ASSERT_EQ(b->Events().size(), 1u);
  EXPECT_TRUE(a->Events().empty());
  EXPECT_TRUE(other->Events().empty());  // another tenant
  const auto req = b->Events()[0];
  EXPECT_EQ(req.type, compute::kProcessorRequest);
  EXPECT_EQ(req.body["processorName"], "enrich");
  EXPECT_EQ(req.body["payload"]["data"], json({{"n", 1}}));
  EXPECT_EQ(req.attributes.at("authid"), "op");
  EXPECT_EQ(hub_.Members()[1].calls_in_flight, 1u);
  EXPECT_FALSE(Ready(f));
  // Only the member the call went to may answer it.
  const std::string rid = req.body["requestId"];
  hub_.OnResponse("m-a", json{{"requestId", rid}, {"success", true}});
  EXPECT_FALSE(Ready(f));
  hub_.OnResponse("m-b", json{{"requestId", rid},
                              {"success", true},
                              {"payload", {{"type", "JSON"}, {"data", {{"n", 2}}}}}});
  ASSERT_TRUE(Ready(f));
  EXPECT_EQ(f.get().error_code, "");
  EXPECT_TRUE(f.get().success);
  EXPECT_EQ(f.get().member_id, "m-b");
  EXPECT_EQ(f.get().response["payload"]["data"]["n"], 2);
  EXPECT_EQ(hub_.pending(), 0u);
}

TEST_F(ComputeHubTest, NoTagsMeansAnyMemberOfTheTenantChosenAtRandom) {
  auto a = Join("m-a", "acme", {"x"});
  auto b = Join("m-b", "acme", {});
  auto f = Dispatch({});
  // LastRandom picks the last of the two candidates (ordered by id).
  EXPECT_EQ(b->Events().size(), 1u);
  EXPECT_TRUE(a->Events().empty());
}

TEST_F(ComputeHubTest, NoMemberForTagAtOnceOrAfterTheWait) {
  Join("m-a", "acme", {"x"});
  auto now = Dispatch({"nope"});
  ASSERT_TRUE(Ready(now));
  EXPECT_EQ(now.get().error_code, "NO_COMPUTE_MEMBER_FOR_TAG");
  auto waiting = Dispatch({"late"}, 2s);
  EXPECT_FALSE(Ready(waiting));
  clock_.Advance(1999ms);
  hub_.Sweep();
  EXPECT_FALSE(Ready(waiting));
  clock_.Advance(1ms);
  hub_.Sweep();
  ASSERT_TRUE(Ready(waiting));
  EXPECT_EQ(waiting.get().error_code, "NO_COMPUTE_MEMBER_FOR_TAG");
}

TEST_F(ComputeHubTest, AWaitingDispatchGoesToAMemberThatJoinsInTime) {
  auto f = Dispatch({"late"}, 5s);
  clock_.Advance(1s);
  hub_.Sweep();
  auto m = Join("m-late", "acme", {"late"});
  ASSERT_EQ(m->Events().size(), 1u);
  hub_.OnResponse("m-late", json{{"requestId", m->Events()[0].body["requestId"]},
                                 {"success", false},
                                 {"error", {{"code", "TOOL_FAILED"}, {"message", "x"}}}});
  ASSERT_TRUE(Ready(f));
  EXPECT_EQ(f.get().error_code, "");
  EXPECT_FALSE(f.get().success);
}

TEST_F(ComputeHubTest, EveryPendingCallOfAMemberThatLeavesIsDisconnected) {
  auto m = Join("m-a", "acme", {"x"});
  auto f1 = Dispatch({"x"});
  auto f2 = Dispatch({"x"});
  auto other = Join("m-b", "acme", {"y"});
  auto f3 = Dispatch({"y"});
  hub_.Leave("m-a");
  ASSERT_TRUE(Ready(f1));
  ASSERT_TRUE(Ready(f2));
  EXPECT_EQ(f1.get().error_code, "COMPUTE_MEMBER_DISCONNECTED");
  EXPECT_EQ(f2.get().error_code, "COMPUTE_MEMBER_DISCONNECTED");
  EXPECT_EQ(f1.get().member_id, "m-a");
  EXPECT_FALSE(Ready(f3));  // another member's call goes on
  EXPECT_EQ(hub_.Members().size(), 1u);
}

TEST_F(ComputeHubTest, DispatchTimesOut) {
  Join("m-a", "acme", {"x"});
  auto f = Dispatch({"x"});
  clock_.Advance(4999ms);
  hub_.Sweep();
  EXPECT_FALSE(Ready(f));
  clock_.Advance(1ms);
  hub_.Sweep();
  ASSERT_TRUE(Ready(f));
  EXPECT_EQ(f.get().error_code, "DISPATCH_TIMEOUT");
  EXPECT_EQ(hub_.Members()[0].calls_in_flight, 0u);
}

TEST_F(ComputeHubTest, KeepAlivesOnTheIntervalAndASilentMemberIsEnded) {
  auto m = Join("m-a", "acme", {"x"});
  clock_.Advance(9s);
  hub_.Sweep();
  EXPECT_TRUE(m->Events().empty());
  clock_.Advance(1s);
  hub_.Sweep();
  ASSERT_EQ(m->Events().size(), 1u);
  EXPECT_EQ(m->Events()[0].type, compute::kKeepAliveEvent);
  EXPECT_EQ(m->Events()[0].body["memberId"], "m-a");
  // Activity at 25 s moves the deadline: still there at 50 s, ended at 55 s.
  clock_.Advance(15s);
  hub_.Seen("m-a");
  clock_.Advance(25s);
  hub_.Sweep();
  EXPECT_FALSE(m->closed);
  auto f = Dispatch({"x"});
  clock_.Advance(5s);
  hub_.Sweep();
  EXPECT_TRUE(m->closed);
  EXPECT_EQ(m->close_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(hub_.Members().empty());
  ASSERT_TRUE(Ready(f));
  EXPECT_EQ(f.get().error_code, "COMPUTE_MEMBER_DISCONNECTED");
}

TEST_F(ComputeHubTest, CloseAllEndsMembersAndPendingCalls) {
  auto m = Join("m-a", "acme", {"x"});
  auto f = Dispatch({"x"});
  auto w = Dispatch({"none"}, 10s);
  hub_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping"));
  EXPECT_TRUE(m->closed);
  EXPECT_EQ(f.get().error_code, "COMPUTE_MEMBER_DISCONNECTED");
  EXPECT_EQ(w.get().error_code, "NO_COMPUTE_MEMBER_FOR_TAG");
}

TEST(ComputeTokens, MintAndVerify) {
  ManualClock clock;
  clock.SetWall(Clock::WallTime(std::chrono::seconds(1'800'000'000)));
  auto key = identity::EcSigningKey::Generate();
  ASSERT_TRUE(key);
  ComputeTokens tokens(*key, clock, "ctl");
  auto t = tokens.Mint("acme", {"ROLE_M2M"}, 3600s, "svc");
  ASSERT_TRUE(t) << t.error().ToString();
  auto c = tokens.Verify(*t);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->tenant_id, "acme");
  EXPECT_EQ(c->subject, "svc");
  EXPECT_TRUE(c->HasRole("ROLE_M2M"));
  EXPECT_FALSE(c->HasRole("ROLE_ADMIN"));
  // Another issuer's key, another audience, expiry: all UNAUTHENTICATED.
  auto other_key = identity::EcSigningKey::Generate();
  ComputeTokens other(*other_key, clock, "ctl");
  EXPECT_EQ(other.Verify(*t).error().code, ErrorCode::kUnauthenticated);
  ComputeTokens other_iss(*key, clock, "someone-else");
  EXPECT_FALSE(other_iss.Verify(*t));
  auto not_compute = identity::SignJwtEs256(
      json{{"iss", "ctl"}, {"sub", "n"}, {"tid", "acme"}, {"exp", 1'900'000'000}}, *key);
  EXPECT_FALSE(tokens.Verify(*not_compute));  // no aud "edge-compute"
  clock.Advance(3601s + 10s);
  EXPECT_FALSE(tokens.Verify(*t));
  EXPECT_FALSE(tokens.Verify(""));
  EXPECT_FALSE(tokens.Mint("", {"ROLE_M2M"}, 60s, ""));
  EXPECT_FALSE(tokens.Mint("acme", {}, 60s, ""));
  EXPECT_FALSE(tokens.Mint("acme", {"ROLE_M2M"}, 0s, ""));
}

}  // namespace
}  // namespace edge::controller
