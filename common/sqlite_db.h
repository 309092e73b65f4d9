// SqliteDb: the one SQLite layer of the agent and the controller (library `edge_sqlite`).
// One connection to one database file: created 0600 (never through a symlink), WAL mode,
// foreign keys on, a busy timeout. Each component's schema is a list of
// numbered migrations whose applied versions are recorded in a `schema_migrations` table
// (component, version). Statements are prepared once and cached; parameters bind as NULL,
// INTEGER, TEXT (std::string) or BLOB (SqlBlob).
//
// Ownership: SqliteDb owns the sqlite3 handle and its cached statements; whoever opened it
// owns the SqliteDb (the agent's stores borrow the daemon's `sandbox::StateDb`, the
// controller's `SqliteStore` owns its own). Thread-safe: one mutex guards the connection;
// a Txn holds it for its whole lifetime, so code inside a Txn must use the Txn, never the
// SqliteDb it came from. Other processes sharing the file serialize on BEGIN IMMEDIATE.
//
// Durability (group commit): a write (Exec, Txn::Commit) returns once it is on disk, as with
// synchronous=FULL, but writers that commit at the same time share one fdatasync of the WAL:
// the connection runs synchronous=NORMAL (a commit appends to the WAL without syncing it) and
// each synced write then waits for a sync of the WAL file that started after its commit
// (SyncWal; one runs at a time, and whoever finds none running starts the next, covering every
// commit made so far). A write may be seen by readers of the file a moment before it is on
// disk; nobody is told it is stored before it is. A write that changed nothing (SQLite
// appended no frame to the WAL: an UPDATE or DELETE that matched no row) waits only for the
// writes this connection committed before it (and what an earlier process left in the WAL),
// and syncs nothing when they are on disk already — a timed sweep that finds nothing to do
// costs no disk sync. Writes of another connection to the same file are not waited for. The
// connection's WAL hook tells the two apart; nothing may replace it (no PRAGMA
// wal_autocheckpoint, no sqlite3_wal_hook elsewhere), or synced writes would stop syncing. A write
// made with Durability::kRelaxed does not wait: it survives a crash of the process at once and a
// power loss once any later synced write (or a checkpoint) has synced the WAL — for bookkeeping
// whose loss repeats work that is safe to repeat (see the callers).
//
// A failed sync: the write that waited for it gets the error, but it is committed (readers
// see it) and it is not known whether it is on disk — an error from a synced write means
// "outcome unknown". From then on the connection refuses every write (Begin, Exec) with that
// error, because what the kernel failed to write is lost and a later sync could still report
// success: the process must start again, and SQLite recovers the database from the disk.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace edge {

// Bytes bound as a BLOB (a plain std::string binds as TEXT).
struct SqlBlob {
  std::string bytes;
};

// A statement parameter.
using SqlParam = std::variant<std::nullptr_t, int64_t, std::string, SqlBlob>;

// One result row; TEXT and BLOB columns both read back as std::string.
class SqlRow {
 public:
  using Value = std::variant<std::nullptr_t, int64_t, double, std::string>;
  explicit SqlRow(std::vector<Value> cols) : cols_(std::move(cols)) {}

  size_t size() const { return cols_.size(); }
  bool IsNull(size_t i) const;
  // 0 for NULL; a TEXT column is not converted (0).
  int64_t Int(size_t i) const;
  // "" for NULL or a number.
  std::string Text(size_t i) const;

 private:
  std::vector<Value> cols_;
};

// Every row of `rows` read by `read(const SqlRow&)`, or the query's error.
template <typename F>
auto ReadRows(Result<std::vector<SqlRow>> rows, F read)
    -> Result<std::vector<std::invoke_result_t<F&, const SqlRow&>>> {
  if (!rows) return std::unexpected(rows.error());
  std::vector<std::invoke_result_t<F&, const SqlRow&>> out;
  out.reserve(rows->size());
  for (const SqlRow& row : *rows)
    out.push_back(read(row));
  return out;
}

// The first row of `rows` read by `read`, nullopt when there is none, or the query's error.
template <typename F>
auto ReadFirstRow(Result<std::vector<SqlRow>> rows, F read)
    -> Result<std::optional<std::invoke_result_t<F&, const SqlRow&>>> {
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::nullopt;
  return read(rows->front());
}

// Whether a write waits until it is on disk (see SqliteDb).
enum class Durability {
  kSynced,   // returns once the write is on disk (group commit)
  kRelaxed,  // returns once committed; on disk with the next synced write or checkpoint
};

class SqliteDb {
 public:
  struct Options {
    std::chrono::milliseconds busy_timeout{5000};
    // How messages name the database ("<name> <path>: ...") and the program whose schema
    // it holds ("... newer than this <owner>'s 3").
    std::string name = "database";
    std::string owner = "program";
    // The WAL's sync (tests put a failing one here; the product never changes it).
    int (*fdatasync)(int fd) = ::fdatasync;
  };
  // A schema step of one component; versions start at 1 and increase by 1.
  struct Migration {
    int version;
    std::string sql;  // one or more statements
  };

  // Opens (creating) the database at exactly `db_path`; its directory must exist.
  static Result<std::unique_ptr<SqliteDb>> OpenFile(const std::string& db_path, Options options);

  virtual ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  const std::string& path() const { return path_; }

  // Applies the `migrations` of `component` above its recorded version, all in one
  // transaction. FAILED_PRECONDITION when the file was written by a newer schema.
  Status Migrate(std::string_view component, const std::vector<Migration>& migrations);
  // The recorded schema version of `component` (0 = none).
  Result<int> SchemaVersion(std::string_view component);

  // An explicit transaction (BEGIN IMMEDIATE). Holds the connection's mutex until it is
  // committed or destroyed; destroyed without Commit() it rolls back.
  class Txn {
   public:
    Txn(Txn&& other) noexcept;
    Txn& operator=(Txn&&) = delete;
    ~Txn();

    Status Exec(std::string_view sql, const std::vector<SqlParam>& params = {});
    Result<std::vector<SqlRow>> Query(std::string_view sql,
                                      const std::vector<SqlParam>& params = {});
    // Rows changed by the last Exec.
    int64_t Changes() const;
    Status Commit(Durability durability = Durability::kSynced);

   private:
    friend class SqliteDb;
    Txn(SqliteDb* db, std::unique_lock<std::mutex> lock) : db_(db), lock_(std::move(lock)) {}
    SqliteDb* db_;
    std::unique_lock<std::mutex> lock_;
    bool done_ = false;
  };
  Result<Txn> Begin();

  // Runs `body(txn)` in a transaction and commits when it returns a value; an error it
  // returns (or a failed COMMIT) rolls everything back. `body` returns a Result or Status.
  template <typename F>
  std::invoke_result_t<F&, Txn&> Transact(F&& body, Durability durability = Durability::kSynced) {
    using R = std::invoke_result_t<F&, Txn&>;
    auto txn = Begin();
    if (!txn) return std::unexpected(txn.error());
    R r = body(*txn);
    if (!r) return r;  // ~Txn rolls back
    if (auto st = txn->Commit(durability); !st) return std::unexpected(st.error());
    return r;
  }

  // One statement in its own (autocommit) transaction.
  Status Exec(std::string_view sql, const std::vector<SqlParam>& params = {},
              Durability durability = Durability::kSynced);
  Result<std::vector<SqlRow>> Query(std::string_view sql, const std::vector<SqlParam>& params = {});

  // Where this connection's commits stand now: a mark that covers every write it committed
  // so far (read it right after a relaxed write, for Sync).
  uint64_t CommitMark() const { return committed_.load(); }
  // Returns once every write this connection committed up to `mark` is on disk, sharing the
  // sync with concurrent writers as a synced write does (no sync when they are on disk
  // already): the wait of relaxed writes whose caller waits for the disk later, elsewhere, so
  // that a batch of them shares one sync. The error of the failed sync that should have
  // covered them.
  Status Sync(uint64_t mark);
  // Gives back to the allocator what the connection caches and no statement holds (its page
  // cache: up to 2 MiB by SQLite's default, filled by a burst of work): for an idle process
  // (sqlite3_db_release_memory). The next reads fill it again from the file, most often from
  // the kernel's page cache. Returns how far the cache shrank by SQLite's own estimate
  // (SQLITE_DBSTATUS_CACHE_USED: pages times its size of one; the first release keeps a block
  // of about 20 pages for later); 0, without waiting, while the connection is in use.
  size_t ReleaseMemory();
  // Passive checkpoints this connection's WAL hook has run (diagnostics and tests).
  uint64_t auto_checkpoints() const { return auto_checkpoints_.load(); }

 protected:
  SqliteDb() = default;
  // Connects a just-constructed SqliteDb (or subclass) to `db_path`.
  Status Connect(const std::string& db_path, Options options);
  // Creates `dir` (and its parents) and makes it 0700; `what` names it in errors.
  static Status MakePrivateDir(const std::string& dir, std::string_view what);

 private:
  // The Locked* functions expect mu_ to be held.
  Status LockedExecScript(std::string_view sql);
  Result<std::vector<SqlRow>> LockedRun(std::string_view sql, const std::vector<SqlParam>& params);
  Result<sqlite3_stmt*> LockedPrepare(std::string_view sql);
  Error DbError(std::string_view what) const;
  // mu_ held, after a write committed: its sequence number for SyncWal. A commit that wrote
  // nothing to the WAL (an UPDATE or DELETE that matched no row, a transaction that only read)
  // gets the number of this connection's last commit instead: it has nothing of its own to put
  // on disk, and its caller still returns only once every write committed before it on this
  // connection is on disk (no sync at all when they already are). What an earlier process
  // left in the WAL counts as this connection's first commit (Connect): the first synced write
  // syncs it, since WAL recovery does not.
  uint64_t LockedCommitted() {
    if (!std::exchange(wal_written_, false)) return committed_.load();
    return committed_.fetch_add(1) + 1;
  }
  // SQLite's WAL hook: runs inside every commit that appended frames to the WAL (mu_ held).
  // It marks the commit as a write and checkpoints as SQLite's own hook would (it replaces it).
  static int OnWalCommit(void* self, sqlite3* db, const char* schema, int wal_frames);
  // Waits until the WAL has been synced after commit number `seq` (group commit); the error
  // of the sync that should have covered it, if that failed. Called without mu_.
  Status SyncWal(uint64_t seq);
  // fdatasync of <path>-wal (and, the first time, of its directory).
  Status SyncWalFile();
  // The error of the failed sync once one failed (see the class comment), else OK.
  Status RefuseIfPoisoned() const;

  std::mutex mu_;
  std::atomic<uint64_t> committed_{0};  // writes committed (incremented under mu_)
  bool wal_written_ = false;        // mu_: the WAL got frames not yet numbered by LockedCommitted
  int checkpointed_at_frames_ = 0;  // mu_: the WAL's size at this connection's last checkpoint
  std::atomic<uint64_t> auto_checkpoints_{0};
  mutable std::mutex sync_mu_;  // guards the group-commit state below
  std::condition_variable sync_cv_;
  bool syncing_ = false;
  bool dir_synced_ = false;
  uint64_t synced_ = 0;          // every commit up to this one is on disk
  uint64_t failed_through_ = 0;  // the last failed sync was to cover commits up to this one
  std::string sync_error_;
  std::atomic<bool> poisoned_{false};  // a sync failed: writes are refused (sync_error_)
  int wal_fd_ = -1;                    // <path>-wal, opened at the first sync (SyncWalFile)
  sqlite3* db_ = nullptr;
  std::string path_;
  Options options_;
  std::unordered_map<std::string, sqlite3_stmt*> stmts_;
};

}  // namespace edge
