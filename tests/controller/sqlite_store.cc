#include "tests/controller/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <functional>

namespace edge::controller {
namespace {

// Ordered migrations; index + 1 is the schema version it produces. Never edit a shipped one.
constexpr std::array<const char*, 1> kMigrations = {
    R"sql(
CREATE TABLE join_tokens (
  token_id        TEXT PRIMARY KEY,
  token_hash      TEXT NOT NULL UNIQUE,
  node_id         TEXT NOT NULL DEFAULT '',
  tenant_id       TEXT NOT NULL,
  created_at_ms   BIGINT NOT NULL,
  expires_at_ms   BIGINT NOT NULL,
  consumed_at_ms  BIGINT NOT NULL DEFAULT 0,
  consumed_by     TEXT NOT NULL DEFAULT '',
  revoked_at_ms   BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE nodes (
  node_id          TEXT PRIMARY KEY,
  tenant_id        TEXT NOT NULL,
  state            TEXT NOT NULL,
  cert_serial_hex  TEXT NOT NULL DEFAULT '',
  enrolled_at_ms   BIGINT NOT NULL DEFAULT 0,
  last_seen_ms     BIGINT NOT NULL DEFAULT 0
);
)sql",
};

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int col) const {
    auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

constexpr const char* kTokenColumns =
    "token_id, token_hash, node_id, tenant_id, created_at_ms, expires_at_ms, consumed_at_ms, "
    "consumed_by, revoked_at_ms";

JoinTokenRecord ReadToken(const Stmt& s) {
  JoinTokenRecord r;
  r.token_id = s.Text(0);
  r.token_hash = s.Text(1);
  r.node_id = s.Text(2);
  r.tenant_id = s.Text(3);
  r.created_at_ms = s.Int(4);
  r.expires_at_ms = s.Int(5);
  r.consumed_at_ms = s.Int(6);
  r.consumed_by = s.Text(7);
  r.revoked_at_ms = s.Int(8);
  return r;
}

NodeRecord ReadNode(const Stmt& s) {
  NodeRecord n;
  n.node_id = s.Text(0);
  n.tenant_id = s.Text(1);
  n.state = s.Text(2);
  n.cert_serial_hex = s.Text(3);
  n.enrolled_at_ms = s.Int(4);
  n.last_seen_ms = s.Int(5);
  return n;
}

}  // namespace

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  // Create the file 0600 before SQLite does, so it is never world-readable.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return MakeError(ErrorCode::kPermissionDenied, "cannot open database " + path);
  ::fchmod(fd, 0600);
  ::close(fd);
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return MakeError(ErrorCode::kInternal, "open database " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    if (auto st = store->Exec(pragma); !st) return std::unexpected(st.error());
  }
  if (auto st = store->Migrate(); !st) return std::unexpected(st.error());
  return store;
}

SqliteStore::~SqliteStore() {
  sqlite3_close(db_);
}

Error SqliteStore::DbError(const std::string& what) const {
  return Error{ErrorCode::kInternal, what + ": " + sqlite3_errmsg(db_)};
}

Status SqliteStore::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return MakeError(ErrorCode::kInternal, "sql: " + msg);
  }
  return OkStatus();
}

Status SqliteStore::Migrate() {
  std::lock_guard lock(mu_);
  if (auto st = Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"); !st)
    return st;
  if (auto st = Exec("BEGIN IMMEDIATE"); !st) return st;
  int version = 0;
  {
    Stmt s(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
    if (s.Step() == SQLITE_ROW) version = static_cast<int>(s.Int(0));
  }
  if (version > static_cast<int>(kMigrations.size())) {
    Exec("ROLLBACK");
    return MakeError(ErrorCode::kFailedPrecondition,
                     "controller.db has schema version " + std::to_string(version) +
                         ", newer than this controller understands (" +
                         std::to_string(kMigrations.size()) + ")");
  }
  for (size_t i = static_cast<size_t>(version); i < kMigrations.size(); ++i) {
    if (auto st = Exec(kMigrations[i]); !st) {
      Exec("ROLLBACK");
      return st;
    }
    if (auto st =
            Exec("INSERT INTO schema_version(version) VALUES (" + std::to_string(i + 1) + ")");
        !st) {
      Exec("ROLLBACK");
      return st;
    }
  }
  if (auto st = Exec("COMMIT"); !st) return st;
  schema_version_ = static_cast<int>(kMigrations.size());
  return OkStatus();
}

Status SqliteStore::InsertJoinToken(const JoinTokenRecord& r) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "INSERT INTO join_tokens (token_id, token_hash, node_id, tenant_id, created_at_ms, "
         "expires_at_ms) VALUES (?, ?, ?, ?, ?, ?)");
  s.Bind(1, r.token_id).Bind(2, r.token_hash).Bind(3, r.node_id).Bind(4, r.tenant_id);
  s.Bind(5, r.created_at_ms).Bind(6, r.expires_at_ms);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("insert join token"));
  return OkStatus();
}

Result<std::optional<JoinTokenRecord>> SqliteStore::FindJoinTokenByHash(const std::string& hash) {
  std::lock_guard lock(mu_);
  Stmt s(
      db_,
      (std::string("SELECT ") + kTokenColumns + " FROM join_tokens WHERE token_hash = ?").c_str());
  s.Bind(1, hash);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return std::optional<JoinTokenRecord>(ReadToken(s));
  if (rc == SQLITE_DONE) return std::optional<JoinTokenRecord>();
  return std::unexpected(DbError("find join token"));
}

Result<JoinTokenRecord> SqliteStore::ConsumeJoinToken(const std::string& hash,
                                                      const std::string& node_id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  if (auto st = Exec("BEGIN IMMEDIATE"); !st) return std::unexpected(st.error());
  auto rollback = [&](Error e) -> Result<JoinTokenRecord> {
    Exec("ROLLBACK");
    return std::unexpected(std::move(e));
  };
  JoinTokenRecord rec;
  {
    Stmt s(db_, (std::string("SELECT ") + kTokenColumns + " FROM join_tokens WHERE token_hash = ?")
                    .c_str());
    s.Bind(1, hash);
    int rc = s.Step();
    if (rc == SQLITE_DONE) return rollback({ErrorCode::kNotFound, "join token not found"});
    if (rc != SQLITE_ROW) return rollback(DbError("read join token"));
    rec = ReadToken(s);
  }
  if (rec.revoked_at_ms != 0) {
    return rollback(
        {ErrorCode::kFailedPrecondition, "join token " + rec.token_id + " was revoked"});
  }
  if (rec.consumed_at_ms != 0) {
    return rollback(
        {ErrorCode::kFailedPrecondition, "join token " + rec.token_id + " was already used"});
  }
  if (now_ms >= rec.expires_at_ms) {
    return rollback({ErrorCode::kFailedPrecondition, "join token " + rec.token_id + " expired"});
  }
  if (!rec.node_id.empty() && rec.node_id != node_id) {
    return rollback({ErrorCode::kPermissionDenied, "join token " + rec.token_id +
                                                       " is bound to node \"" + rec.node_id +
                                                       "\", not \"" + node_id + "\""});
  }
  {
    // Conditional: only an unconsumed row changes, so exactly one redeemer wins.
    Stmt s(db_,
           "UPDATE join_tokens SET consumed_at_ms = ?, consumed_by = ? "
           "WHERE token_hash = ? AND consumed_at_ms = 0 AND revoked_at_ms = 0");
    s.Bind(1, now_ms).Bind(2, node_id).Bind(3, hash);
    if (s.Step() != SQLITE_DONE) return rollback(DbError("consume join token"));
    if (sqlite3_changes(db_) != 1) {
      return rollback(
          {ErrorCode::kFailedPrecondition, "join token " + rec.token_id + " was already used"});
    }
  }
  if (auto st = Exec("COMMIT"); !st) return rollback(st.error());
  rec.consumed_at_ms = now_ms;
  rec.consumed_by = node_id;
  return rec;
}

Status SqliteStore::UnconsumeJoinToken(const std::string& hash) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE join_tokens SET consumed_at_ms = 0, consumed_by = '' WHERE token_hash = ?");
  s.Bind(1, hash);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("unconsume join token"));
  return OkStatus();
}

Status SqliteStore::RevokeJoinToken(const std::string& token_id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE join_tokens SET revoked_at_ms = ? WHERE token_id = ? AND revoked_at_ms = 0");
  s.Bind(1, now_ms).Bind(2, token_id);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("revoke join token"));
  if (sqlite3_changes(db_) == 0) {
    Stmt exists(db_, "SELECT 1 FROM join_tokens WHERE token_id = ?");
    exists.Bind(1, token_id);
    if (exists.Step() != SQLITE_ROW) {
      return MakeError(ErrorCode::kNotFound, "join token \"" + token_id + "\" not found");
    }
  }
  return OkStatus();
}

Result<std::vector<JoinTokenRecord>> SqliteStore::ListJoinTokens(bool include_inactive,
                                                                 int64_t now_ms) {
  std::lock_guard lock(mu_);
  std::string sql = std::string("SELECT ") + kTokenColumns + " FROM join_tokens";
  if (!include_inactive) {
    sql += " WHERE consumed_at_ms = 0 AND revoked_at_ms = 0 AND expires_at_ms > ?";
  }
  sql += " ORDER BY created_at_ms, token_id";
  Stmt s(db_, sql.c_str());
  if (!include_inactive) s.Bind(1, now_ms);
  std::vector<JoinTokenRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back(ReadToken(s));
  if (rc != SQLITE_DONE) return std::unexpected(DbError("list join tokens"));
  return out;
}

Status SqliteStore::UpsertNode(const NodeRecord& n) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "INSERT INTO nodes (node_id, tenant_id, state, cert_serial_hex, enrolled_at_ms, "
         "last_seen_ms) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(node_id) DO UPDATE SET "
         "tenant_id = excluded.tenant_id, state = excluded.state, "
         "cert_serial_hex = excluded.cert_serial_hex, enrolled_at_ms = excluded.enrolled_at_ms, "
         "last_seen_ms = excluded.last_seen_ms");
  s.Bind(1, n.node_id).Bind(2, n.tenant_id).Bind(3, n.state).Bind(4, n.cert_serial_hex);
  s.Bind(5, n.enrolled_at_ms).Bind(6, n.last_seen_ms);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("upsert node"));
  return OkStatus();
}

Result<std::optional<NodeRecord>> SqliteStore::GetNode(const std::string& node_id) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "SELECT node_id, tenant_id, state, cert_serial_hex, enrolled_at_ms, last_seen_ms "
         "FROM nodes WHERE node_id = ?");
  s.Bind(1, node_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return std::optional<NodeRecord>(ReadNode(s));
  if (rc == SQLITE_DONE) return std::optional<NodeRecord>();
  return std::unexpected(DbError("get node"));
}

Result<std::vector<NodeRecord>> SqliteStore::ListNodes() {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "SELECT node_id, tenant_id, state, cert_serial_hex, enrolled_at_ms, last_seen_ms "
         "FROM nodes ORDER BY node_id");
  std::vector<NodeRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back(ReadNode(s));
  if (rc != SQLITE_DONE) return std::unexpected(DbError("list nodes"));
  return out;
}

}  // namespace edge::controller
