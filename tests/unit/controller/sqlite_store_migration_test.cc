// SqliteStore on the common SqliteDb opens a controller.db that the store before it wrote:
// that store recorded its schema in a `schema_version` table (one row per migration) and had
// no `schema_migrations`. (sqlite_store_edge_test.cc migrates a version-1 file of that kind.)
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "controller/sqlite_store.h"
#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

class SqliteStoreMigrationTest : public StoreTestBase {
 protected:
  // Rows of a one-column query, joined with ",".
  std::string RawColumn(const std::string& sql) {
    sqlite3* db = nullptr;
    std::string out;
    if (sqlite3_open(path_.c_str(), &db) != SQLITE_OK) return "open failed";
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
      while (sqlite3_step(stmt) == SQLITE_ROW) {
        if (!out.empty()) out += ",";
        auto* text = sqlite3_column_text(stmt, 0);
        out += text ? reinterpret_cast<const char*>(text) : "NULL";
      }
    } else {
      out = sqlite3_errmsg(db);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out;
  }
  // Turns the file into what the old store left at `version`: the same tables (its
  // migrations are the ones this store applies), its `schema_version` rows 1..version, and
  // no `schema_migrations`.
  void RewriteAsOldStore(int version) {
    std::string sql =
        "DROP TABLE schema_migrations;"
        "CREATE TABLE schema_version (version INTEGER NOT NULL);";
    for (int v = 1; v <= version; ++v)
      sql += "INSERT INTO schema_version(version) VALUES (" + std::to_string(v) + ");";
    RawExec(sql);
  }
};

const std::string kKey(32, '\x07');

TEST_F(SqliteStoreMigrationTest, OpensADatabaseTheOldStoreWroteAtTheLatestVersion) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->InsertJoinToken({.token_id = "j1",
                                        .token_hash = "hash-j1",
                                        .tenant_id = "t1",
                                        .created_at_ms = 1000,
                                        .expires_at_ms = 100'000}));
    auto e = store->EnrollEdgeNode({.jti = "j1",
                                    .join_token_hash = "hash-j1",
                                    .node_id = "edge-01",
                                    .tenant_id = "t1",
                                    .public_key = kKey,
                                    .now_ms = 2000,
                                    .token = {.jti = "nt-1",
                                              .node_id = "edge-01",
                                              .issued_at_ms = 2000,
                                              .expires_at_ms = 3'602'000}});
    ASSERT_TRUE(e) << e.error().ToString();
  }
  RewriteAsOldStore(8);
  ASSERT_EQ(RawColumn("SELECT name FROM sqlite_master WHERE name LIKE 'schema%'"),
            "schema_version");

  for (int open = 0; open < 2; ++open) {  // adopted once, then opened as any other file
    auto store = OpenStore();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->schema_version(), 8);
    auto node = store->GetEdgeNode("edge-01");
    ASSERT_TRUE(node && node->has_value());
    EXPECT_EQ((*node)->public_key, kKey) << "the hex-encoded key reads back";
    auto tok = store->GetNodeToken("nt-1");
    ASSERT_TRUE(tok && tok->has_value());
    // The version moved into schema_migrations; the old table is gone.
    EXPECT_EQ(RawColumn("SELECT name FROM sqlite_master WHERE name LIKE 'schema%'"),
              "schema_migrations");
    EXPECT_EQ(RawColumn("SELECT component || ':' || version FROM schema_migrations "
                        "ORDER BY version"),
              "controller:1,controller:2,controller:3,controller:4,controller:5,controller:6,"
              "controller:7,controller:8");
  }
}

TEST_F(SqliteStoreMigrationTest, RefusesAnOldStyleDatabaseFromANewerController) {
  ASSERT_TRUE(OpenStore());
  RewriteAsOldStore(9);
  auto store = SqliteStore::Open(path_);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(store.error().message.find("version 9, newer than this controller's 8"),
            std::string::npos)
      << store.error().message;
}

}  // namespace
}  // namespace edge::controller
