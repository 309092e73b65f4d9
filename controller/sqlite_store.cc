#include "controller/sqlite_store.h"

#include "controller/sqlite_stmt.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <functional>

namespace edge::controller {
namespace {

// Ordered migrations; index + 1 is the schema version it produces. Never edit a shipped one.
constexpr std::array<const char*, 4> kMigrations = {
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
    // 2: the edge stream — registry, node tokens and their blacklist, rotation nonces,
    // commands and their results.
    R"sql(
CREATE TABLE edge_nodes (
  node_id              TEXT PRIMARY KEY,
  tenant_id            TEXT NOT NULL,
  public_key_hex       TEXT NOT NULL,
  prev_public_key_hex  TEXT NOT NULL DEFAULT '',
  prev_key_until_ms    BIGINT NOT NULL DEFAULT 0,
  edge_enrolled_at_ms  BIGINT NOT NULL,
  enrollment_jti       TEXT NOT NULL,
  key_rotated_at_ms    BIGINT NOT NULL DEFAULT 0,
  capabilities_json    TEXT NOT NULL DEFAULT '',
  last_heartbeat_ms    BIGINT NOT NULL DEFAULT 0,
  config_version       TEXT NOT NULL DEFAULT ''
);
CREATE TABLE edge_enrollments (
  jti             TEXT PRIMARY KEY,
  token_hash      TEXT NOT NULL,
  node_id         TEXT NOT NULL,
  tenant_id       TEXT NOT NULL,
  redeemed_at_ms  BIGINT NOT NULL
);
CREATE TABLE node_tokens (
  jti             TEXT PRIMARY KEY,
  node_id         TEXT NOT NULL,
  issued_at_ms    BIGINT NOT NULL,
  expires_at_ms   BIGINT NOT NULL,
  revoked_at_ms   BIGINT NOT NULL DEFAULT 0,
  revoke_reason   TEXT NOT NULL DEFAULT '',
  grace_until_ms  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX node_tokens_by_node ON node_tokens(node_id);
CREATE TABLE rotation_nonces (
  nonce_hex   TEXT PRIMARY KEY,
  node_id     TEXT NOT NULL,
  seen_at_ms  BIGINT NOT NULL
);
CREATE TABLE commands (
  command_id        TEXT PRIMARY KEY,
  node_id           TEXT NOT NULL,
  tool              TEXT NOT NULL,
  args_json         TEXT NOT NULL,
  security_context  TEXT NOT NULL DEFAULT '',
  deadline_ms       BIGINT NOT NULL DEFAULT 0,
  state             TEXT NOT NULL,
  created_at_ms     BIGINT NOT NULL,
  completed_at_ms   BIGINT NOT NULL DEFAULT 0,
  outcome           TEXT NOT NULL DEFAULT '',
  exit_code         INTEGER NOT NULL DEFAULT 0,
  error_code        TEXT NOT NULL DEFAULT '',
  message           TEXT NOT NULL DEFAULT '',
  payload_json      TEXT NOT NULL DEFAULT '',
  duration_ms       BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX commands_by_node ON commands(node_id, created_at_ms);
)sql",
    // 3: a join token may re-enroll an existing node only when created with --replace.
    R"sql(
ALTER TABLE join_tokens ADD COLUMN may_replace INTEGER NOT NULL DEFAULT 0;
)sql",
    // 4: the worker control plane — worker leases and the workers' last heartbeats.
    R"sql(
CREATE TABLE worker_leases (
  resource_id    TEXT PRIMARY KEY,
  holder_id      TEXT NOT NULL,
  generation     BIGINT NOT NULL,
  expires_at_ms  BIGINT NOT NULL,
  updated_at_ms  BIGINT NOT NULL
);
CREATE TABLE workers (
  worker_id                TEXT PRIMARY KEY,
  hostname                 TEXT NOT NULL DEFAULT '',
  status                   TEXT NOT NULL DEFAULT '',
  rpc_url                  TEXT NOT NULL DEFAULT '',
  preview_domain           TEXT NOT NULL DEFAULT '',
  max_sandboxes            BIGINT NOT NULL DEFAULT 0,
  max_sandboxes_per_owner  BIGINT NOT NULL DEFAULT 0,
  providers_json           TEXT NOT NULL DEFAULT '[]',
  capabilities_json        TEXT NOT NULL DEFAULT '[]',
  remote_addr              TEXT NOT NULL DEFAULT '',
  first_seen_ms            BIGINT NOT NULL,
  last_heartbeat_ms        BIGINT NOT NULL,
  heartbeats               BIGINT NOT NULL DEFAULT 0
);
)sql",
};

constexpr const char* kTokenColumns =
    "token_id, token_hash, node_id, tenant_id, created_at_ms, expires_at_ms, consumed_at_ms, "
    "consumed_by, revoked_at_ms, may_replace";

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
  r.replace = s.Int(9) != 0;
  return r;
}

// OK when `tok` may re-enroll `node_id`, which the controller already knows (in `state`):
// only a token bound to the node and created with --replace may. The message names the node,
// the token and what the operator must do.
Status ReenrollAllowed(const JoinTokenRecord& tok, const std::string& node_id,
                       const std::string& state) {
  const std::string known = "node \"" + node_id + "\" is already enrolled (state " + state + ")";
  const std::string fix = "to give node \"" + node_id +
                          "\" a new identity, the operator must create a join token with "
                          "`edge-controller token create --node " +
                          node_id + " --replace`";
  if (tok.node_id.empty()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     known + ": join token " + tok.token_id +
                         " is not bound to a node and enrolls only a node id this controller "
                         "has never seen; " +
                         fix);
  }
  if (!tok.replace) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     known + ": join token " + tok.token_id +
                         " is bound to it but was not created with --replace; " + fix);
  }
  return OkStatus();
}

std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string Unhex(const std::string& hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return 0;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return out;
}

constexpr const char* kEdgeColumns =
    "node_id, tenant_id, public_key_hex, prev_public_key_hex, prev_key_until_ms, "
    "edge_enrolled_at_ms, enrollment_jti, key_rotated_at_ms, capabilities_json, "
    "last_heartbeat_ms, config_version";

EdgeNodeRecord ReadEdgeNode(const Stmt& s) {
  EdgeNodeRecord e;
  e.node_id = s.Text(0);
  e.tenant_id = s.Text(1);
  e.public_key = Unhex(s.Text(2));
  e.prev_public_key = Unhex(s.Text(3));
  e.prev_key_until_ms = s.Int(4);
  e.edge_enrolled_at_ms = s.Int(5);
  e.enrollment_jti = s.Text(6);
  e.key_rotated_at_ms = s.Int(7);
  e.capabilities_json = s.Text(8);
  e.last_heartbeat_ms = s.Int(9);
  e.config_version = s.Text(10);
  return e;
}

constexpr const char* kNodeTokenColumns =
    "jti, node_id, issued_at_ms, expires_at_ms, revoked_at_ms, revoke_reason, grace_until_ms";

NodeTokenRecord ReadNodeToken(const Stmt& s) {
  NodeTokenRecord t;
  t.jti = s.Text(0);
  t.node_id = s.Text(1);
  t.issued_at_ms = s.Int(2);
  t.expires_at_ms = s.Int(3);
  t.revoked_at_ms = s.Int(4);
  t.revoke_reason = s.Text(5);
  t.grace_until_ms = s.Int(6);
  return t;
}

constexpr const char* kCommandColumns =
    "command_id, node_id, tool, args_json, security_context, deadline_ms, state, created_at_ms, "
    "completed_at_ms, outcome, exit_code, error_code, message, payload_json, duration_ms";

CommandRecord ReadCommand(const Stmt& s) {
  CommandRecord c;
  c.command_id = s.Text(0);
  c.node_id = s.Text(1);
  c.tool = s.Text(2);
  c.args_json = s.Text(3);
  c.security_context = s.Text(4);
  c.deadline_ms = s.Int(5);
  c.state = s.Text(6);
  c.created_at_ms = s.Int(7);
  c.completed_at_ms = s.Int(8);
  c.result.outcome = s.Text(9);
  c.result.exit_code = static_cast<int32_t>(s.Int(10));
  c.result.error_code = s.Text(11);
  c.result.message = s.Text(12);
  c.result.payload_json = s.Text(13);
  c.result.duration_ms = s.Int(14);
  return c;
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
         "expires_at_ms, may_replace) VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, r.token_id).Bind(2, r.token_hash).Bind(3, r.node_id).Bind(4, r.tenant_id);
  s.Bind(5, r.created_at_ms).Bind(6, r.expires_at_ms).Bind(7, int64_t{r.replace ? 1 : 0});
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
  // Only now that the token is known to be valid: does the node id exist already?
  auto known = KnownNodeStateLocked(node_id);
  if (!known) return rollback(known.error());
  if (*known) {
    if (auto st = ReenrollAllowed(rec, node_id, **known); !st) return rollback(st.error());
    rec.replaced_node_state = **known;
  } else {
    // Reserve the new id in this transaction: a concurrent redeemer of another unbound
    // token for the same id now sees it as known.
    Stmt s(db_,
           "INSERT INTO nodes (node_id, tenant_id, state, enrolled_at_ms, last_seen_ms) "
           "VALUES (?, ?, ?, ?, ?)");
    s.Bind(1, node_id).Bind(2, rec.tenant_id).Bind(3, std::string(kNodeEnrolled));
    s.Bind(4, now_ms).Bind(5, now_ms);
    if (s.Step() != SQLITE_DONE) return rollback(DbError("reserve node id"));
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
  return InTransaction<void>([&]() -> Status {
    // The id ConsumeJoinToken reserved (a row without a certificate, no edge identity).
    Stmt d(db_,
           "DELETE FROM nodes WHERE cert_serial_hex = '' AND node_id IN "
           "(SELECT consumed_by FROM join_tokens WHERE token_hash = ?) AND node_id NOT IN "
           "(SELECT node_id FROM edge_nodes)");
    d.Bind(1, hash);
    if (d.Step() != SQLITE_DONE) return std::unexpected(DbError("release node id"));
    Stmt s(db_, "UPDATE join_tokens SET consumed_at_ms = 0, consumed_by = '' WHERE token_hash = ?");
    s.Bind(1, hash);
    if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("unconsume join token"));
    return OkStatus();
  });
}

Result<std::optional<std::string>> SqliteStore::KnownNodeStateLocked(const std::string& node_id) {
  {
    Stmt s(db_, "SELECT state FROM nodes WHERE node_id = ?");
    s.Bind(1, node_id);
    int rc = s.Step();
    if (rc == SQLITE_ROW) return std::optional<std::string>(s.Text(0));
    if (rc != SQLITE_DONE) return std::unexpected(DbError("read node"));
  }
  Stmt e(db_, "SELECT 1 FROM edge_nodes WHERE node_id = ?");
  e.Bind(1, node_id);
  int rc = e.Step();
  if (rc == SQLITE_ROW) return std::optional<std::string>("edge-enrolled");
  if (rc != SQLITE_DONE) return std::unexpected(DbError("read edge node"));
  return std::optional<std::string>();
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

Status SqliteStore::SetNodeState(const std::string& node_id, const std::string& state) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE nodes SET state = ? WHERE node_id = ?");
  s.Bind(1, state).Bind(2, node_id);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("set node state"));
  if (sqlite3_changes(db_) == 0) {
    return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" not found");
  }
  return OkStatus();
}

Result<std::optional<EdgeNodeRecord>> SqliteStore::GetEdgeNodeLocked(const std::string& node_id) {
  Stmt s(db_,
         (std::string("SELECT ") + kEdgeColumns + " FROM edge_nodes WHERE node_id = ?").c_str());
  s.Bind(1, node_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return std::optional<EdgeNodeRecord>(ReadEdgeNode(s));
  if (rc == SQLITE_DONE) return std::optional<EdgeNodeRecord>();
  return std::unexpected(DbError("get edge node"));
}

Status SqliteStore::InsertNodeTokenLocked(const NodeTokenRecord& t) {
  Stmt s(db_,
         "INSERT INTO node_tokens (jti, node_id, issued_at_ms, expires_at_ms, revoked_at_ms, "
         "revoke_reason, grace_until_ms) VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, t.jti).Bind(2, t.node_id).Bind(3, t.issued_at_ms).Bind(4, t.expires_at_ms);
  s.Bind(5, t.revoked_at_ms).Bind(6, t.revoke_reason).Bind(7, t.grace_until_ms);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("insert node token"));
  return OkStatus();
}

Result<EdgeNodeRecord> SqliteStore::EnrollEdgeNode(const EdgeEnrollment& e) {
  std::lock_guard lock(mu_);
  return InTransaction<EdgeNodeRecord>([&]() -> Result<EdgeNodeRecord> {
    JoinTokenRecord tok;
    {
      Stmt s(db_,
             (std::string("SELECT ") + kTokenColumns + " FROM join_tokens WHERE token_hash = ?")
                 .c_str());
      s.Bind(1, e.join_token_hash);
      int rc = s.Step();
      if (rc == SQLITE_DONE) {
        return MakeError(ErrorCode::kNotFound,
                         "enrollment_token is not a join token this controller issued");
      }
      if (rc != SQLITE_ROW) return std::unexpected(DbError("read join token"));
      tok = ReadToken(s);
    }
    const std::string what = "enrollment_token (join token " + tok.token_id + ")";
    if (tok.token_id != e.jti) {
      return MakeError(ErrorCode::kInvalidArgument,
                       what + ": jti \"" + e.jti + "\" does not match the issued token");
    }
    if (tok.revoked_at_ms != 0) {
      return MakeError(ErrorCode::kFailedPrecondition, what + " was revoked");
    }
    if (!tok.node_id.empty() && tok.node_id != e.node_id) {
      return MakeError(ErrorCode::kPermissionDenied, what + " is bound to node \"" + tok.node_id +
                                                         "\", not \"" + e.node_id + "\"");
    }
    if (tok.consumed_at_ms != 0 && tok.consumed_by != e.node_id) {
      return MakeError(
          ErrorCode::kPermissionDenied,
          what + " was redeemed by node \"" + tok.consumed_by + "\", not \"" + e.node_id + "\"");
    }
    const bool consumed_before = tok.consumed_at_ms != 0;
    if (tok.consumed_at_ms == 0) {
      if (e.now_ms >= tok.expires_at_ms) {
        return MakeError(ErrorCode::kFailedPrecondition, what + " expired");
      }
      Stmt s(db_,
             "UPDATE join_tokens SET consumed_at_ms = ?, consumed_by = ? "
             "WHERE token_hash = ? AND consumed_at_ms = 0 AND revoked_at_ms = 0");
      s.Bind(1, e.now_ms).Bind(2, e.node_id).Bind(3, e.join_token_hash);
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("consume join token"));
      if (sqlite3_changes(db_) != 1) {
        return MakeError(ErrorCode::kFailedPrecondition, what + " was used concurrently");
      }
    }
    {
      // Single winner: the jti is the primary key.
      Stmt s(db_,
             "INSERT INTO edge_enrollments (jti, token_hash, node_id, tenant_id, redeemed_at_ms) "
             "VALUES (?, ?, ?, ?, ?) ON CONFLICT (jti) DO NOTHING");
      s.Bind(1, e.jti).Bind(2, e.join_token_hash).Bind(3, e.node_id).Bind(4, e.tenant_id);
      s.Bind(5, e.now_ms);
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("redeem enrollment"));
      if (sqlite3_changes(db_) != 1) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         what + " was already redeemed for edge enrollment");
      }
    }
    auto existing = GetEdgeNodeLocked(e.node_id);
    if (!existing) return std::unexpected(existing.error());
    if (*existing && (*existing)->tenant_id != e.tenant_id) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "node \"" + e.node_id + "\" is bound to tenant \"" + (*existing)->tenant_id +
                           "\", the enrollment token is for tenant \"" + e.tenant_id + "\"");
    }
    // An existing identity is replaced only with an explicit operator step (--replace): an
    // edge identity, a revoked node, or a node id known before this token was redeemed for
    // it (a token its own ExchangeJoinToken redeemed passed the same check there).
    std::optional<std::string> state;
    {
      Stmt s(db_, "SELECT state FROM nodes WHERE node_id = ?");
      s.Bind(1, e.node_id);
      int rc = s.Step();
      if (rc == SQLITE_ROW) state = s.Text(0);
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return std::unexpected(DbError("read node"));
    }
    const bool redeemed_by_exchange = consumed_before;
    const bool replaces = existing->has_value() || (state && *state == kNodeRevoked) ||
                          (state && !redeemed_by_exchange);
    if (replaces) {
      if (auto st = ReenrollAllowed(tok, e.node_id, state ? *state : "edge-enrolled"); !st) {
        return std::unexpected(st.error());
      }
      Stmt t(db_,
             "UPDATE node_tokens SET revoked_at_ms = ?, revoke_reason = 'replaced', "
             "grace_until_ms = 0 WHERE node_id = ? AND (revoked_at_ms = 0 OR grace_until_ms > ?)");
      t.Bind(1, e.now_ms).Bind(2, e.node_id).Bind(3, e.now_ms);
      if (t.Step() != SQLITE_DONE) return std::unexpected(DbError("revoke replaced tokens"));
    }
    {
      // A replacement lifts a revocation: the operator asked for it with --replace.
      Stmt s(db_,
             replaces
                 ? "INSERT INTO nodes (node_id, tenant_id, state, enrolled_at_ms, last_seen_ms) "
                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET "
                   "tenant_id = excluded.tenant_id, last_seen_ms = excluded.last_seen_ms, "
                   "state = excluded.state"
                 : "INSERT INTO nodes (node_id, tenant_id, state, enrolled_at_ms, last_seen_ms) "
                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET "
                   "tenant_id = excluded.tenant_id, last_seen_ms = excluded.last_seen_ms");
      s.Bind(1, e.node_id).Bind(2, e.tenant_id).Bind(3, std::string(kNodeEnrolled));
      s.Bind(4, e.now_ms).Bind(5, e.now_ms);
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("bind node tenant"));
    }
    {
      Stmt s(db_,
             "INSERT INTO edge_nodes (node_id, tenant_id, public_key_hex, edge_enrolled_at_ms, "
             "enrollment_jti) VALUES (?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET "
             "tenant_id = excluded.tenant_id, public_key_hex = excluded.public_key_hex, "
             "prev_public_key_hex = '', prev_key_until_ms = 0, "
             "edge_enrolled_at_ms = excluded.edge_enrolled_at_ms, "
             "enrollment_jti = excluded.enrollment_jti");
      s.Bind(1, e.node_id).Bind(2, e.tenant_id).Bind(3, Hex(e.public_key)).Bind(4, e.now_ms);
      s.Bind(5, e.jti);
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("store edge node"));
    }
    if (auto st = InsertNodeTokenLocked(e.token); !st) return std::unexpected(st.error());
    auto rec = GetEdgeNodeLocked(e.node_id);
    if (!rec) return std::unexpected(rec.error());
    (*rec)->identity_replaced = replaces;
    return **rec;
  });
}

Result<std::optional<EdgeNodeRecord>> SqliteStore::GetEdgeNode(const std::string& node_id) {
  std::lock_guard lock(mu_);
  return GetEdgeNodeLocked(node_id);
}

Result<std::vector<EdgeNodeRecord>> SqliteStore::ListEdgeNodes() {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         (std::string("SELECT ") + kEdgeColumns + " FROM edge_nodes ORDER BY node_id").c_str());
  std::vector<EdgeNodeRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back(ReadEdgeNode(s));
  if (rc != SQLITE_DONE) return std::unexpected(DbError("list edge nodes"));
  return out;
}

Status SqliteStore::RecordHello(const std::string& node_id, const std::string& caps_json,
                                bool draining, int64_t now_ms) {
  std::lock_guard lock(mu_);
  return InTransaction<void>([&]() -> Status {
    Stmt e(db_,
           "UPDATE edge_nodes SET capabilities_json = ?, last_heartbeat_ms = ? WHERE node_id = ?");
    e.Bind(1, caps_json).Bind(2, now_ms).Bind(3, node_id);
    if (e.Step() != SQLITE_DONE) return std::unexpected(DbError("record hello"));
    if (sqlite3_changes(db_) == 0) {
      return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" is not edge-enrolled");
    }
    Stmt n(db_,
           "UPDATE nodes SET state = ?, last_seen_ms = ? WHERE node_id = ? AND state <> 'revoked'");
    n.Bind(1, std::string(draining ? kNodeDraining : kNodeHealthy))
        .Bind(2, now_ms)
        .Bind(3, node_id);
    if (n.Step() != SQLITE_DONE) return std::unexpected(DbError("record hello"));
    return OkStatus();
  });
}

Status SqliteStore::RecordHeartbeat(const std::string& node_id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  return InTransaction<void>([&]() -> Status {
    Stmt e(db_, "UPDATE edge_nodes SET last_heartbeat_ms = ? WHERE node_id = ?");
    e.Bind(1, now_ms).Bind(2, node_id);
    if (e.Step() != SQLITE_DONE) return std::unexpected(DbError("record heartbeat"));
    Stmt n(db_,
           "UPDATE nodes SET last_seen_ms = ?, state = CASE WHEN state = 'unhealthy' "
           "THEN 'healthy' ELSE state END WHERE node_id = ?");
    n.Bind(1, now_ms).Bind(2, node_id);
    if (n.Step() != SQLITE_DONE) return std::unexpected(DbError("record heartbeat"));
    return OkStatus();
  });
}

Status SqliteStore::UpdateCapabilities(const std::string& node_id, const std::string& caps_json,
                                       bool draining) {
  std::lock_guard lock(mu_);
  return InTransaction<void>([&]() -> Status {
    Stmt e(db_, "UPDATE edge_nodes SET capabilities_json = ? WHERE node_id = ?");
    e.Bind(1, caps_json).Bind(2, node_id);
    if (e.Step() != SQLITE_DONE) return std::unexpected(DbError("update capabilities"));
    Stmt n(db_,
           draining
               ? "UPDATE nodes SET state = 'draining' WHERE node_id = ? AND state <> 'revoked'"
               : "UPDATE nodes SET state = 'healthy' WHERE node_id = ? AND state = 'draining'");
    n.Bind(1, node_id);
    if (n.Step() != SQLITE_DONE) return std::unexpected(DbError("update capabilities"));
    return OkStatus();
  });
}

Status SqliteStore::SetConfigVersion(const std::string& node_id, const std::string& version) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE edge_nodes SET config_version = ? WHERE node_id = ?");
  s.Bind(1, version).Bind(2, node_id);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("set config version"));
  return OkStatus();
}

Result<std::vector<std::string>> SqliteStore::MarkStaleNodes(int64_t cutoff_ms) {
  std::lock_guard lock(mu_);
  return InTransaction<std::vector<std::string>>([&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> candidates, marked;
    {
      Stmt s(db_,
             "SELECT n.node_id FROM nodes n JOIN edge_nodes e ON e.node_id = n.node_id "
             "WHERE n.state IN ('healthy', 'draining') AND e.last_heartbeat_ms < ? "
             "ORDER BY n.node_id");
      s.Bind(1, cutoff_ms);
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW)
        candidates.push_back(s.Text(0));
      if (rc != SQLITE_DONE) return std::unexpected(DbError("find stale nodes"));
    }
    for (const auto& id : candidates) {
      Stmt u(db_,
             "UPDATE nodes SET state = 'unhealthy' WHERE node_id = ? "
             "AND state IN ('healthy', 'draining')");
      u.Bind(1, id);
      if (u.Step() != SQLITE_DONE) return std::unexpected(DbError("mark node unhealthy"));
      if (sqlite3_changes(db_) == 1) marked.push_back(id);
    }
    return marked;
  });
}

Status SqliteStore::RevokeNode(const std::string& node_id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  return InTransaction<void>([&]() -> Status {
    Stmt n(db_, "UPDATE nodes SET state = 'revoked' WHERE node_id = ?");
    n.Bind(1, node_id);
    if (n.Step() != SQLITE_DONE) return std::unexpected(DbError("revoke node"));
    if (sqlite3_changes(db_) == 0) {
      return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" not found");
    }
    Stmt t(db_,
           "UPDATE node_tokens SET revoked_at_ms = ?, revoke_reason = 'node revoked', "
           "grace_until_ms = 0 WHERE node_id = ? AND (revoked_at_ms = 0 OR grace_until_ms > ?)");
    t.Bind(1, now_ms).Bind(2, node_id).Bind(3, now_ms);
    if (t.Step() != SQLITE_DONE) return std::unexpected(DbError("revoke node tokens"));
    // Its registered keys go too: after a new bootstrap the node must edge-enroll again
    // with a new join token, never re-attest with the key that was revoked.
    Stmt k(db_,
           "UPDATE edge_nodes SET public_key_hex = '', prev_public_key_hex = '', "
           "prev_key_until_ms = 0 WHERE node_id = ?");
    k.Bind(1, node_id);
    if (k.Step() != SQLITE_DONE) return std::unexpected(DbError("revoke node keys"));
    return OkStatus();
  });
}

Status SqliteStore::InsertNodeToken(const NodeTokenRecord& token) {
  std::lock_guard lock(mu_);
  return InsertNodeTokenLocked(token);
}

Result<std::optional<NodeTokenRecord>> SqliteStore::GetNodeToken(const std::string& jti) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         (std::string("SELECT ") + kNodeTokenColumns + " FROM node_tokens WHERE jti = ?").c_str());
  s.Bind(1, jti);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return std::optional<NodeTokenRecord>(ReadNodeToken(s));
  if (rc == SQLITE_DONE) return std::optional<NodeTokenRecord>();
  return std::unexpected(DbError("get node token"));
}

Result<EdgeNodeRecord> SqliteStore::RotateEdgeKey(const KeyRotation& r) {
  std::lock_guard lock(mu_);
  return InTransaction<EdgeNodeRecord>([&]() -> Result<EdgeNodeRecord> {
    auto node = GetEdgeNodeLocked(r.node_id);
    if (!node) return std::unexpected(node.error());
    if (!*node) {
      return MakeError(ErrorCode::kNotFound, "node \"" + r.node_id + "\" is not edge-enrolled");
    }
    {
      Stmt s(db_,
             "INSERT INTO rotation_nonces (nonce_hex, node_id, seen_at_ms) VALUES (?, ?, ?) "
             "ON CONFLICT (nonce_hex) DO NOTHING");
      s.Bind(1, Hex(r.nonce)).Bind(2, r.node_id).Bind(3, r.now_ms);
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("record rotation nonce"));
      if (sqlite3_changes(db_) != 1) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "rotation nonce was already used (a replayed RotateEdgeKey request)");
      }
    }
    const std::string aborted = "a concurrent key rotation for node \"" + r.node_id +
                                "\" completed first; retry with the current key";
    if ((*node)->public_key != r.expected_public_key) {
      return MakeError(ErrorCode::kAborted, aborted);
    }
    if (r.new_public_key != r.expected_public_key) {
      Stmt s(db_,
             "UPDATE edge_nodes SET public_key_hex = ?, prev_public_key_hex = public_key_hex, "
             "prev_key_until_ms = ?, key_rotated_at_ms = ? "
             "WHERE node_id = ? AND public_key_hex = ?");
      s.Bind(1, Hex(r.new_public_key)).Bind(2, r.overlap_until_ms).Bind(3, r.now_ms);
      s.Bind(4, r.node_id).Bind(5, Hex(r.expected_public_key));
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("replace node key"));
      if (sqlite3_changes(db_) != 1) return MakeError(ErrorCode::kAborted, aborted);
    }
    {
      Stmt s(db_,
             "UPDATE node_tokens SET revoked_at_ms = ?, revoke_reason = 'rotated', "
             "grace_until_ms = ? WHERE jti = ? AND node_id = ? AND revoked_at_ms = 0");
      s.Bind(1, r.now_ms).Bind(2, r.overlap_until_ms).Bind(3, r.old_token_jti).Bind(4, r.node_id);
      if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("blacklist old token"));
      if (sqlite3_changes(db_) != 1) {
        return MakeError(ErrorCode::kAborted,
                         "the node security token was revoked by a "
                         "concurrent rotation; retry with the new token");
      }
    }
    if (auto st = InsertNodeTokenLocked(r.new_token); !st) return std::unexpected(st.error());
    auto rec = GetEdgeNodeLocked(r.node_id);
    if (!rec) return std::unexpected(rec.error());
    return **rec;
  });
}

Status SqliteStore::PruneExpired(int64_t cutoff_ms) {
  std::lock_guard lock(mu_);
  return InTransaction<void>([&]() -> Status {
    Stmt t(db_, "DELETE FROM node_tokens WHERE expires_at_ms < ?");
    t.Bind(1, cutoff_ms);
    if (t.Step() != SQLITE_DONE) return std::unexpected(DbError("prune node tokens"));
    Stmt n(db_, "DELETE FROM rotation_nonces WHERE seen_at_ms < ?");
    n.Bind(1, cutoff_ms);
    if (n.Step() != SQLITE_DONE) return std::unexpected(DbError("prune rotation nonces"));
    return OkStatus();
  });
}

Status SqliteStore::InsertCommand(const CommandRecord& c) {
  std::lock_guard lock(mu_);
  Stmt s(db_,
         "INSERT INTO commands (command_id, node_id, tool, args_json, security_context, "
         "deadline_ms, state, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
         "ON CONFLICT (command_id) DO NOTHING");
  s.Bind(1, c.command_id).Bind(2, c.node_id).Bind(3, c.tool).Bind(4, c.args_json);
  s.Bind(5, c.security_context).Bind(6, c.deadline_ms).Bind(7, c.state).Bind(8, c.created_at_ms);
  if (s.Step() != SQLITE_DONE) return std::unexpected(DbError("insert command"));
  if (sqlite3_changes(db_) != 1) {
    return MakeError(ErrorCode::kAlreadyExists, "command " + c.command_id + " already exists");
  }
  return OkStatus();
}

Result<bool> SqliteStore::CompleteCommand(const std::string& command_id, const std::string& node_id,
                                          const CommandOutcomeRecord& r, int64_t now_ms) {
  std::lock_guard lock(mu_);
  return InTransaction<bool>([&]() -> Result<bool> {
    {
      Stmt s(db_, "SELECT node_id FROM commands WHERE command_id = ?");
      s.Bind(1, command_id);
      int rc = s.Step();
      if (rc == SQLITE_DONE) {
        return MakeError(ErrorCode::kNotFound, "command " + command_id + " not found");
      }
      if (rc != SQLITE_ROW) return std::unexpected(DbError("read command"));
      if (s.Text(0) != node_id) {
        return MakeError(ErrorCode::kPermissionDenied, "command " + command_id +
                                                           " was sent to node \"" + s.Text(0) +
                                                           "\", not \"" + node_id + "\"");
      }
    }
    // Conditional: only the first result changes the row.
    Stmt u(db_,
           "UPDATE commands SET state = 'completed', completed_at_ms = ?, outcome = ?, "
           "exit_code = ?, error_code = ?, message = ?, payload_json = ?, duration_ms = ? "
           "WHERE command_id = ? AND state <> 'completed'");
    u.Bind(1, now_ms).Bind(2, r.outcome).Bind(3, static_cast<int64_t>(r.exit_code));
    u.Bind(4, r.error_code).Bind(5, r.message).Bind(6, r.payload_json).Bind(7, r.duration_ms);
    u.Bind(8, command_id);
    if (u.Step() != SQLITE_DONE) return std::unexpected(DbError("complete command"));
    return sqlite3_changes(db_) == 1;
  });
}

Result<std::optional<CommandRecord>> SqliteStore::GetCommand(const std::string& command_id) {
  std::lock_guard lock(mu_);
  Stmt s(
      db_,
      (std::string("SELECT ") + kCommandColumns + " FROM commands WHERE command_id = ?").c_str());
  s.Bind(1, command_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return std::optional<CommandRecord>(ReadCommand(s));
  if (rc == SQLITE_DONE) return std::optional<CommandRecord>();
  return std::unexpected(DbError("get command"));
}

Result<std::vector<CommandRecord>> SqliteStore::ListCommands(const std::string& node_id,
                                                             int limit) {
  std::lock_guard lock(mu_);
  if (limit <= 0) limit = 100;
  std::string sql = std::string("SELECT ") + kCommandColumns + " FROM commands";
  if (!node_id.empty()) sql += " WHERE node_id = ?";
  sql += " ORDER BY created_at_ms DESC, command_id DESC LIMIT ?";
  Stmt s(db_, sql.c_str());
  int i = 1;
  if (!node_id.empty()) s.Bind(i++, node_id);
  s.Bind(i, static_cast<int64_t>(limit));
  std::vector<CommandRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back(ReadCommand(s));
  if (rc != SQLITE_DONE) return std::unexpected(DbError("list commands"));
  return out;
}

Result<std::vector<CommandRecord>> SqliteStore::ListPendingCommands(const std::string& node_id,
                                                                    int64_t since_ms) {
  std::lock_guard lock(mu_);
  // commands_by_node(node_id, created_at_ms) serves the range; few rows are dispatched.
  Stmt s(db_, (std::string("SELECT ") + kCommandColumns +
               " FROM commands WHERE node_id = ? AND created_at_ms >= ? AND state = ?"
               " ORDER BY created_at_ms ASC, command_id ASC")
                  .c_str());
  s.Bind(1, node_id);
  s.Bind(2, since_ms);
  s.Bind(3, std::string(kCommandDispatched));
  std::vector<CommandRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back(ReadCommand(s));
  if (rc != SQLITE_DONE) return std::unexpected(DbError("list pending commands"));
  return out;
}

}  // namespace edge::controller
