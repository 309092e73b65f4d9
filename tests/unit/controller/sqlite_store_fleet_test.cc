// SqliteStore's operator tags and fleet commands (schema version 6): the migration from a
// version-5 database keeping its rows, tag updates (all or nothing, limits, exact errors),
// tags untouched by anything a node reports, and fleet commands with their parts.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "controller/sqlite_store.h"
#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

class SqliteStoreFleetTest : public StoreTestBase {
 protected:
  // edge-01 of tenant t1, edge-enrolled, reporting `caps_json`.
  static void Enroll(SqliteStore& s, const std::string& node = "edge-01") {
    ASSERT_TRUE(s.InsertJoinToken({.token_id = "jt-" + node,
                                   .token_hash = "hash-" + node,
                                   .tenant_id = "t1",
                                   .created_at_ms = 1000,
                                   .expires_at_ms = 100'000}));
    auto e = s.EnrollEdgeNode({.jti = "jt-" + node,
                               .join_token_hash = "hash-" + node,
                               .node_id = node,
                               .tenant_id = "t1",
                               .public_key = std::string(32, 'k'),
                               .now_ms = 2000,
                               .token = {.jti = "nt-" + node,
                                         .node_id = node,
                                         .issued_at_ms = 2000,
                                         .expires_at_ms = 3'602'000}});
    ASSERT_TRUE(e) << e.error().ToString();
  }
};

TEST_F(SqliteStoreFleetTest, MigratesAVersionFiveDatabaseKeepingItsRows) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store);
    Enroll(*store);
    ASSERT_TRUE(store->InsertCommand({.command_id = "c1",
                                      .node_id = "edge-01",
                                      .tool = "exec",
                                      .args_json = "{}",
                                      .state = kCommandDispatched,
                                      .created_at_ms = 3000}));
  }
  // Back to exactly what schema version 5 left: the tables of migrations 6 and 7 gone, their
  // rows too, and the columns of migration 8.
  RawExec(
      "DROP TABLE node_tags; DROP TABLE fleet_parts; DROP TABLE fleet_commands;"
      "DROP TABLE operator_sessions; DROP TABLE session_usage;"
      "ALTER TABLE edge_nodes DROP COLUMN limits_json;"
      "ALTER TABLE edge_nodes DROP COLUMN limits_version;"
      "ALTER TABLE edge_nodes DROP COLUMN limits_changed_ms;"
      "DELETE FROM schema_migrations WHERE component = 'controller' AND version >= 6;");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(
        sqlite3_prepare_v2(db, "SELECT MAX(version) FROM schema_migrations", -1, &stmt, nullptr),
        SQLITE_OK);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(stmt, 0), 5);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }

  auto store = OpenStore();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), 8);
  auto node = store->GetEdgeNode("edge-01");
  ASSERT_TRUE(node && node->has_value()) << "version-5 rows are kept";
  auto cmd = store->GetCommand("c1");
  ASSERT_TRUE(cmd && cmd->has_value());
  auto tags = store->GetNodeTags("edge-01");
  ASSERT_TRUE(tags) << tags.error().ToString();
  EXPECT_TRUE(tags->empty()) << "no tags before the operator sets some";
  ASSERT_TRUE(store->UpdateNodeTags("edge-01", {{"role", "web"}}, {}, 32, 4000));
  ASSERT_TRUE(store->InsertFleetCommand({.fleet_id = "f1",
                                         .selector = "os:linux",
                                         .tool = "sysinfo",
                                         .args_json = "{}",
                                         .created_at_ms = 4000,
                                         .parts = {{.node_id = "edge-01", .command_id = "c2"}}}));
  auto reopened = OpenStore();
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->schema_version(), 8) << "reopening runs no migration again";
  EXPECT_EQ(reopened->GetNodeTags("edge-01")->at("role"), "web");
  EXPECT_TRUE(reopened->GetFleetCommand("f1")->has_value());
}

TEST_F(SqliteStoreFleetTest, TagsAreUpdatedAllOrNothingWithExactErrors) {
  auto s = OpenStore();
  ASSERT_TRUE(s);
  Enroll(*s);

  auto unknown = s->UpdateNodeTags("nope", {{"a", "b"}}, {}, 32, 5000);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(unknown.error().message, "node \"nope\" not found");
  EXPECT_EQ(s->GetNodeTags("nope").error().code, ErrorCode::kNotFound);

  auto set = s->UpdateNodeTags("edge-01", {{"role", "web"}, {"zone", "a"}}, {}, 32, 5000);
  ASSERT_TRUE(set) << set.error().ToString();
  EXPECT_EQ(*set, (NodeTags{{"role", "web"}, {"zone", "a"}}));
  // A key present gets the new value.
  EXPECT_EQ(s->UpdateNodeTags("edge-01", {{"role", "db"}}, {}, 32, 6000)->at("role"), "db");

  auto absent = s->UpdateNodeTags("edge-01", {}, {{.key = "team"}}, 32, 7000);
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(absent.error().message, "node \"edge-01\" has no tag \"team\"");
  auto other_value =
      s->UpdateNodeTags("edge-01", {{"new", "x"}}, {{.key = "zone", .value = "b"}}, 32, 7000);
  ASSERT_FALSE(other_value);
  EXPECT_EQ(other_value.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(other_value.error().message,
            "tag \"zone\" of node \"edge-01\" is \"a\", not \"b\" (remove it as zone to remove it "
            "whatever its value)");
  EXPECT_EQ(*s->GetNodeTags("edge-01"), (NodeTags{{"role", "db"}, {"zone", "a"}}))
      << "a refused update changes nothing (\"new\" was not set)";

  // The limit counts what the node would have afterwards.
  auto over = s->UpdateNodeTags("edge-01", {{"x", "1"}}, {}, 2, 8000);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(over.error().message,
            "node \"edge-01\" would have 3 tags; at most 2 are allowed per node (remove some "
            "first)");
  EXPECT_EQ(*s->GetNodeTags("edge-01"), (NodeTags{{"role", "db"}, {"zone", "a"}}))
      << "x was written, then rolled back";
  auto half = s->UpdateNodeTags("edge-01", {}, {{.key = "role"}, {.key = "team"}}, 32, 8000);
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().message, "node \"edge-01\" has no tag \"team\"");
  EXPECT_EQ(s->GetNodeTags("edge-01")->count("role"), 1u) << "role's removal was rolled back";
  auto swap = s->UpdateNodeTags("edge-01", {{"x", "1"}}, {{.key = "zone", .value = "a"}}, 2, 8000);
  ASSERT_TRUE(swap) << swap.error().ToString();
  EXPECT_EQ(*swap, (NodeTags{{"role", "db"}, {"x", "1"}}));

  ASSERT_TRUE(s->UpsertNode({.node_id = "plain-02", .tenant_id = "t1", .state = "enrolled"}));
  ASSERT_TRUE(s->UpdateNodeTags("plain-02", {{"role", "web"}}, {}, 32, 9000));
  auto all = s->ListNodeTags();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at("plain-02").at("role"), "web");
}

TEST_F(SqliteStoreFleetTest, NothingANodeReportsTouchesItsTags) {
  auto s = OpenStore();
  ASSERT_TRUE(s);
  Enroll(*s);
  ASSERT_TRUE(s->UpdateNodeTags("edge-01", {{"role", "web"}, {"site", "lab"}}, {}, 32, 3000));
  // The node reports labels of the same names, other values, more keys; a Hello, a
  // CapabilityUpdate (also one that drains it), heartbeats, stale marking.
  const std::string caps =
      R"({"os":"linux","local_tools":["exec"],"custom_labels":{"role":"db","site":"x","tags":"y"}})";
  ASSERT_TRUE(s->RecordHello("edge-01", caps, false, 4000));
  ASSERT_TRUE(s->UpdateCapabilities("edge-01", caps, true, 5000));
  ASSERT_TRUE(s->UpdateCapabilities("edge-01", R"({"os":"linux"})", false, 6000));
  ASSERT_TRUE(s->RecordHeartbeat("edge-01", 7000));
  ASSERT_TRUE(s->MarkStaleNodes(100'000));
  EXPECT_EQ(*s->GetNodeTags("edge-01"), (NodeTags{{"role", "web"}, {"site", "lab"}}));
  // Revoked (and so any re-enrollment): still the operator's tags.
  ASSERT_TRUE(s->RevokeNode("edge-01", 8000));
  EXPECT_EQ(s->GetNodeTags("edge-01")->size(), 2u);
}

TEST_F(SqliteStoreFleetTest, FleetCommandsKeepTheirPartsRefusalsAndCancel) {
  auto s = OpenStore();
  ASSERT_TRUE(s);
  FleetCommandRecord f{.fleet_id = "f1",
                       .tenant_id = "t1",
                       .created_by = "alice",
                       .selector = "tag:role=web",
                       .tool = "exec",
                       .args_json = R"({"command":"true"})",
                       .security_context = "ops",
                       .deadline_ms = 30'000,
                       .created_at_ms = 1000,
                       .parts = {{.node_id = "b-node", .command_id = "c-b"},
                                 {.node_id = "a-node", .command_id = "c-a"}}};
  ASSERT_TRUE(s->InsertFleetCommand(f));
  auto dup = s->InsertFleetCommand(f);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);

  ASSERT_TRUE(s->SetFleetPartError("f1", "b-node", "UNAVAILABLE", "node b-node is not connected"));
  auto missing_part = s->SetFleetPartError("f1", "c-node", "X", "y");
  ASSERT_FALSE(missing_part);
  EXPECT_EQ(missing_part.error().message, "fleet command f1 has no part for node \"c-node\"");

  ASSERT_TRUE(s->MarkFleetCancelled("f1", 2000));
  ASSERT_TRUE(s->MarkFleetCancelled("f1", 3000)) << "a second cancel is fine";
  EXPECT_EQ(s->MarkFleetCancelled("nope", 3000).error().code, ErrorCode::kNotFound);

  auto got = s->GetFleetCommand("f1");
  ASSERT_TRUE(got && got->has_value());
  const auto& g = **got;
  EXPECT_EQ(g.tenant_id, "t1");
  EXPECT_EQ(g.created_by, "alice");
  EXPECT_EQ(g.selector, "tag:role=web");
  EXPECT_EQ(g.args_json, R"({"command":"true"})");
  EXPECT_EQ(g.security_context, "ops");
  EXPECT_EQ(g.deadline_ms, 30'000);
  EXPECT_EQ(g.cancelled_at_ms, 2000) << "the first cancel's time is kept";
  ASSERT_EQ(g.parts.size(), 2u);
  EXPECT_EQ(g.parts[0].node_id, "a-node") << "parts are ordered by node id";
  EXPECT_EQ(g.parts[0].command_id, "c-a");
  EXPECT_EQ(g.parts[0].error_code, "");
  EXPECT_EQ(g.parts[1].error_code, "UNAVAILABLE");
  EXPECT_EQ(g.parts[1].error_message, "node b-node is not connected");
  EXPECT_FALSE(s->GetFleetCommand("nope")->has_value());

  ASSERT_TRUE(s->InsertFleetCommand({.fleet_id = "f2",
                                     .selector = "os:linux",
                                     .tool = "sysinfo",
                                     .args_json = "{}",
                                     .created_at_ms = 5000,
                                     .parts = {{.node_id = "a-node", .command_id = "c-x"}}}));
  auto list = s->ListFleetCommands(0);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].fleet_id, "f2") << "newest first";
  EXPECT_EQ((*list)[1].parts.size(), 2u);
  EXPECT_EQ(s->ListFleetCommands(1)->size(), 1u);
}

}  // namespace
}  // namespace edge::controller
