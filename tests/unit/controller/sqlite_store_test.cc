#include "controller/sqlite_store.h"
#include "tests/unit/controller/store_test_support.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

namespace edge::controller {
namespace {

class SqliteStoreTest : public StoreTestBase {
 protected:
  static JoinTokenRecord Token(const std::string& id, const std::string& node = "") {
    return JoinTokenRecord{.token_id = id,
                           .token_hash = "hash-" + id,
                           .node_id = node,
                           .tenant_id = "default",
                           .created_at_ms = 1000,
                           .expires_at_ms = 10'000};
  }
};

TEST_F(SqliteStoreTest, DatabaseFileIsOwnerOnlyAndSchemaVersioned) {
  auto store = OpenStore();
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(store->schema_version(), 8);
  store.reset();
  EXPECT_EQ(OpenStore()->schema_version(), 8) << "reopening must not re-run migrations";
}

TEST_F(SqliteStoreTest, ConsumeFollowsTheContractTable) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("t1")));
  ASSERT_TRUE(store->InsertJoinToken(Token("bound", "edge-07")));
  ASSERT_TRUE(store->InsertJoinToken(Token("revoked")));
  ASSERT_TRUE(store->RevokeJoinToken("revoked", 2000));

  auto unknown = store->ConsumeJoinToken("hash-nope", "n", 2000);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);

  auto expired = store->ConsumeJoinToken("hash-t1", "n", 10'000);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos);

  auto rev = store->ConsumeJoinToken("hash-revoked", "n", 2000);
  ASSERT_FALSE(rev);
  EXPECT_EQ(rev.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(rev.error().message.find("revoked"), std::string::npos);

  auto wrong_node = store->ConsumeJoinToken("hash-bound", "edge-08", 2000);
  ASSERT_FALSE(wrong_node);
  EXPECT_EQ(wrong_node.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(wrong_node.error().message.find("edge-07"), std::string::npos);

  auto ok = store->ConsumeJoinToken("hash-t1", "n", 2000);
  ASSERT_TRUE(ok) << ok.error().ToString();
  EXPECT_EQ(ok->consumed_by, "n");
  auto replay = store->ConsumeJoinToken("hash-t1", "n", 2001);
  ASSERT_FALSE(replay);
  EXPECT_EQ(replay.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(replay.error().message.find("already used"), std::string::npos);

  EXPECT_TRUE(store->ConsumeJoinToken("hash-bound", "edge-07", 2000));
}

TEST_F(SqliteStoreTest, ConcurrentRedemptionsOnSeparateConnectionsHaveExactlyOneWinner) {
  OpenStore()->InsertJoinToken(Token("race"));
  constexpr int kRacers = 8;
  std::atomic<int> wins{0}, refused{0};
  Race(kRacers, [&](int i, SqliteStore& store) {
    auto r = store.ConsumeJoinToken("hash-race", "node-" + std::to_string(i), 2000);
    if (r) {
      ++wins;
    } else if (r.error().code == ErrorCode::kFailedPrecondition) {
      ++refused;
    }
  });
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(refused.load(), kRacers - 1);
}

TEST_F(SqliteStoreTest, ListHidesInactiveUnlessAskedAndRevokeUnknownIsNotFound) {
  auto store = OpenStore();
  store->InsertJoinToken(Token("a"));
  store->InsertJoinToken(Token("b"));
  store->ConsumeJoinToken("hash-b", "n", 2000);
  EXPECT_EQ(store->ListJoinTokens(false, 2000)->size(), 1u);
  EXPECT_EQ(store->ListJoinTokens(true, 2000)->size(), 2u);
  EXPECT_EQ(store->ListJoinTokens(false, 20'000)->size(), 0u) << "expired tokens are inactive";
  auto r = store->RevokeJoinToken("zzz", 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

TEST_F(SqliteStoreTest, NodesPersistAcrossReopen) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->UpsertNode({"edge-01", "t1", "enrolled", "ab12", 5, 0}));
    ASSERT_TRUE(store->UpsertNode({"edge-01", "t1", "healthy", "ab12", 5, 9}));
  }
  auto store = OpenStore();
  auto n = store->GetNode("edge-01");
  ASSERT_TRUE(n && n->has_value());
  EXPECT_EQ((*n)->state, "healthy");
  EXPECT_EQ((*n)->last_seen_ms, 9);
  EXPECT_FALSE(store->GetNode("edge-02")->has_value());
  EXPECT_EQ(store->ListNodes()->size(), 1u);
}

TEST_F(SqliteStoreTest, RefusesADatabaseFromANewerController) {
  OpenStore().reset();
  { auto store = OpenStore(); }
  // Simulate a newer schema (the controller's versions are rows of component "controller"
  // in schema_migrations, common/sqlite_db.h).
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO schema_migrations(component, version, applied_at_ms) "
                         "VALUES ('controller', 99, 0)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = SqliteStore::Open(path_);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.error().message.find("99"), std::string::npos);
}

}  // namespace
}  // namespace edge::controller
