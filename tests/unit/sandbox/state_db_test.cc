#include "sandbox/state_db.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;

class StateDbTest : public ::testing::Test {
 protected:
  static mode_t Mode(const std::string& p) {
    struct stat st {};
    ::lstat(p.c_str(), &st);
    return st.st_mode & 07777;
  }
  edge::testing::TempDir tmp_{"statedb"};
  std::string dir_ = tmp_.path();
};

const std::vector<StateDb::Migration> kTwoSteps = {
    {1, "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"},
    {2, "ALTER TABLE t ADD COLUMN b BLOB"},
};

TEST_F(StateDbTest, OpensAgentDbPrivatelyInWalMode) {
  fs::create_directories(dir_ + "/state");
  ::chmod((dir_ + "/state").c_str(), 0755);  // an existing, too-open directory is tightened
  auto db = StateDb::Open(dir_);
  ASSERT_TRUE(db) << db.error().ToString();
  EXPECT_EQ((*db)->path(), dir_ + "/state/agent.db");
  EXPECT_EQ(Mode(dir_ + "/state"), 0700u);
  EXPECT_EQ(Mode(dir_ + "/state/agent.db"), 0600u);
  auto mode = (*db)->Query("PRAGMA journal_mode");
  ASSERT_TRUE(mode);
  EXPECT_EQ((*mode)[0].Text(0), "wal");
  auto tables = (*db)->Query("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
                             {std::string("schema_migrations")});
  ASSERT_TRUE(tables);
  EXPECT_EQ(tables->size(), 1u);
  // The write-ahead log and its index are as private as the database.
  ASSERT_TRUE((*db)->Migrate("comp", {{1, "CREATE TABLE w (a)"}}));
  ASSERT_TRUE(fs::exists(dir_ + "/state/agent.db-wal"));
  EXPECT_EQ(Mode(dir_ + "/state/agent.db-wal"), 0600u);
  EXPECT_EQ(Mode(dir_ + "/state/agent.db-shm"), 0600u);
}

TEST_F(StateDbTest, RejectsEmptyDataDirAndSymlinkedDatabase) {
  auto empty = StateDb::Open("");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(empty.error().message.find("data_dir"), std::string::npos);

  fs::create_directories(dir_ + "/state");
  fs::create_directories(dir_ + "/elsewhere");
  fs::create_symlink(dir_ + "/elsewhere/victim.db", dir_ + "/state/agent.db");
  auto linked = StateDb::Open(dir_);
  ASSERT_FALSE(linked);
  EXPECT_EQ(linked.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(linked.error().message.find("agent.db"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/elsewhere/victim.db"));
}

TEST_F(StateDbTest, MigrationsApplyOnceAndSurviveReopen) {
  {
    auto db = StateDb::Open(dir_);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->Migrate("comp", {kTwoSteps[0]}));
    EXPECT_EQ(*(*db)->SchemaVersion("comp"), 1);
    EXPECT_EQ(*(*db)->SchemaVersion("other"), 0);
    ASSERT_TRUE((*db)->Exec("INSERT INTO t (k, v) VALUES (?, ?)", {std::string("a"), int64_t{1}}));
  }
  auto db = StateDb::Open(dir_);
  ASSERT_TRUE(db);
  // Step 1 is not re-run (it would fail: the table exists); step 2 is applied.
  auto st = (*db)->Migrate("comp", kTwoSteps);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ(*(*db)->SchemaVersion("comp"), 2);
  ASSERT_TRUE((*db)->Migrate("comp", kTwoSteps));
  auto rows = (*db)->Query("SELECT k, v, b FROM t");
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].Text(0), "a");
  EXPECT_EQ((*rows)[0].Int(1), 1);
  EXPECT_TRUE((*rows)[0].IsNull(2));
}

TEST_F(StateDbTest, RefusesANewerSchemaAndBadMigrationLists) {
  auto db = StateDb::Open(dir_);
  ASSERT_TRUE(db);
  ASSERT_TRUE((*db)->Migrate("comp", kTwoSteps));
  auto older = (*db)->Migrate("comp", {kTwoSteps[0]});
  ASSERT_FALSE(older);
  EXPECT_EQ(older.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(older.error().message.find("version 2, newer than this agent's 1"), std::string::npos)
      << older.error().message;

  auto gap = (*db)->Migrate("gap", {{1, "SELECT 1"}, {3, "SELECT 1"}});
  ASSERT_FALSE(gap);
  EXPECT_EQ(gap.error().code, ErrorCode::kInternal);
  EXPECT_NE(gap.error().message.find("has version 3"), std::string::npos);

  // A failing step leaves nothing behind: neither its table nor its version.
  auto broken = (*db)->Migrate("broken", {{1, "CREATE TABLE x (a); CREATE TABLEE y (b)"}});
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("migration 1 of broken"), std::string::npos);
  EXPECT_EQ(*(*db)->SchemaVersion("broken"), 0);
  auto x = (*db)->Query("SELECT name FROM sqlite_master WHERE name = 'x'");
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->empty());
}

TEST_F(StateDbTest, TransactionsCommitOrRollBack) {
  auto db = StateDb::Open(dir_);
  ASSERT_TRUE(db);
  ASSERT_TRUE((*db)->Migrate("comp", kTwoSteps));
  {
    auto txn = (*db)->Begin();
    ASSERT_TRUE(txn);
    ASSERT_TRUE(txn->Exec("INSERT INTO t (k, v) VALUES ('gone', 1)"));
    EXPECT_EQ(txn->Changes(), 1);
  }  // destroyed without Commit
  {
    auto txn = (*db)->Begin();
    ASSERT_TRUE(txn);
    ASSERT_TRUE(txn->Exec("INSERT INTO t (k, v) VALUES ('kept', 2)"));
    ASSERT_TRUE(txn->Commit());
  }
  auto rows = (*db)->Query("SELECT k FROM t ORDER BY k");
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].Text(0), "kept");
}

TEST_F(StateDbTest, BlobsKeepEveryByteAndErrorsNameTheStatement) {
  auto db = StateDb::Open(dir_);
  ASSERT_TRUE(db);
  ASSERT_TRUE((*db)->Migrate("comp", kTwoSteps));
  const std::string bytes("\0\xff\n\x01zz", 6);
  ASSERT_TRUE((*db)->Exec("INSERT INTO t (k, v, b) VALUES (?, ?, ?)",
                          {std::string("k"), int64_t{-5}, SqlBlob{bytes}}));
  auto rows = (*db)->Query("SELECT b, v, typeof(b) FROM t WHERE k = ?", {std::string("k")});
  ASSERT_TRUE(rows);
  EXPECT_EQ((*rows)[0].Text(0), bytes);
  EXPECT_EQ((*rows)[0].Int(1), -5);
  EXPECT_EQ((*rows)[0].Text(2), "blob");

  auto bad = (*db)->Query("SELECT nope FROM t");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInternal);
  EXPECT_NE(bad.error().message.find("SELECT nope FROM t"), std::string::npos);
  EXPECT_NE(bad.error().message.find("no such column"), std::string::npos);

  auto dup = (*db)->Exec("INSERT INTO t (k, v) VALUES ('k', 1)");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
}

TEST_F(StateDbTest, ConcurrentTransactionsDoNotLoseUpdates) {
  auto db = StateDb::Open(dir_);
  ASSERT_TRUE(db);
  ASSERT_TRUE((*db)->Migrate("comp", kTwoSteps));
  ASSERT_TRUE((*db)->Exec("INSERT INTO t (k, v) VALUES ('n', 0)"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto txn = (*db)->Begin();
        ASSERT_TRUE(txn);
        auto rows = txn->Query("SELECT v FROM t WHERE k = 'n'");
        ASSERT_TRUE(rows);
        ASSERT_TRUE(txn->Exec("UPDATE t SET v = ? WHERE k = 'n'", {(*rows)[0].Int(0) + 1}));
        ASSERT_TRUE(txn->Commit());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  auto rows = (*db)->Query("SELECT v FROM t WHERE k = 'n'");
  ASSERT_TRUE(rows);
  EXPECT_EQ((*rows)[0].Int(0), 200);
}

TEST_F(StateDbTest, ASecondConnectionWaitsOutItsBusyTimeoutThenFails) {
  auto first = StateDb::Open(dir_);
  ASSERT_TRUE(first);
  auto second = StateDb::Open(dir_, {.busy_timeout = std::chrono::milliseconds(50)});
  ASSERT_TRUE(second);
  auto held = (*first)->Begin();
  ASSERT_TRUE(held);
  auto blocked = (*second)->Begin();
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(blocked.error().message.find("agent.db"), std::string::npos);
  ASSERT_TRUE(held->Commit());
  auto after = (*second)->Begin();
  EXPECT_TRUE(after) << "the lock is free once the first transaction ends";
}

}  // namespace
}  // namespace edge::sandbox
