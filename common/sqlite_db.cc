#include "common/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/atomic_file.h"
#include "common/clock.h"

namespace edge {
namespace {

// Creates the file 0600 (not following a symlink) before SQLite opens it, and tightens an
// existing one to 0600.
Status PrepareDbFile(const std::string& path, const std::string& name) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     name + " " + path + " cannot be opened: " + std::strerror(errno));
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::fchmod(fd, 0600) == 0;
  ::close(fd);
  if (!ok) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     name + " " + path + " is not a regular file that can be made 0600");
  }
  return OkStatus();
}

}  // namespace

bool SqlRow::IsNull(size_t i) const {
  return i >= cols_.size() || std::holds_alternative<std::nullptr_t>(cols_[i]);
}

int64_t SqlRow::Int(size_t i) const {
  if (i >= cols_.size()) return 0;
  if (auto* v = std::get_if<int64_t>(&cols_[i])) return *v;
  if (auto* d = std::get_if<double>(&cols_[i])) return static_cast<int64_t>(*d);
  return 0;
}

std::string SqlRow::Text(size_t i) const {
  if (i >= cols_.size()) return {};
  if (auto* s = std::get_if<std::string>(&cols_[i])) return *s;
  return {};
}

Status SqliteDb::MakePrivateDir(const std::string& dir, std::string_view what) {
  if (auto st = MakeDirs(dir, 0700); !st) return st;
  if (::chmod(dir.c_str(), 0700) != 0) {
    return MakeError(
        ErrorCode::kFailedPrecondition,
        std::string(what) + " " + dir + " cannot be made 0700: " + std::strerror(errno));
  }
  return OkStatus();
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::OpenFile(const std::string& db_path, Options options) {
  std::unique_ptr<SqliteDb> db(new SqliteDb());
  if (auto st = db->Connect(db_path, std::move(options)); !st) return std::unexpected(st.error());
  return db;
}

Status SqliteDb::Connect(const std::string& db_path, Options options) {
  path_ = db_path;
  options_ = std::move(options);
  if (auto st = PrepareDbFile(db_path, options_.name); !st) return st;
  int rc =
      sqlite3_open_v2(db_path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (rc != SQLITE_OK) return std::unexpected(DbError("open"));
  sqlite3_busy_timeout(db_, static_cast<int>(options_.busy_timeout.count()));
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_wal_hook(db_, &SqliteDb::OnWalCommit, this);
  // Frames an earlier process committed may still be only in the page cache (WAL recovery
  // does not sync): the first synced write of this connection syncs them, changed or not.
  wal_written_ = true;
  std::lock_guard lock(mu_);
  auto mode = LockedRun("PRAGMA journal_mode=WAL", {});
  if (!mode) return std::unexpected(mode.error());
  if (mode->empty() || (*mode)[0].Text(0) != "wal") {
    return MakeError(ErrorCode::kInternal,
                     options_.name + " " + db_path + " refused journal_mode=WAL");
  }
  return LockedExecScript(
      // NORMAL: a commit does not sync the WAL; a synced write syncs it itself, shared with
      // the writers committing at the same time (SyncWal).
      "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      " component TEXT NOT NULL, version INTEGER NOT NULL, applied_at_ms INTEGER NOT NULL,"
      " PRIMARY KEY (component, version))");
}

int SqliteDb::OnWalCommit(void* self, sqlite3* db, const char* schema, int wal_frames) {
  auto* me = static_cast<SqliteDb*>(self);
  me->wal_written_ = true;
  // SQLite's default hook (wal_autocheckpoint, 1000 frames), which sqlite3_wal_hook replaces,
  // checkpoints after every commit once the WAL holds 1000 frames — and while readers keep the
  // WAL from starting over, that is every commit, each checkpoint a sync of the WAL and one of
  // the database (measured at 16 commands in flight, issue 14: about as many syncs as the
  // commands' own). This one checkpoints (passive) once per 1000 frames the WAL has grown by
  // since its last checkpoint, or since it started over: the WAL stays bounded all the same.
  constexpr int kAutoCheckpointFrames = 1000;
  if (wal_frames < me->checkpointed_at_frames_) me->checkpointed_at_frames_ = 0;  // started over
  if (wal_frames >= me->checkpointed_at_frames_ + kAutoCheckpointFrames) {
    me->checkpointed_at_frames_ = wal_frames;
    ++me->auto_checkpoints_;
    (void)sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
  return SQLITE_OK;
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, stmt] : stmts_)
    sqlite3_finalize(stmt);
  if (db_ != nullptr) sqlite3_close(db_);
  if (wal_fd_ >= 0) ::close(wal_fd_);
}

Status SqliteDb::RefuseIfPoisoned() const {
  if (!poisoned_.load()) return OkStatus();
  std::lock_guard lock(sync_mu_);
  return MakeError(ErrorCode::kInternal, sync_error_);
}

Error SqliteDb::DbError(std::string_view what) const {
  int code = db_ ? sqlite3_extended_errcode(db_) : SQLITE_NOMEM;
  std::string msg = options_.name + " " + path_ + ": " + std::string(what) +
                    " failed: " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
  ErrorCode ec = ErrorCode::kInternal;
  switch (code & 0xff) {
    case SQLITE_FULL:
      ec = ErrorCode::kResourceExhausted;
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      ec = ErrorCode::kUnavailable;
      break;
    case SQLITE_CONSTRAINT:
      ec = ErrorCode::kAlreadyExists;
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      ec = ErrorCode::kFailedPrecondition;
      break;
    default:
      break;
  }
  return Error{ec, std::move(msg)};
}

Status SqliteDb::LockedExecScript(std::string_view sql) {
  char* err = nullptr;
  const std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    Error e = DbError("script");
    sqlite3_free(err);
    return std::unexpected(std::move(e));
  }
  return OkStatus();
}

Result<sqlite3_stmt*> SqliteDb::LockedPrepare(std::string_view sql) {
  std::string key(sql);
  if (auto it = stmts_.find(key); it != stmts_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT,
                         &stmt, nullptr) != SQLITE_OK) {
    return std::unexpected(DbError("prepare of \"" + key + "\""));
  }
  stmts_.emplace(std::move(key), stmt);
  return stmt;
}

Result<std::vector<SqlRow>> SqliteDb::LockedRun(std::string_view sql,
                                                const std::vector<SqlParam>& params) {
  auto prepared = LockedPrepare(sql);
  if (!prepared) return std::unexpected(prepared.error());
  sqlite3_stmt* stmt = *prepared;
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  for (size_t i = 0; i < params.size(); ++i) {
    int idx = static_cast<int>(i) + 1;
    int rc = std::visit(
        [&](const auto& v) -> int {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::nullptr_t>) {
            return sqlite3_bind_null(stmt, idx);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            return sqlite3_bind_int64(stmt, idx, v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            return sqlite3_bind_text64(stmt, idx, v.data(), v.size(), SQLITE_TRANSIENT,
                                       SQLITE_UTF8);
          } else {
            return sqlite3_bind_blob64(stmt, idx, v.bytes.data(), v.bytes.size(), SQLITE_TRANSIENT);
          }
        },
        params[i]);
    if (rc != SQLITE_OK)
      return std::unexpected(DbError("bind of parameter " + std::to_string(idx)));
  }
  std::vector<SqlRow> rows;
  for (;;) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      Error e = DbError("statement \"" + std::string(sql) + "\"");
      sqlite3_reset(stmt);
      return std::unexpected(std::move(e));
    }
    const int n = sqlite3_column_count(stmt);
    std::vector<SqlRow::Value> cols;
    cols.reserve(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      switch (sqlite3_column_type(stmt, c)) {
        case SQLITE_INTEGER:
          cols.emplace_back(static_cast<int64_t>(sqlite3_column_int64(stmt, c)));
          break;
        case SQLITE_FLOAT:
          cols.emplace_back(sqlite3_column_double(stmt, c));
          break;
        case SQLITE_NULL:
          cols.emplace_back(nullptr);
          break;
        default: {
          const void* p = sqlite3_column_blob(stmt, c);
          const int len = sqlite3_column_bytes(stmt, c);
          cols.emplace_back(p ? std::string(static_cast<const char*>(p), static_cast<size_t>(len))
                              : std::string());
        }
      }
    }
    rows.emplace_back(std::move(cols));
  }
  sqlite3_reset(stmt);
  return rows;
}

Status SqliteDb::Migrate(std::string_view component, const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return MakeError(ErrorCode::kInternal, "migration " + std::to_string(i) + " of " +
                                                 std::string(component) + " has version " +
                                                 std::to_string(migrations[i].version) +
                                                 "; versions must be 1, 2, 3, ...");
    }
  }
  auto txn = Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows =
      txn->Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?",
                 {std::string(component)});
  if (!rows) return std::unexpected(rows.error());
  const int64_t have = rows->empty() ? 0 : (*rows)[0].Int(0);
  if (have > static_cast<int64_t>(migrations.size())) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     options_.name + " " + path_ + ": schema of " + std::string(component) +
                         " is version " + std::to_string(have) + ", newer than this " +
                         options_.owner + "'s " + std::to_string(migrations.size()));
  }
  for (const auto& m : migrations) {
    if (m.version <= have) continue;
    if (auto st = LockedExecScript(m.sql); !st) {
      return MakeError(st.error().code, "migration " + std::to_string(m.version) + " of " +
                                            std::string(component) + ": " + st.error().message);
    }
    if (auto st = txn->Exec(
            "INSERT INTO schema_migrations (component, version, applied_at_ms) VALUES (?, ?, ?)",
            {std::string(component), static_cast<int64_t>(m.version),
             ToEpochMillis(SystemClock::Instance().Now())});
        !st) {
      return st;
    }
  }
  return txn->Commit();
}

Result<int> SqliteDb::SchemaVersion(std::string_view component) {
  auto rows = Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?",
                    {std::string(component)});
  if (!rows) return std::unexpected(rows.error());
  return rows->empty() ? 0 : static_cast<int>((*rows)[0].Int(0));
}

Result<SqliteDb::Txn> SqliteDb::Begin() {
  if (auto st = RefuseIfPoisoned(); !st) return std::unexpected(st.error());
  std::unique_lock lock(mu_);
  auto stmt = LockedRun("BEGIN IMMEDIATE", {});
  if (!stmt) return std::unexpected(stmt.error());
  return Txn(this, std::move(lock));
}

Status SqliteDb::Exec(std::string_view sql, const std::vector<SqlParam>& params,
                      Durability durability) {
  if (auto st = RefuseIfPoisoned(); !st) return st;
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    auto rows = LockedRun(sql, params);
    if (!rows) return std::unexpected(rows.error());
    seq = LockedCommitted();
  }
  return durability == Durability::kSynced ? SyncWal(seq) : OkStatus();
}

size_t SqliteDb::ReleaseMemory() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;
  int before = 0, after = 0, highwater = 0;
  sqlite3_db_status(db_, SQLITE_DBSTATUS_CACHE_USED, &before, &highwater, 0);
  sqlite3_db_release_memory(db_);
  sqlite3_db_status(db_, SQLITE_DBSTATUS_CACHE_USED, &after, &highwater, 0);
  return before > after ? static_cast<size_t>(before - after) : 0;
}

Status SqliteDb::Sync(uint64_t mark) {
  return SyncWal(mark);
}

Status SqliteDb::SyncWal(uint64_t seq) {
  std::unique_lock lock(sync_mu_);
  while (synced_ < seq) {
    if (poisoned_.load()) return MakeError(ErrorCode::kInternal, sync_error_);
    if (syncing_) {
      sync_cv_.wait(lock);
      if (synced_ < seq && failed_through_ >= seq) {
        return MakeError(ErrorCode::kInternal, sync_error_);
      }
      continue;
    }
    syncing_ = true;
    // Every commit counted so far has written its WAL frames: this sync covers them.
    const uint64_t target = committed_.load();
    lock.unlock();
    Status st = SyncWalFile();
    lock.lock();
    syncing_ = false;
    if (st) {
      synced_ = std::max(synced_, target);
    } else {
      // What the kernel could not write is not known, and a later sync could report success
      // all the same: every later write is refused until the process starts again and SQLite
      // recovers the database from what is on disk.
      failed_through_ = std::max(failed_through_, target);
      sync_error_ = st.error().message +
                    "; the database refuses writes until the process restarts (writes reported "
                    "since the last successful sync may not be on disk)";
      poisoned_ = true;
      st = MakeError(ErrorCode::kInternal, sync_error_);
    }
    sync_cv_.notify_all();
    if (!st) return st;
  }
  return OkStatus();
}

Status SqliteDb::SyncWalFile() {
  const std::string wal = path_ + "-wal";
  // One descriptor, opened at the first sync and kept: the kernel reports a write-back error
  // to the descriptors open when it happened, not to one opened afterwards. Only the one
  // syncing thread (SyncWal's `syncing_`) gets here, so wal_fd_ needs no lock. The WAL is not
  // removed while this connection is open (only the last connection's close removes it).
  if (wal_fd_ < 0) {
    wal_fd_ = ::open(wal.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (wal_fd_ < 0) {
      // No WAL: nothing was written through it yet, or it was checkpointed (synced) away.
      if (errno == ENOENT) return OkStatus();
      return MakeError(ErrorCode::kInternal, options_.name + " " + wal +
                                                 ": open for sync failed: " + std::strerror(errno));
    }
  }
  int rc;
  do {
    rc = options_.fdatasync(wal_fd_);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  if (rc != 0) {
    return MakeError(ErrorCode::kInternal,
                     options_.name + " " + wal + ": fdatasync failed: " + std::strerror(err));
  }
  // The WAL's directory entry too, once (SQLite syncs it only at its own first WAL sync,
  // which with synchronous=NORMAL is the first checkpoint).
  bool dir_done = false;
  {
    std::lock_guard lock(sync_mu_);
    dir_done = dir_synced_;
  }
  if (!dir_done) {
    const auto slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::fsync(dfd) != 0) {
      const int e = errno;
      if (dfd >= 0) ::close(dfd);
      return MakeError(ErrorCode::kInternal,
                       options_.name + " " + dir + ": directory sync failed: " + std::strerror(e));
    }
    ::close(dfd);
    std::lock_guard lock(sync_mu_);
    dir_synced_ = true;
  }
  return OkStatus();
}

Result<std::vector<SqlRow>> SqliteDb::Query(std::string_view sql,
                                            const std::vector<SqlParam>& params) {
  std::lock_guard lock(mu_);
  return LockedRun(sql, params);
}

SqliteDb::Txn::Txn(Txn&& other) noexcept
    : db_(other.db_), lock_(std::move(other.lock_)), done_(std::exchange(other.done_, true)) {}

SqliteDb::Txn::~Txn() {
  if (!done_ && lock_.owns_lock()) (void)db_->LockedRun("ROLLBACK", {});
}

Status SqliteDb::Txn::Exec(std::string_view sql, const std::vector<SqlParam>& params) {
  auto rows = db_->LockedRun(sql, params);
  if (!rows) return std::unexpected(rows.error());
  return OkStatus();
}

Result<std::vector<SqlRow>> SqliteDb::Txn::Query(std::string_view sql,
                                                 const std::vector<SqlParam>& params) {
  return db_->LockedRun(sql, params);
}

int64_t SqliteDb::Txn::Changes() const {
  return sqlite3_changes64(db_->db_);
}

Status SqliteDb::Txn::Commit(Durability durability) {
  auto rows = db_->LockedRun("COMMIT", {});
  if (!rows) return std::unexpected(rows.error());
  done_ = true;
  const uint64_t seq = db_->LockedCommitted();
  lock_.unlock();
  return durability == Durability::kSynced ? db_->SyncWal(seq) : OkStatus();
}

}  // namespace edge
