// The operator API's pieces without a server (wire.md §5.1, §5.2): the Authorization header,
// a node's status and its JSON, the error table, and the persisted capabilities version the
// JSON reports. User tokens: tenant_tokens_test.cc; the HTTP path through the real binaries:
// tests/integration/operator_api_test.cc.
#include "controller/operator_api.h"

#include <gtest/gtest.h>

#include "common/rfc3339.h"
#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int64_t kNowS = 1'800'000'000;

TEST(OperatorApiBearer, AcceptsOnlyABearerToken) {
  EXPECT_EQ(OperatorApi::BearerToken("Bearer abc.def.ghi"), "abc.def.ghi");
  EXPECT_EQ(OperatorApi::BearerToken("bearer abc"), "abc");
  EXPECT_EQ(OperatorApi::BearerToken("BEARER abc"), "abc");
  EXPECT_FALSE(OperatorApi::BearerToken(""));
  EXPECT_FALSE(OperatorApi::BearerToken("Bearer"));
  EXPECT_FALSE(OperatorApi::BearerToken("Bearer "));
  EXPECT_FALSE(OperatorApi::BearerToken("Bearer  abc"));
  EXPECT_FALSE(OperatorApi::BearerToken("Basic dXNlcjpwYXNz"));
  EXPECT_FALSE(OperatorApi::BearerToken("Bearer abc def"));
  EXPECT_FALSE(OperatorApi::BearerToken("Bearer \xff\xfe"));
  EXPECT_FALSE(OperatorApi::BearerToken("abc.def.ghi"));
  EXPECT_FALSE(OperatorApi::BearerToken("Bearer " + std::string(17 << 10, 'a')));
}

// A connected node with a fresh heartbeat, tools and labels.
NodeView LiveNode(int64_t now_ms) {
  NodeView v;
  v.node = {.node_id = "edge-01",
            .tenant_id = "acme",
            .state = kNodeHealthy,
            .enrolled_at_ms = now_ms - 60'000,
            .last_seen_ms = now_ms - 1000};
  v.connected = true;
  v.edge = EdgeNodeRecord{.node_id = "edge-01",
                          .tenant_id = "acme",
                          .edge_enrolled_at_ms = now_ms - 60'000,
                          .last_heartbeat_ms = now_ms - 1000,
                          .capabilities_version = 2};
  v.capabilities.add_local_tools("echo");
  v.capabilities.add_local_tools("uname");
  return v;
}

TEST(OperatorApiStatus, OnlineOfflineBusy) {
  const int64_t now = kNowS * 1000;
  const auto stale = 90s;
  NodeView v = LiveNode(now);
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "online");
  // The heartbeat at exactly the threshold is still fresh; one ms later it is stale.
  v.edge->last_heartbeat_ms = now - 90'000;
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "online");
  v.edge->last_heartbeat_ms = now - 90'001;
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "offline");
  v = LiveNode(now);
  v.connected = false;
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "offline");
  v = LiveNode(now);
  v.edge.reset();
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "offline");
  v = LiveNode(now);
  (*v.capabilities.mutable_custom_labels())["agent.state"] = "draining";
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "busy");
  v = LiveNode(now);
  v.node.state = kNodeDraining;
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "busy");
  // Draining but gone: offline wins.
  v.connected = false;
  EXPECT_EQ(OperatorApi::DeriveStatus(v, now, stale), "offline");
}

TEST(OperatorApiStatus, NodeJsonHasEveryContractField) {
  const int64_t now = kNowS * 1000;
  NodeView v = LiveNode(now);
  json j = OperatorApi::NodeJson(v, now, 90s);
  EXPECT_EQ(j["node_id"], "edge-01");
  EXPECT_EQ(j["device_name"], "edge-01");  // no agent.device_name label
  EXPECT_EQ(j["status"], "online");
  EXPECT_EQ(j["last_seen"], FormatRfc3339(FromEpochMillis(now - 1000)));
  EXPECT_EQ(j["capabilities"], json::array({"echo", "uname"}));
  EXPECT_EQ(j["active_sessions_count"], 0);
  EXPECT_EQ(j["config_versions"], json({{"limits", 0}, {"capabilities", 2}}));
  (*v.capabilities.mutable_custom_labels())["agent.device_name"] = "Alice's laptop";
  EXPECT_EQ(OperatorApi::NodeJson(v, now, 90s)["device_name"], "Alice's laptop");
  // A node that never said Hello: last_seen falls back to its enrollment.
  NodeView fresh;
  fresh.node = {.node_id = "edge-02",
                .tenant_id = "acme",
                .state = kNodeEnrolled,
                .enrolled_at_ms = now - 5000};
  j = OperatorApi::NodeJson(fresh, now, 90s);
  EXPECT_EQ(j["status"], "offline");
  EXPECT_EQ(j["last_seen"], FormatRfc3339(FromEpochMillis(now - 5000)));
  EXPECT_EQ(j["capabilities"], json::array());
  EXPECT_EQ(j["config_versions"]["capabilities"], 0);
}

TEST(OperatorApiConfig, DefaultsVersionsAndEffectiveTimes) {
  const int64_t now = kNowS * 1000;
  NodeView v = LiveNode(now);
  json j = OperatorApi::ConfigJson(v);
  EXPECT_EQ(j["node_id"], "edge-01");
  EXPECT_EQ(j["limits"]["config_version"], 0);
  EXPECT_EQ(j["limits"]["effective_at"], FormatRfc3339(FromEpochMillis(now - 60'000)));
  EXPECT_EQ(j["limits"]["limits"], json({{"rate_limit", 20},
                                         {"max_frame_size", 1048576},
                                         {"reattach_window", 300},
                                         {"max_buffer_size", 4194304},
                                         {"buffer_overflow_policy", "drop_oldest"}}));
  EXPECT_EQ(j["capabilities"]["config_version"], 2);
  // Never changed on record: effective since the enrollment.
  EXPECT_EQ(j["capabilities"]["effective_at"], FormatRfc3339(FromEpochMillis(now - 60'000)));
  EXPECT_EQ(j["capabilities"]["capabilities"], json::array({"echo", "uname"}));
  v.edge->capabilities_changed_ms = now - 5000;
  EXPECT_EQ(OperatorApi::ConfigJson(v)["capabilities"]["effective_at"],
            FormatRfc3339(FromEpochMillis(now - 5000)));
}

TEST(OperatorApiErrors, StatusTableFollowsTheContract) {
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kUnauthenticated).first, 401u);
  EXPECT_STREQ(OperatorApi::ErrorStatus(ErrorCode::kUnauthenticated).second, "UNAUTHENTICATED");
  EXPECT_STREQ(OperatorApi::ErrorStatus(ErrorCode::kInvalidArgument).second, "INVALID_ARGUMENT");
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kInvalidArgument).first, 400u);
  // Another tenant's node is NOT_FOUND, never 403.
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kPermissionDenied).first, 404u);
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kNotFound).first, 404u);
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kInternal).first, 500u);
  // §5.1: 409 NODE_OFFLINE / NODE_DRAINING, 429 RATE_LIMITED, 502 NODE_ERROR.
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kUnavailable).first, 409u);
  EXPECT_STREQ(OperatorApi::ErrorStatus(ErrorCode::kUnavailable).second, "NODE_OFFLINE");
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kDraining).first, 409u);
  EXPECT_STREQ(OperatorApi::ErrorStatus(ErrorCode::kDraining).second, "NODE_DRAINING");
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kResourceExhausted).first, 429u);
  EXPECT_EQ(OperatorApi::ErrorStatus(ErrorCode::kAborted).first, 502u);
  EXPECT_STREQ(OperatorApi::ErrorStatus(ErrorCode::kAborted).second, "NODE_ERROR");
}

// Metrics periods are UTC windows: from midnight, from Monday, from the 1st.
TEST(OperatorApiMetrics, PeriodWindowsStartAtUtcBoundaries) {
  // Wednesday 2026-11-25 13:14:15.678 UTC.
  const auto now = FromEpochMillis(1'795'612'455'678);
  auto ms = [](const char* text) { return ToEpochMillis(*ParseRfc3339(text)); };
  auto today = OperatorApi::PeriodWindow("today", now);
  ASSERT_TRUE(today);
  EXPECT_EQ(today->first, ms("2026-11-25T00:00:00Z"));
  EXPECT_EQ(today->second, 1'795'612'455'679);  // just after now
  EXPECT_EQ(OperatorApi::PeriodWindow("", now)->first, ms("2026-11-25T00:00:00Z"));
  EXPECT_EQ(OperatorApi::PeriodWindow("week", now)->first, ms("2026-11-23T00:00:00Z"));
  EXPECT_EQ(OperatorApi::PeriodWindow("month", now)->first, ms("2026-11-01T00:00:00Z"));
  // On a Monday at midnight the week starts now; on a Sunday it began six days before.
  const auto monday = FromEpochMillis(ms("2026-11-23T00:00:00Z"));
  EXPECT_EQ(OperatorApi::PeriodWindow("week", monday)->first, ms("2026-11-23T00:00:00Z"));
  const auto sunday = FromEpochMillis(ms("2026-11-29T23:59:59Z"));
  EXPECT_EQ(OperatorApi::PeriodWindow("week", sunday)->first, ms("2026-11-23T00:00:00Z"));
  // The 1st of a month in a leap year, one millisecond before it ends.
  const auto leap = FromEpochMillis(ms("2028-02-29T23:59:59.999Z"));
  EXPECT_EQ(OperatorApi::PeriodWindow("month", leap)->first, ms("2028-02-01T00:00:00Z"));
  EXPECT_EQ(OperatorApi::PeriodWindow("today", leap)->first, ms("2028-02-29T00:00:00Z"));
  auto bad = OperatorApi::PeriodWindow("year", now);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("\"year\" is not today, week or month"), std::string::npos);
}

// capabilities_version: +1 when a Hello or CapabilityUpdate changes the tools, kept on the
// same tools, persisted across a reopen (a controller restart).
class CapabilitiesVersionTest : public StoreTestBase {};

TEST_F(CapabilitiesVersionTest, RisesOnlyWhenTheToolsChangeAndSurvivesARestart) {
  auto caps = [](std::vector<std::string> tools, const std::string& os = "linux") {
    return json{{"os", os}, {"local_tools", tools}}.dump();
  };
  {
    auto store = OpenStore();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->InsertJoinToken({.token_id = "j1",
                                        .token_hash = "h1",
                                        .tenant_id = "t1",
                                        .created_at_ms = 1000,
                                        .expires_at_ms = 100'000}));
    ASSERT_TRUE(store->EnrollEdgeNode({.jti = "j1",
                                       .join_token_hash = "h1",
                                       .node_id = "edge-01",
                                       .tenant_id = "t1",
                                       .public_key = std::string(32, '\x07'),
                                       .now_ms = 2000,
                                       .token = {.jti = "nt-1",
                                                 .node_id = "edge-01",
                                                 .issued_at_ms = 2000,
                                                 .expires_at_ms = 3'602'000}}));
    auto version = [&] { return (*store->GetEdgeNode("edge-01"))->capabilities_version; };
    EXPECT_EQ(version(), 0);
    ASSERT_TRUE(store->RecordHello("edge-01", caps({"echo"}), false, 3000));
    EXPECT_EQ(version(), 1);
    ASSERT_TRUE(store->RecordHello("edge-01", caps({"echo"}, "other-os"), false, 4000));
    EXPECT_EQ(version(), 1) << "same tools, other facts: no rise";
    EXPECT_EQ((*store->GetEdgeNode("edge-01"))->capabilities_changed_ms, 3000);
    ASSERT_TRUE(store->UpdateCapabilities("edge-01", caps({"echo", "uname"}), false, 4500));
    EXPECT_EQ(version(), 2);
    EXPECT_EQ((*store->GetEdgeNode("edge-01"))->capabilities_changed_ms, 4500);
    ASSERT_TRUE(store->UpdateCapabilities("edge-01", caps({"echo", "uname"}), true, 4600));
    EXPECT_EQ((*store->GetEdgeNode("edge-01"))->capabilities_changed_ms, 4500);
    EXPECT_EQ(version(), 2) << "draining is no tool change";
    ASSERT_TRUE(store->UpdateCapabilities("unknown", caps({"x"}), false, 4700))
        << "an unknown node changes nothing, as before";
    EXPECT_FALSE(store->RecordHello("unknown", caps({"x"}), false, 5000));
  }
  auto reopened = OpenStore();
  ASSERT_TRUE(reopened);
  EXPECT_EQ((*reopened->GetEdgeNode("edge-01"))->capabilities_version, 2);
  ASSERT_TRUE(reopened->RecordHello("edge-01", caps({"uname"}), false, 6000));
  EXPECT_EQ((*reopened->GetEdgeNode("edge-01"))->capabilities_version, 3);
}

}  // namespace
}  // namespace edge::controller
