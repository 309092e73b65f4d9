// EdgeFleet: the operator's operations on the edge fleet (the admin socket and the REST API
// both call them): argument checks with their messages, nothing sent or stored when a check
// fails, the node view, config pushes and revocation. A real SQLite store, a Dispatcher with
// a recording stream in place of a node, a ManualClock.
#include "controller/edge_fleet.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "controller/edge_codec.h"
#include "tests/unit/controller/edge_fleet_fixture.h"

namespace edge::controller {
namespace {

namespace pb = aegis::cluster::v1;

using EdgeFleetTest = EdgeFleetFixture;

TEST_F(EdgeFleetTest, ArgumentsAreCheckedWithTheirOwnMessages) {
  auto limit = fleet_->ListCommands("", -1);
  ASSERT_FALSE(limit);
  EXPECT_EQ(limit.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(limit.error().message, "limit -1 is negative");
  auto empty = fleet_->GetCommand("");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "command_id is required");
  auto missing = fleet_->GetCommand("nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "command nope not found");
  EXPECT_EQ(fleet_->RevokeJoinToken("").error().message, "token_id is required");
  EXPECT_EQ(fleet_->RevokeNode("").error().message, "node_id is required");
}

TEST_F(EdgeFleetTest, NodesAreShownWithTheirStreamAndCapabilities) {
  ASSERT_TRUE(store_->UpsertNode({.node_id = "plain-02", .tenant_id = "t1", .state = "enrolled"}));
  EnrollEdge01();
  auto nodes = fleet_->ListNodes();
  ASSERT_TRUE(nodes) << nodes.error().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  const NodeView* edge01 = nullptr;
  const NodeView* plain = nullptr;
  for (const auto& v : *nodes)
    (v.node.node_id == "edge-01" ? edge01 : plain) = &v;
  ASSERT_TRUE(edge01 && plain);
  EXPECT_TRUE(edge01->connected);
  ASSERT_TRUE(edge01->edge.has_value());
  EXPECT_EQ(edge01->edge->public_key, std::string(32, 'k'));
  EXPECT_EQ(edge01->capabilities.os(), "linux");
  EXPECT_EQ(edge01->capabilities.custom_labels().at("site"), "lab");
  EXPECT_FALSE(plain->connected);
  EXPECT_FALSE(plain->edge.has_value());
}

TEST_F(EdgeFleetTest, ATenantSeesOnlyItsOwnNodesAndNoRevokedOne) {
  ASSERT_TRUE(store_->UpsertNode({.node_id = "plain-02", .tenant_id = "t1", .state = "enrolled"}));
  ASSERT_TRUE(store_->UpsertNode({.node_id = "other-03", .tenant_id = "t2", .state = "healthy"}));
  EnrollEdge01();
  auto t1 = fleet_->ListTenantNodes("t1");
  ASSERT_TRUE(t1) << t1.error().ToString();
  ASSERT_EQ(t1->size(), 2u);
  EXPECT_EQ((*t1)[0].node.node_id, "edge-01");
  EXPECT_EQ((*t1)[0].edge->capabilities_version, 1) << "the Hello reported its tools";
  EXPECT_EQ((*t1)[1].node.node_id, "plain-02");
  auto t2 = fleet_->ListTenantNodes("t2");
  ASSERT_TRUE(t2);
  ASSERT_EQ(t2->size(), 1u);
  EXPECT_EQ((*t2)[0].node.node_id, "other-03");
  EXPECT_TRUE(fleet_->ListTenantNodes("nobody")->empty());
  EXPECT_EQ(fleet_->ListTenantNodes("").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(fleet_->GetTenantNode("t1", "edge-01")->node.node_id, "edge-01");
  auto foreign = fleet_->GetTenantNode("t2", "edge-01");
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(foreign.error().message, "node edge-01 not found") << "as if it did not exist";
  EXPECT_EQ(fleet_->GetTenantNode("t1", "no-such").error().message, "node no-such not found");
  EXPECT_EQ(fleet_->GetTenantNode("t1", "").error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(fleet_->RevokeNode("edge-01"));
  EXPECT_EQ(fleet_->ListTenantNodes("t1")->size(), 1u) << "a revoked node is not listed";
}

TEST_F(EdgeFleetTest, AConfigPushIsValidatedBeforeAnythingIsSent) {
  EnrollEdge01();
  auto bad = fleet_->PushConfig("edge-01", "clustr: { heartbeat_interval_secs: 5 }\n", "v1");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("clustr: unknown key"), std::string::npos)
      << bad.error().message;
  EXPECT_TRUE(stream_->sent.empty()) << "a refused delta never reaches the node";
  EXPECT_FALSE(fleet_->PushConfig("edge-01", "", ""));

  auto sent = fleet_->PushConfig("edge-01", "cluster: { heartbeat_interval_secs: 5 }\n", "");
  ASSERT_TRUE(sent) << sent.error().ToString();
  EXPECT_EQ(sent->version, "v" + std::to_string(ToEpochMillis(clock_.Now())));
  EXPECT_FALSE(sent->limits_version) << "no edge_api in the delta";
  ASSERT_EQ(stream_->sent.size(), 1u);
  EXPECT_EQ(stream_->sent[0].push_config().version(), sent->version);
  EXPECT_EQ(fleet_->PushConfig("edge-01", "{}", "mine")->version, "mine");
}

TEST_F(EdgeFleetTest, EdgeApiLimitsStayOnTheControllerAndTheirVersionRisesOnlyOnChange) {
  EnrollEdge01();
  std::vector<std::pair<std::string, int64_t>> told;
  fleet_->SetLimitsListener([&](const std::string& n, int64_t v) { told.emplace_back(n, v); });
  NodeLimits before = fleet_->LimitsOf("edge-01");
  EXPECT_EQ(before.version, 0);
  EXPECT_EQ(before.limits, EdgeApiLimits{}) << "the controller's (the wire.md §5.2 defaults)";

  // Limits only: stored, nothing sent to the node, the version rises once.
  clock_.Advance(std::chrono::seconds(5));
  auto pushed =
      fleet_->PushConfig("edge-01", "edge_api:\n  limits:\n    reattach_window: 60\n", "");
  ASSERT_TRUE(pushed) << pushed.error().ToString();
  EXPECT_EQ(pushed->version, "") << "nothing for the node itself";
  EXPECT_EQ(pushed->limits_version, 1);
  EXPECT_TRUE(stream_->sent.empty());
  NodeLimits now = fleet_->LimitsOf("edge-01");
  EXPECT_EQ(now.version, 1);
  EXPECT_EQ(now.limits.reattach_window, 60);
  EXPECT_EQ(now.limits.rate_limit, 20) << "keys not in the delta keep their values";
  EXPECT_EQ(now.effective_at_ms, ToEpochMillis(clock_.Now()));
  EXPECT_EQ(told, (std::vector<std::pair<std::string, int64_t>>{{"edge-01", 1}}));

  // The same values again: no change, no new version, nobody told.
  pushed = fleet_->PushConfig("edge-01", R"({"edge_api":{"limits":{"reattach_window":60}}})", "");
  ASSERT_TRUE(pushed);
  EXPECT_EQ(pushed->limits_version, 1);
  EXPECT_EQ(told.size(), 1u);

  // Mixed: the node gets only its part (edge_api removed); the limits rise to 2.
  pushed = fleet_->PushConfig(
      "edge-01", "cluster: {heartbeat_interval_secs: 5}\nedge_api: {limits: {rate_limit: 7}}\n",
      "v9");
  ASSERT_TRUE(pushed) << pushed.error().ToString();
  EXPECT_EQ(pushed->version, "v9");
  EXPECT_EQ(pushed->limits_version, 2);
  ASSERT_EQ(stream_->sent.size(), 1u);
  const std::string& node_part = stream_->sent[0].push_config().config_delta();
  EXPECT_EQ(node_part.find("edge_api"), std::string::npos) << node_part;
  EXPECT_NE(node_part.find("heartbeat_interval_secs: 5"), std::string::npos) << node_part;
  EXPECT_EQ(fleet_->LimitsOf("edge-01").limits.rate_limit, 7);
  EXPECT_EQ(fleet_->LimitsOf("edge-01").limits.reattach_window, 60);

  // Bad limits: refused naming the key, the value and the rule; nothing changes.
  auto bad = fleet_->PushConfig("edge-01", "edge_api: {limits: {rate_limit: 0}}\n", "");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("edge_api.limits.rate_limit"), std::string::npos)
      << bad.error().message;
  bad =
      fleet_->PushConfig("edge-01", "edge_api: {limits: {buffer_overflow_policy: keep_all}}\n", "");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("must be drop_oldest or disconnect"), std::string::npos)
      << bad.error().message;
  bad = fleet_->PushConfig("edge-01", "edge_api: {limit: {rate_limit: 3}}\n", "");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("edge_api.limit"), std::string::npos) << bad.error().message;
  // A bad node part refuses the whole push: the limits do not change either.
  bad = fleet_->PushConfig("edge-01", "clustr: {}\nedge_api: {limits: {rate_limit: 3}}\n", "");
  ASSERT_FALSE(bad);
  EXPECT_EQ(fleet_->LimitsOf("edge-01").version, 2);
  EXPECT_EQ(fleet_->LimitsOf("edge-01").limits.rate_limit, 7);
  EXPECT_EQ(stream_->sent.size(), 1u);
  // An unknown node has no limits to set.
  auto unknown = fleet_->PushConfig("no-such", "edge_api: {limits: {rate_limit: 3}}\n", "");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(told.size(), 2u);
}

TEST_F(EdgeFleetTest, ARevokedNodeIsDisconnectedAndStaysRevoked) {
  EnrollEdge01();
  ASSERT_TRUE(fleet_->RevokeNode("edge-01"));
  ASSERT_TRUE(stream_->closed.has_value());
  EXPECT_EQ(stream_->closed->error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto node = store_->GetNode("edge-01");
  ASSERT_TRUE(node && *node);
  EXPECT_EQ((*node)->state, kNodeRevoked);
  EXPECT_FALSE(fleet_->Invoke({.node_id = "edge-01", .tool = "exec"}, nullptr));
}

TEST_F(EdgeFleetTest, CommandsAreStoredAndListedNewestFirst) {
  EnrollEdge01();
  auto first = fleet_->Invoke({.node_id = "edge-01", .tool = "exec", .args_json = "{}"}, nullptr);
  ASSERT_TRUE(first) << first.error().ToString();
  clock_.Advance(std::chrono::seconds(1));
  auto second = fleet_->Invoke({.node_id = "edge-01", .tool = "sysinfo"}, nullptr);
  ASSERT_TRUE(second) << second.error().ToString();
  auto list = fleet_->ListCommands("edge-01", 0);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].command_id, *second);
  EXPECT_EQ(fleet_->GetCommand(*first)->tool, "exec");
  EXPECT_FALSE(fleet_->Invoke({.node_id = "edge-01", .tool = ""}, nullptr));
  EXPECT_EQ(fleet_->ListCommands("", 0)->size(), 2u) << "a refused invoke stores nothing";
}

}  // namespace
}  // namespace edge::controller
