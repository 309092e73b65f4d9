// SqliteStore's operator sessions and usage (schema 7): sessions per tenant and user, open
// ones for a restarted controller, and a node's activity in a period (usage sums, commands,
// the latest failure) with its window's edges.
#include <gtest/gtest.h>

#include "controller/sqlite_store.h"
#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

class SqliteStoreSessionsTest : public StoreTestBase {};

OperatorSessionRecord Session(const std::string& id, const std::string& user,
                              const std::string& status, int64_t created) {
  return OperatorSessionRecord{.session_id = id,
                               .node_id = "edge-01",
                               .tenant_id = "t1",
                               .user_id = user,
                               .agent_name = "chat",
                               .status = status,
                               .start_command_id = "cmd-" + id,
                               .capabilities_version = 3,
                               .pinned_tools_json = R"(["chat","file.read"])",
                               .created_at_ms = created,
                               .last_activity_at_ms = created};
}

TEST_F(SqliteStoreSessionsTest, SessionsAreListedPerTenantAndUserAndReadBackWhole) {
  auto s = OpenStore();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->UpsertSession(Session("s1", "alice", "RUNNING", 1000)));
  ASSERT_TRUE(s->UpsertSession(Session("s2", "alice", "DETACHED", 2000)));
  ASSERT_TRUE(s->UpsertSession(Session("s3", "bob", "RUNNING", 3000)));
  auto ended = Session("s4", "alice", "TERMINATED", 4000);
  ended.ended_at_ms = 5000;
  ended.exit_code = 3;
  ended.end_reason = "the process exited with code 3";
  ASSERT_TRUE(s->UpsertSession(ended));
  auto other = Session("s5", "alice", "RUNNING", 6000);
  other.tenant_id = "t2";
  ASSERT_TRUE(s->UpsertSession(other));

  auto mine = s->ListSessions("t1", "alice", "", "", 0);
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->size(), 2u);             // not bob's, not the ended one, not t2's
  EXPECT_EQ((*mine)[0].session_id, "s2");  // newest first
  EXPECT_EQ((*mine)[1].session_id, "s1");
  auto running = s->ListSessions("t1", "alice", "", "RUNNING", 0);
  ASSERT_TRUE(running);
  ASSERT_EQ(running->size(), 1u);
  auto by_node = s->ListSessions("t1", "", "edge-02", "", 0);
  ASSERT_TRUE(by_node);
  EXPECT_TRUE(by_node->empty());

  auto back = s->GetSession("s4");
  ASSERT_TRUE(back && back->has_value());
  EXPECT_EQ((*back)->exit_code, 3);
  EXPECT_EQ((*back)->ended_at_ms, 5000);
  EXPECT_EQ((*back)->end_reason, "the process exited with code 3");
  EXPECT_EQ((*back)->pinned_tools_json, R"(["chat","file.read"])");
  EXPECT_EQ((*back)->capabilities_version, 3);
  auto running_one = s->GetSession("s1");
  ASSERT_TRUE(running_one && running_one->has_value());
  EXPECT_FALSE((*running_one)->exit_code.has_value());
  auto none = s->GetSession("nope");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());

  auto open = s->ListOpenSessions();
  ASSERT_TRUE(open);
  EXPECT_EQ(open->size(), 4u);  // every tenant's, all but the ended one
}

TEST_F(SqliteStoreSessionsTest, NodeActivitySumsUsageCountsCommandsAndFindsTheLatestFailure) {
  auto s = OpenStore();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->InsertUsage({.node_id = "edge-01",
                              .session_id = "s1",
                              .at_ms = 1000,
                              .input_tokens = 10,
                              .output_tokens = 20,
                              .estimated_cost = 0.125,
                              .tool_invocations = 2}));
  ASSERT_TRUE(s->InsertUsage({.node_id = "edge-01",
                              .session_id = "s1",
                              .at_ms = 1999,
                              .input_tokens = 1,
                              .output_tokens = 2,
                              .estimated_cost = 0.000001,
                              .tool_invocations = 1}));
  ASSERT_TRUE(s->InsertUsage({.node_id = "edge-01",
                              .session_id = "s1",
                              .at_ms = 2000,
                              .input_tokens = 1000}));  // outside [1000, 2000)
  ASSERT_TRUE(s->InsertUsage({.node_id = "edge-02",
                              .session_id = "s9",
                              .at_ms = 1500,
                              .input_tokens = 1000}));  // another node
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->InsertCommand({.command_id = "c" + std::to_string(i),
                                  .node_id = "edge-01",
                                  .tool = i == 2 ? "session.input" : "exec",
                                  .args_json = "{}",
                                  .state = kCommandDispatched,
                                  .created_at_ms = 1100 + i}));
  }
  ASSERT_TRUE(s->InsertCommand({.command_id = "late",
                                .node_id = "edge-01",
                                .tool = "exec",
                                .args_json = "{}",
                                .state = kCommandDispatched,
                                .created_at_ms = 2500}));
  // c0 exits 2 at 1200, c1 fails with an error at 1300, c2 succeeds at 1400.
  ASSERT_TRUE(s->CompleteCommand("c0", "edge-01", {.outcome = "ok", .exit_code = 2}, 1200));
  ASSERT_TRUE(s->CompleteCommand(
      "c1", "edge-01", {.outcome = "error", .error_code = "NOT_FOUND", .message = "no such file"},
      1300));
  ASSERT_TRUE(s->CompleteCommand("c2", "edge-01", {.outcome = "ok"}, 1400));

  auto a = s->GetNodeActivity("edge-01", 1000, 2000);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->input_tokens, 11);
  EXPECT_EQ(a->output_tokens, 22);
  EXPECT_DOUBLE_EQ(a->estimated_cost, 0.125001);
  EXPECT_EQ(a->session_tool_invocations, 3);
  EXPECT_EQ(a->commands, 3);
  EXPECT_EQ(a->last_error, "exec: NOT_FOUND — no such file");
  EXPECT_EQ(a->last_error_at_ms, 1300);

  auto before = s->GetNodeActivity("edge-01", 1000, 1250);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->last_error, "exec: exit code 2");
  auto quiet = s->GetNodeActivity("edge-03", 0, 1'000'000);
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->commands, 0);
  EXPECT_EQ(quiet->input_tokens, 0);
  EXPECT_TRUE(quiet->last_error.empty());
}

}  // namespace
}  // namespace edge::controller
