// SqliteDb, the generic layer under sandbox::StateDb (whose own tests cover WAL, modes,
// migrations, blobs and busy timeouts) and the controller's SqliteStore: a database at any
// path, messages named by the caller, and Transact.
#include "common/sqlite_db.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.h"

namespace edge {
namespace {

namespace fs = std::filesystem;

class SqliteDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = SqliteDb::OpenFile(tmp_ / "x.db", {.name = "x database", .owner = "x-tool"});
    ASSERT_TRUE(db) << db.error().ToString();
    db_ = std::move(*db);
    ASSERT_TRUE(db_->Migrate("t", {{1, "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)"}}));
  }
  int64_t Count() {
    auto rows = db_->Query("SELECT COUNT(*) FROM t");
    return rows ? (*rows)[0].Int(0) : -1;
  }

  edge::testing::TempDir tmp_{"sqlitedb"};
  std::unique_ptr<SqliteDb> db_;
};

TEST_F(SqliteDbTest, OpensAnyPathPrivatelyAndNamesItInMessages) {
  struct stat st {};
  ASSERT_EQ(::stat((tmp_ / "x.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(db_->path(), tmp_ / "x.db");

  auto newer = db_->Migrate("t", {});
  ASSERT_FALSE(newer);
  EXPECT_EQ(newer.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(newer.error().message.find("x database " + (tmp_ / "x.db")), std::string::npos)
      << newer.error().message;
  EXPECT_NE(newer.error().message.find("newer than this x-tool's 0"), std::string::npos)
      << newer.error().message;

  fs::create_symlink(tmp_ / "elsewhere.db", tmp_ / "link.db");
  auto linked = SqliteDb::OpenFile(tmp_ / "link.db", {});
  ASSERT_FALSE(linked);
  EXPECT_EQ(linked.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(tmp_ / "elsewhere.db"));
}

TEST_F(SqliteDbTest, TransactCommitsAValueAndRollsBackAnError) {
  auto kept = db_->Transact([](SqliteDb::Txn& txn) -> Result<int64_t> {
    if (auto st = txn.Exec("INSERT INTO t (k, v) VALUES (?, ?)", {std::string("a"), int64_t{1}});
        !st) {
      return std::unexpected(st.error());
    }
    return txn.Changes();
  });
  ASSERT_TRUE(kept) << kept.error().ToString();
  EXPECT_EQ(*kept, 1);
  EXPECT_EQ(Count(), 1);

  Status refused = db_->Transact([](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec("INSERT INTO t (k, v) VALUES ('b', 2)"); !st) return st;
    return MakeError(ErrorCode::kAborted, "changed my mind");
  });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kAborted);
  EXPECT_EQ(Count(), 1) << "the insert inside the refused transaction rolled back";

  Status failed = db_->Transact([](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec("INSERT INTO t (k, v) VALUES ('c', 3)"); !st) return st;
    return txn.Exec("INSERT INTO t (k, v) VALUES ('a', 4)");  // duplicate key
  });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(Count(), 1);

  // The connection is free again: the rolled-back transactions released it.
  EXPECT_TRUE(db_->Exec("INSERT INTO t (k, v) VALUES ('d', 5)"));
  EXPECT_EQ(Count(), 2);
}

// Group commit: writers committing at once each return after a sync of the WAL that covers
// their commit; every synced and relaxed write is there, also for a second connection (and so
// on the file).
TEST_F(SqliteDbTest, ConcurrentSyncedAndRelaxedWritesAreAllStored) {
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string k = std::to_string(t) + "-" + std::to_string(i);
        const Durability d = i % 2 == 0 ? Durability::kSynced : Durability::kRelaxed;
        Status st = OkStatus();
        if (t % 2 == 0) {
          st = db_->Exec("INSERT INTO t (k, v) VALUES (?, ?)", {k, int64_t{i}}, d);
        } else {
          st = db_->Transact([&](SqliteDb::Txn& txn) -> Status {
            return txn.Exec("INSERT INTO t (k, v) VALUES (?, ?)", {k, int64_t{i}});
          });
        }
        if (!st) ++failures[t];
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(Count(), kThreads * kEach);

  auto other = SqliteDb::OpenFile(tmp_ / "x.db", {});
  ASSERT_TRUE(other) << other.error().ToString();
  auto rows = (*other)->Query("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(rows) << rows.error().ToString();
  EXPECT_EQ((*rows)[0].Int(0), kThreads * kEach);

  // A relaxed commit of an explicit transaction.
  auto txn = db_->Begin();
  ASSERT_TRUE(txn) << txn.error().ToString();
  ASSERT_TRUE(txn->Exec("INSERT INTO t (k, v) VALUES ('relaxed', 1)"));
  ASSERT_TRUE(txn->Commit(Durability::kRelaxed));
  EXPECT_EQ(Count(), kThreads * kEach + 1);
}

// Review finding: after a failed sync of the WAL what reached the disk is unknown, and a later
// sync may report success all the same — the write that waited gets the error naming the file,
// every later write is refused with it, reads go on.
std::atomic<int> g_syncs{0};
int FailingSync(int) {
  ++g_syncs;
  errno = EIO;
  return -1;
}

TEST_F(SqliteDbTest, AFailedSyncRefusesEveryLaterWriteAndReadsGoOn) {
  // A second connection to the fixture's database (table t made), whose syncs fail.
  auto db = SqliteDb::OpenFile(tmp_ / "x.db", {.name = "io database", .fdatasync = FailingSync});
  ASSERT_TRUE(db) << db.error().ToString();
  const int before = g_syncs.load();
  auto relaxed = (*db)->Exec("INSERT INTO t (k) VALUES ('a')", {}, Durability::kRelaxed);
  ASSERT_TRUE(relaxed) << "a relaxed write does not wait for the disk";
  EXPECT_EQ(g_syncs.load(), before);

  auto synced = (*db)->Exec("INSERT INTO t (k) VALUES ('b')");
  ASSERT_FALSE(synced);
  EXPECT_EQ(synced.error().code, ErrorCode::kInternal);
  const std::string& m = synced.error().message;
  EXPECT_NE(m.find("io database " + (tmp_ / "x.db") + "-wal: fdatasync failed: "),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("refuses writes until the process restarts"), std::string::npos) << m;
  const int after = g_syncs.load();

  for (auto later : {(*db)->Exec("INSERT INTO t (k) VALUES ('c')", {}, Durability::kRelaxed),
                     (*db)->Transact([](SqliteDb::Txn& txn) -> Status {
                       return txn.Exec("INSERT INTO t (k) VALUES ('d')");
                     })}) {
    ASSERT_FALSE(later);
    EXPECT_EQ(later.error().message, m);
  }
  EXPECT_EQ(g_syncs.load(), after) << "refused before anything is written or synced";
  auto rows = (*db)->Query("SELECT k FROM t ORDER BY k");
  ASSERT_TRUE(rows) << "reads go on";
  EXPECT_EQ(rows->size(), 2u) << "a and b are committed (b's outcome was reported unknown)";
  EXPECT_TRUE(db_->Exec("INSERT INTO t (k) VALUES ('e')"))
      << "another connection, with its own descriptor, is not refused";
}

// Issue 14: a write that changed nothing (the controller's timed sweeps, mostly) costs no disk
// sync of its own, yet still returns only once what was committed before it is on disk.
std::atomic<int> g_counted_syncs{0};
int CountingSync(int fd) {
  ++g_counted_syncs;
  return ::fdatasync(fd);
}

TEST_F(SqliteDbTest, AWriteThatChangedNothingSyncsOnlyWhatCameBeforeIt) {
  auto opened = SqliteDb::OpenFile(tmp_ / "x.db", {.name = "counted", .fdatasync = CountingSync});
  ASSERT_TRUE(opened) << opened.error().ToString();
  SqliteDb& db = **opened;
  auto syncs = [start = g_counted_syncs.load()]() mutable {
    const int n = g_counted_syncs.load() - start;
    start = g_counted_syncs.load();
    return n;
  };
  ASSERT_TRUE(db.Exec("DELETE FROM t WHERE v > 100"));
  EXPECT_EQ(syncs(), 1) << "the first synced write syncs what was in the WAL before this "
                           "connection (an earlier process's writes), changed or not";
  ASSERT_TRUE(db.Exec("INSERT INTO t (k, v) VALUES ('a', 1)"));
  EXPECT_EQ(syncs(), 1) << "a synced write that changed a row";

  ASSERT_TRUE(db.Exec("UPDATE t SET v = 2 WHERE k = 'none'"));
  ASSERT_TRUE(db.Exec("DELETE FROM t WHERE v > 100"));
  ASSERT_TRUE(db.Transact([](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec("UPDATE t SET v = 3 WHERE k = 'none'"); !st) return st;
    auto rows = txn.Query("SELECT COUNT(*) FROM t");
    if (!rows) return std::unexpected(rows.error());
    return OkStatus();
  }));
  EXPECT_EQ(syncs(), 0) << "three writes that matched no row, everything before them on disk";

  ASSERT_TRUE(db.Exec("INSERT INTO t (k, v) VALUES ('b', 1)", {}, Durability::kRelaxed));
  EXPECT_EQ(syncs(), 0) << "a relaxed write does not wait for the disk";
  ASSERT_TRUE(db.Exec("DELETE FROM t WHERE v > 100"));
  EXPECT_EQ(syncs(), 1) << "a synced write that changed nothing still waits for the relaxed "
                           "write committed before it";
  ASSERT_TRUE(db.Exec("DELETE FROM t WHERE v > 100"));
  EXPECT_EQ(syncs(), 0);

  ASSERT_TRUE(db.Exec("UPDATE t SET v = 5 WHERE k = 'a'"));
  EXPECT_EQ(syncs(), 1) << "an UPDATE that changed a row";
  EXPECT_EQ(Count(), 2);
}

// Relaxed writes whose caller waits for the disk later (the executor's journal rows, issue
// 14): one Sync covers all of them, and a second finds nothing left to sync.
TEST_F(SqliteDbTest, SyncPutsEveryEarlierRelaxedWriteOnDiskOnce) {
  auto opened = SqliteDb::OpenFile(tmp_ / "x.db", {.name = "counted", .fdatasync = CountingSync});
  ASSERT_TRUE(opened) << opened.error().ToString();
  SqliteDb& db = **opened;
  ASSERT_TRUE(db.Exec("INSERT INTO t (k, v) VALUES ('first', 0)"));
  const int before = g_counted_syncs.load();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(db.Exec("INSERT INTO t (k, v) VALUES (?, ?)", {"r" + std::to_string(i), int64_t{i}},
                        Durability::kRelaxed));
  }
  const uint64_t mark = db.CommitMark();
  ASSERT_TRUE(db.Exec("INSERT INTO t (k, v) VALUES ('later', 0)", {}, Durability::kRelaxed));
  EXPECT_EQ(g_counted_syncs.load(), before);
  ASSERT_TRUE(db.Sync(mark));
  EXPECT_EQ(g_counted_syncs.load(), before + 1) << "one sync for ten relaxed writes";
  ASSERT_TRUE(db.Sync(mark));
  EXPECT_EQ(g_counted_syncs.load(), before + 1) << "nothing left to sync up to the mark";
  ASSERT_TRUE(db.Sync(db.CommitMark()));
  EXPECT_EQ(g_counted_syncs.load(), before + 1)
      << "the sync started after the later write had committed, so it covered it too";
}

// The WAL hook that tells writes from no-ops replaces SQLite's own auto-checkpoint: it must
// checkpoint as that one did, or the WAL grows with every commit for the life of the process.
TEST_F(SqliteDbTest, TheWalIsCheckpointedAsItGrows) {
  const std::string row(3000, 'x');  // about one 4 KiB page, one WAL frame and more per commit
  constexpr int kCommits = 2500;
  for (int i = 0; i < kCommits; ++i) {
    ASSERT_TRUE(db_->Exec("INSERT INTO t (k, v) VALUES (?, ?)",
                          {std::to_string(i) + row, int64_t{i}}, Durability::kRelaxed));
  }
  EXPECT_EQ(Count(), kCommits);
  auto page = db_->Query("PRAGMA page_size");
  ASSERT_TRUE(page) << page.error().ToString();
  const auto page_size = static_cast<uintmax_t>((*page)[0].Int(0));
  // Unchecked, 2500 commits of two or more frames each (page + 24-byte header) would be over
  // 20 MB; checkpointed at 1000 frames the file is reused from its start and stays near that.
  const uintmax_t wal = fs::file_size(tmp_ / "x.db-wal");
  EXPECT_LT(wal, 1200 * (page_size + 24))
      << "WAL of " << wal << " bytes after " << kCommits << " commits: never checkpointed";
}

// Issue 14: while a reader keeps the WAL from starting over, SQLite's own hook checkpointed
// after every commit past 1000 frames (a sync of the WAL and one of the database each); this
// connection's hook checkpoints once per 1000 frames of growth.
TEST_F(SqliteDbTest, AReaderHoldingTheWalDoesNotMakeEveryCommitACheckpoint) {
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2((tmp_ / "x.db").c_str(), &reader, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  struct Close {
    sqlite3* db;
    ~Close() { sqlite3_close(db); }
  } close{reader};
  // An open read transaction: its snapshot pins the WAL.
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM t;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  const std::string row(3000, 'x');  // about 7 frames a commit (table, index, overflow pages)
  constexpr int kCommits = 1500;
  for (int i = 0; i < kCommits; ++i) {
    ASSERT_TRUE(db_->Exec("INSERT INTO t (k, v) VALUES (?, ?)",
                          {std::to_string(i) + row, int64_t{i}}, Durability::kRelaxed));
  }
  // About 10 000 frames: a checkpoint per 1000 of them (10), not one per commit past the first
  // 1000 frames (about 1 350).
  EXPECT_GE(db_->auto_checkpoints(), 2u);
  EXPECT_LE(db_->auto_checkpoints(), 50u);
  ASSERT_EQ(sqlite3_exec(reader, "COMMIT;", nullptr, nullptr, nullptr), SQLITE_OK);
}

TEST_F(SqliteDbTest, AnIdleConnectionGivesBackItsPageCacheAndReadsOnUnchanged) {
  // About 1 MiB of rows, read once: the connection's page cache holds their pages.
  ASSERT_TRUE(db_->Transact([](SqliteDb::Txn& txn) -> Status {
    for (int i = 0; i < 256; ++i) {
      auto st = txn.Exec("INSERT INTO t (k, v) VALUES (?, ?)",
                         {std::string(4000, char('a' + i % 26)) + std::to_string(i), int64_t{i}});
      if (!st) return st;
    }
    return OkStatus();
  }));
  ASSERT_EQ(Count(), 256);
  ASSERT_TRUE(db_->Query("SELECT SUM(LENGTH(k)) FROM t"));
  const size_t freed = db_->ReleaseMemory();
  EXPECT_GT(freed, size_t{512} << 10) << "the pages of 1 MiB of rows";
  EXPECT_EQ(db_->ReleaseMemory(), 0u) << "nothing cached any more";
  EXPECT_EQ(Count(), 256) << "read again from the file";
  auto sum = db_->Query("SELECT SUM(v) FROM t");
  ASSERT_TRUE(sum);
  EXPECT_EQ((*sum)[0].Int(0), 255 * 256 / 2);

  // In use (a transaction holds the connection on another thread): nothing, and no wait.
  ASSERT_TRUE(db_->Query("SELECT SUM(LENGTH(k)) FROM t"));
  std::atomic<bool> holding{false}, release{false};
  std::atomic<bool> began{false};
  std::thread holder([&] {
    auto txn = db_->Begin();
    began = txn.has_value();
    holding = true;
    while (!release)
      std::this_thread::yield();
  });
  while (!holding)
    std::this_thread::yield();
  EXPECT_TRUE(began);
  EXPECT_EQ(db_->ReleaseMemory(), 0u);
  release = true;
  holder.join();
  EXPECT_GT(db_->ReleaseMemory(), size_t{512} << 10) << "free again";
}

}  // namespace
}  // namespace edge
