// StateDb: the agent's one SQLite connection to data_dir/state/agent.db (design.md §5).
// Opens the file 0600 in a 0700 directory, in WAL mode with a busy timeout, and keeps a
// `schema_migrations` table in which each store (leases, sandbox registry, idempotency)
// records the versions of its own tables. Statements are prepared once and cached.
// Thread-safe: one mutex guards the connection; a Txn holds it for its whole lifetime, so
// a Txn must not call back into the StateDb it came from. Owns the sqlite3 handle.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace edge::sandbox {

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

class StateDb {
 public:
  struct Options {
    std::chrono::milliseconds busy_timeout{5000};
  };
  // A schema step of one component; versions start at 1 and increase by 1.
  struct Migration {
    int version;
    std::string sql;  // one or more statements
  };

  // Opens (creating) `data_dir`/state/agent.db.
  static Result<std::unique_ptr<StateDb>> Open(const std::string& data_dir, Options options);
  static Result<std::unique_ptr<StateDb>> Open(const std::string& data_dir) {
    return Open(data_dir, Options{});
  }
  // Opens (creating) the database at exactly `db_path`; its directory must exist.
  static Result<std::unique_ptr<StateDb>> OpenFile(const std::string& db_path, Options options);

  ~StateDb();
  StateDb(const StateDb&) = delete;
  StateDb& operator=(const StateDb&) = delete;

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
    Status Commit();

   private:
    friend class StateDb;
    Txn(StateDb* db, std::unique_lock<std::mutex> lock) : db_(db), lock_(std::move(lock)) {}
    StateDb* db_;
    std::unique_lock<std::mutex> lock_;
    bool done_ = false;
  };
  Result<Txn> Begin();

  // One statement in its own (autocommit) transaction.
  Status Exec(std::string_view sql, const std::vector<SqlParam>& params = {});
  Result<std::vector<SqlRow>> Query(std::string_view sql, const std::vector<SqlParam>& params = {});

 private:
  StateDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  // The Locked* functions expect mu_ to be held.
  Status LockedExecScript(std::string_view sql);
  Result<std::vector<SqlRow>> LockedRun(std::string_view sql, const std::vector<SqlParam>& params);
  Result<sqlite3_stmt*> LockedPrepare(std::string_view sql);
  Error DbError(std::string_view what) const;

  std::mutex mu_;
  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*> stmts_;
};

}  // namespace edge::sandbox
