#include "controller/sqlite_store.h"

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/hex.h"

namespace edge::controller {
namespace {

// The schema's component name in `schema_migrations`.
constexpr std::string_view kComponent = "controller";

// Ordered migrations of kComponent. Never edit a shipped one.
const std::vector<SqliteDb::Migration>& Migrations() {
  static const std::vector<SqliteDb::Migration> kMigrations = {
      {1, R"sql(
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
)sql"},
      // 2: the edge stream — registry, node tokens and their blacklist, rotation nonces,
      // commands and their results.
      {2, R"sql(
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
)sql"},
      // 3: a join token may re-enroll an existing node only when created with --replace.
      {3, R"sql(
ALTER TABLE join_tokens ADD COLUMN may_replace INTEGER NOT NULL DEFAULT 0;
)sql"},
      // 4: the worker control plane — worker leases and the workers' last heartbeats.
      {4, R"sql(
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
)sql"},
      // 5: the operator API's capabilities config_version (wire.md §5.2): +1 whenever a Hello
      // or CapabilityUpdate changes the node's tool list.
      {5, R"sql(
ALTER TABLE edge_nodes ADD COLUMN capabilities_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE edge_nodes ADD COLUMN capabilities_changed_ms BIGINT NOT NULL DEFAULT 0;
)sql"},
      // 6: the operator's node tags (never written by a node) and fleet commands: one
      // ordinary command per matching node (its part) under one fleet command id.
      {6, R"sql(
CREATE TABLE node_tags (
  node_id        TEXT NOT NULL,
  tag_key        TEXT NOT NULL,
  tag_value      TEXT NOT NULL,
  updated_at_ms  BIGINT NOT NULL,
  PRIMARY KEY (node_id, tag_key)
);
CREATE TABLE fleet_commands (
  fleet_id          TEXT PRIMARY KEY,
  tenant_id         TEXT NOT NULL DEFAULT '',
  created_by        TEXT NOT NULL DEFAULT '',
  selector          TEXT NOT NULL,
  tool              TEXT NOT NULL,
  args_json         TEXT NOT NULL,
  security_context  TEXT NOT NULL DEFAULT '',
  deadline_ms       BIGINT NOT NULL DEFAULT 0,
  created_at_ms     BIGINT NOT NULL,
  cancelled_at_ms   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX fleet_commands_by_time ON fleet_commands(created_at_ms);
CREATE TABLE fleet_parts (
  fleet_id       TEXT NOT NULL,
  node_id        TEXT NOT NULL,
  command_id     TEXT NOT NULL,
  error_code     TEXT NOT NULL DEFAULT '',
  error_message  TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (fleet_id, node_id)
);
)sql"},
      // 7: operator sessions (wire.md §5.2, §5.5) and the usage their processes reported.
      {7, R"sql(
CREATE TABLE operator_sessions (
  session_id            TEXT PRIMARY KEY,
  node_id               TEXT NOT NULL,
  tenant_id             TEXT NOT NULL,
  user_id               TEXT NOT NULL,
  agent_name            TEXT NOT NULL,
  workspace_path        TEXT NOT NULL DEFAULT '',
  status                TEXT NOT NULL,
  start_command_id      TEXT NOT NULL DEFAULT '',
  limits_version        BIGINT NOT NULL DEFAULT 0,
  capabilities_version  BIGINT NOT NULL DEFAULT 0,
  pinned_tools_json     TEXT NOT NULL DEFAULT '[]',
  created_at_ms         BIGINT NOT NULL,
  last_activity_at_ms   BIGINT NOT NULL,
  ended_at_ms           BIGINT NOT NULL DEFAULT 0,
  exit_code             BIGINT,
  end_reason            TEXT NOT NULL DEFAULT ''
);
CREATE INDEX operator_sessions_by_tenant ON operator_sessions(tenant_id, created_at_ms);
CREATE TABLE session_usage (
  node_id           TEXT NOT NULL,
  session_id        TEXT NOT NULL,
  at_ms             BIGINT NOT NULL,
  input_tokens      BIGINT NOT NULL,
  output_tokens     BIGINT NOT NULL,
  cost_micros       BIGINT NOT NULL,
  tool_invocations  BIGINT NOT NULL
);
CREATE INDEX session_usage_by_node ON session_usage(node_id, at_ms);
)sql"},
      // 8: a node's own edge_api.limits (PushConfig) and their config_version (wire.md §5.2).
      {8, R"sql(
ALTER TABLE edge_nodes ADD COLUMN limits_json TEXT NOT NULL DEFAULT '';
ALTER TABLE edge_nodes ADD COLUMN limits_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE edge_nodes ADD COLUMN limits_changed_ms BIGINT NOT NULL DEFAULT 0;
)sql"},
  };
  return kMigrations;
}

constexpr const char* kTokenColumns =
    "token_id, token_hash, node_id, tenant_id, created_at_ms, expires_at_ms, consumed_at_ms, "
    "consumed_by, revoked_at_ms, may_replace";

JoinTokenRecord ReadToken(const SqlRow& s) {
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

const std::string kSelectTokenByHash =
    std::string("SELECT ") + kTokenColumns + " FROM join_tokens WHERE token_hash = ?";

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

constexpr const char* kEdgeColumns =
    "node_id, tenant_id, public_key_hex, prev_public_key_hex, prev_key_until_ms, "
    "edge_enrolled_at_ms, enrollment_jti, key_rotated_at_ms, capabilities_json, "
    "last_heartbeat_ms, config_version, capabilities_version, capabilities_changed_ms, "
    "limits_json, limits_version, limits_changed_ms";

// Keys are stored as lowercase hex TEXT (portable); a value that is not hex reads as no key.
std::string KeyFromHex(const std::string& hex) {
  return HexDecode(hex).value_or(std::string());
}

EdgeNodeRecord ReadEdgeNode(const SqlRow& s) {
  EdgeNodeRecord e;
  e.node_id = s.Text(0);
  e.tenant_id = s.Text(1);
  e.public_key = KeyFromHex(s.Text(2));
  e.prev_public_key = KeyFromHex(s.Text(3));
  e.prev_key_until_ms = s.Int(4);
  e.edge_enrolled_at_ms = s.Int(5);
  e.enrollment_jti = s.Text(6);
  e.key_rotated_at_ms = s.Int(7);
  e.capabilities_json = s.Text(8);
  e.last_heartbeat_ms = s.Int(9);
  e.config_version = s.Text(10);
  e.capabilities_version = s.Int(11);
  e.capabilities_changed_ms = s.Int(12);
  e.limits_json = s.Text(13);
  e.limits_version = s.Int(14);
  e.limits_changed_ms = s.Int(15);
  return e;
}

// The `local_tools` of a capabilities JSON, in order ([] when absent or unreadable).
nlohmann::json ToolsOf(const std::string& caps_json) {
  auto j = nlohmann::json::parse(caps_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return nlohmann::json::array();
  auto it = j.find("local_tools");
  return it != j.end() && it->is_array() ? *it : nlohmann::json::array();
}

// Stores a node's new capabilities inside `txn`; their version rises when the tool list
// changed (and capabilities_changed_ms becomes `now_ms`). NOT_FOUND for a node that is not
// edge-enrolled.
Status StoreCapabilities(SqliteDb::Txn& txn, const std::string& node_id,
                         const std::string& caps_json, int64_t now_ms) {
  auto old = ReadFirstRow(
      txn.Query("SELECT capabilities_json FROM edge_nodes WHERE node_id = ?", {node_id}),
      [](const SqlRow& r) { return r.Text(0); });
  if (!old) return std::unexpected(old.error());
  if (!*old)
    return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" is not edge-enrolled");
  if (ToolsOf(**old) == ToolsOf(caps_json)) {
    return txn.Exec("UPDATE edge_nodes SET capabilities_json = ? WHERE node_id = ?",
                    {caps_json, node_id});
  }
  return txn.Exec(
      "UPDATE edge_nodes SET capabilities_json = ?, capabilities_version = capabilities_version "
      "+ 1, capabilities_changed_ms = ? WHERE node_id = ?",
      {caps_json, now_ms, node_id});
}

constexpr const char* kNodeTokenColumns =
    "jti, node_id, issued_at_ms, expires_at_ms, revoked_at_ms, revoke_reason, grace_until_ms";

NodeTokenRecord ReadNodeToken(const SqlRow& s) {
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

CommandRecord ReadCommand(const SqlRow& s) {
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

constexpr const char* kNodeColumns =
    "node_id, tenant_id, state, cert_serial_hex, enrolled_at_ms, last_seen_ms";

NodeRecord ReadNode(const SqlRow& s) {
  NodeRecord n;
  n.node_id = s.Text(0);
  n.tenant_id = s.Text(1);
  n.state = s.Text(2);
  n.cert_serial_hex = s.Text(3);
  n.enrolled_at_ms = s.Int(4);
  n.last_seen_ms = s.Int(5);
  return n;
}

// `q` is the SqliteDb or one of its transactions.
template <typename Q>
Result<std::optional<EdgeNodeRecord>> LoadEdgeNode(Q& q, const std::string& node_id) {
  return ReadFirstRow(
      q.Query(std::string("SELECT ") + kEdgeColumns + " FROM edge_nodes WHERE node_id = ?",
              {node_id}),
      ReadEdgeNode);
}

template <typename Q>
Status InsertNodeTokenRow(Q& q, const NodeTokenRecord& t) {
  return q.Exec(
      "INSERT INTO node_tokens (jti, node_id, issued_at_ms, expires_at_ms, revoked_at_ms, "
      "revoke_reason, grace_until_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
      {t.jti, t.node_id, t.issued_at_ms, t.expires_at_ms, t.revoked_at_ms, t.revoke_reason,
       t.grace_until_ms});
}

// The state of a node id the controller knows ("edge-enrolled" for an edge identity without
// a nodes row), nullopt for a new id.
Result<std::optional<std::string>> KnownNodeState(SqliteDb::Txn& txn, const std::string& node_id) {
  auto state = txn.Query("SELECT state FROM nodes WHERE node_id = ?", {node_id});
  if (!state) return std::unexpected(state.error());
  if (!state->empty()) return std::optional<std::string>((*state)[0].Text(0));
  auto edge = txn.Query("SELECT 1 FROM edge_nodes WHERE node_id = ?", {node_id});
  if (!edge) return std::unexpected(edge.error());
  if (!edge->empty()) return std::optional<std::string>("edge-enrolled");
  return std::optional<std::string>();
}

// A controller.db written before the common SqliteDb kept its version in a table of its own,
// `schema_version` (one row per applied migration, same numbering). Its versions move into
// `schema_migrations` once and the old table goes, so an older controller refuses the file
// (its first migration finds the tables present) instead of running on a schema it never saw.
Status AdoptLegacySchemaVersion(SqliteDb& db) {
  return db.Transact([](SqliteDb::Txn& txn) -> Status {
    auto legacy = txn.Query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    if (!legacy) return std::unexpected(legacy.error());
    if (legacy->empty()) return OkStatus();
    auto recorded =
        txn.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?",
                  {std::string(kComponent)});
    if (!recorded) return std::unexpected(recorded.error());
    auto old = txn.Query("SELECT COALESCE(MAX(version), 0) FROM schema_version");
    if (!old) return std::unexpected(old.error());
    if ((*recorded)[0].Int(0) == 0) {
      const int64_t now_ms = ToEpochMillis(SystemClock::Instance().Now());
      for (int64_t v = 1; v <= (*old)[0].Int(0); ++v) {
        if (auto st = txn.Exec("INSERT INTO schema_migrations (component, version, applied_at_ms) "
                               "VALUES (?, ?, ?)",
                               {std::string(kComponent), v, now_ms});
            !st) {
          return st;
        }
      }
    }
    return txn.Exec("DROP TABLE schema_version");
  });
}

}  // namespace

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  auto db = SqliteDb::OpenFile(path, {.name = "controller database", .owner = "controller"});
  if (!db) return std::unexpected(db.error());
  if (auto st = AdoptLegacySchemaVersion(**db); !st) return std::unexpected(st.error());
  if (auto st = (*db)->Migrate(kComponent, Migrations()); !st) {
    return std::unexpected(st.error());
  }
  auto version = (*db)->SchemaVersion(kComponent);
  if (!version) return std::unexpected(version.error());
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(*db)));
  store->schema_version_ = *version;
  return store;
}

Status SqliteStore::InsertJoinToken(const JoinTokenRecord& r) {
  return db_->Exec(
      "INSERT INTO join_tokens (token_id, token_hash, node_id, tenant_id, created_at_ms, "
      "expires_at_ms, may_replace) VALUES (?, ?, ?, ?, ?, ?, ?)",
      {r.token_id, r.token_hash, r.node_id, r.tenant_id, r.created_at_ms, r.expires_at_ms,
       int64_t{r.replace ? 1 : 0}});
}

Result<std::optional<JoinTokenRecord>> SqliteStore::FindJoinTokenByHash(const std::string& hash) {
  return ReadFirstRow(db_->Query(kSelectTokenByHash, {hash}), ReadToken);
}

Result<JoinTokenRecord> SqliteStore::ConsumeJoinToken(const std::string& hash,
                                                      const std::string& node_id, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<JoinTokenRecord> {
    auto found = ReadFirstRow(txn.Query(kSelectTokenByHash, {hash}), ReadToken);
    if (!found) return std::unexpected(found.error());
    if (!*found) return MakeError(ErrorCode::kNotFound, "join token not found");
    JoinTokenRecord rec = **found;
    if (rec.revoked_at_ms != 0) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "join token " + rec.token_id + " was revoked");
    }
    if (rec.consumed_at_ms != 0) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "join token " + rec.token_id + " was already used");
    }
    if (now_ms >= rec.expires_at_ms) {
      return MakeError(ErrorCode::kFailedPrecondition, "join token " + rec.token_id + " expired");
    }
    if (!rec.node_id.empty() && rec.node_id != node_id) {
      return MakeError(ErrorCode::kPermissionDenied, "join token " + rec.token_id +
                                                         " is bound to node \"" + rec.node_id +
                                                         "\", not \"" + node_id + "\"");
    }
    // Only now that the token is known to be valid: does the node id exist already?
    auto known = KnownNodeState(txn, node_id);
    if (!known) return std::unexpected(known.error());
    if (*known) {
      if (auto st = ReenrollAllowed(rec, node_id, **known); !st) {
        return std::unexpected(st.error());
      }
      rec.replaced_node_state = **known;
    } else {
      // Reserve the new id in this transaction: a concurrent redeemer of another unbound
      // token for the same id now sees it as known.
      if (auto st = txn.Exec(
              "INSERT INTO nodes (node_id, tenant_id, state, enrolled_at_ms, last_seen_ms) "
              "VALUES (?, ?, ?, ?, ?)",
              {node_id, rec.tenant_id, std::string(kNodeEnrolled), now_ms, now_ms});
          !st) {
        return std::unexpected(st.error());
      }
    }
    // Conditional: only an unconsumed row changes, so exactly one redeemer wins.
    if (auto st = txn.Exec("UPDATE join_tokens SET consumed_at_ms = ?, consumed_by = ? "
                           "WHERE token_hash = ? AND consumed_at_ms = 0 AND revoked_at_ms = 0",
                           {now_ms, node_id, hash});
        !st) {
      return std::unexpected(st.error());
    }
    if (txn.Changes() != 1) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "join token " + rec.token_id + " was already used");
    }
    rec.consumed_at_ms = now_ms;
    rec.consumed_by = node_id;
    return rec;
  });
}

Status SqliteStore::UnconsumeJoinToken(const std::string& hash) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    // The id ConsumeJoinToken reserved (a row without a certificate, no edge identity).
    if (auto st = txn.Exec(
            "DELETE FROM nodes WHERE cert_serial_hex = '' AND node_id IN "
            "(SELECT consumed_by FROM join_tokens WHERE token_hash = ?) AND node_id NOT IN "
            "(SELECT node_id FROM edge_nodes)",
            {hash});
        !st) {
      return st;
    }
    return txn.Exec(
        "UPDATE join_tokens SET consumed_at_ms = 0, consumed_by = '' WHERE token_hash = ?", {hash});
  });
}

Status SqliteStore::RevokeJoinToken(const std::string& token_id, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec(
            "UPDATE join_tokens SET revoked_at_ms = ? WHERE token_id = ? AND revoked_at_ms = 0",
            {now_ms, token_id});
        !st) {
      return st;
    }
    if (txn.Changes() != 0) return OkStatus();
    auto exists = txn.Query("SELECT 1 FROM join_tokens WHERE token_id = ?", {token_id});
    if (!exists) return std::unexpected(exists.error());
    if (exists->empty()) {
      return MakeError(ErrorCode::kNotFound, "join token \"" + token_id + "\" not found");
    }
    return OkStatus();
  });
}

Result<std::vector<JoinTokenRecord>> SqliteStore::ListJoinTokens(bool include_inactive,
                                                                 int64_t now_ms) {
  std::string sql = std::string("SELECT ") + kTokenColumns + " FROM join_tokens";
  std::vector<SqlParam> params;
  if (!include_inactive) {
    sql += " WHERE consumed_at_ms = 0 AND revoked_at_ms = 0 AND expires_at_ms > ?";
    params.emplace_back(now_ms);
  }
  sql += " ORDER BY created_at_ms, token_id";
  return ReadRows(db_->Query(sql, params), ReadToken);
}

Status SqliteStore::UpsertNode(const NodeRecord& n) {
  return db_->Exec(
      "INSERT INTO nodes (node_id, tenant_id, state, cert_serial_hex, enrolled_at_ms, "
      "last_seen_ms) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(node_id) DO UPDATE SET "
      "tenant_id = excluded.tenant_id, state = excluded.state, "
      "cert_serial_hex = excluded.cert_serial_hex, enrolled_at_ms = excluded.enrolled_at_ms, "
      "last_seen_ms = excluded.last_seen_ms",
      {n.node_id, n.tenant_id, n.state, n.cert_serial_hex, n.enrolled_at_ms, n.last_seen_ms});
}

Result<std::optional<NodeRecord>> SqliteStore::GetNode(const std::string& node_id) {
  return ReadFirstRow(
      db_->Query(std::string("SELECT ") + kNodeColumns + " FROM nodes WHERE node_id = ?",
                 {node_id}),
      ReadNode);
}

Result<std::vector<NodeRecord>> SqliteStore::ListNodes() {
  return ReadRows(
      db_->Query(std::string("SELECT ") + kNodeColumns + " FROM nodes ORDER BY node_id"), ReadNode);
}

Status SqliteStore::SetNodeState(const std::string& node_id, const std::string& state) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec("UPDATE nodes SET state = ? WHERE node_id = ?", {state, node_id}); !st) {
      return st;
    }
    if (txn.Changes() == 0) {
      return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" not found");
    }
    return OkStatus();
  });
}

Result<EdgeNodeRecord> SqliteStore::EnrollEdgeNode(const EdgeEnrollment& e) {
  auto out = db_->Transact([&](SqliteDb::Txn& txn) -> Result<EdgeNodeRecord> {
    auto found = ReadFirstRow(txn.Query(kSelectTokenByHash, {e.join_token_hash}), ReadToken);
    if (!found) return std::unexpected(found.error());
    if (!*found) {
      return MakeError(ErrorCode::kNotFound,
                       "enrollment_token is not a join token this controller issued");
    }
    const JoinTokenRecord& tok = **found;
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
      if (auto st = txn.Exec("UPDATE join_tokens SET consumed_at_ms = ?, consumed_by = ? "
                             "WHERE token_hash = ? AND consumed_at_ms = 0 AND revoked_at_ms = 0",
                             {e.now_ms, e.node_id, e.join_token_hash});
          !st) {
        return std::unexpected(st.error());
      }
      if (txn.Changes() != 1) {
        return MakeError(ErrorCode::kFailedPrecondition, what + " was used concurrently");
      }
    }
    // Single winner: the jti is the primary key.
    if (auto st = txn.Exec(
            "INSERT INTO edge_enrollments (jti, token_hash, node_id, tenant_id, redeemed_at_ms) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (jti) DO NOTHING",
            {e.jti, e.join_token_hash, e.node_id, e.tenant_id, e.now_ms});
        !st) {
      return std::unexpected(st.error());
    }
    if (txn.Changes() != 1) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       what + " was already redeemed for edge enrollment");
    }
    auto existing = LoadEdgeNode(txn, e.node_id);
    if (!existing) return std::unexpected(existing.error());
    if (*existing && (*existing)->tenant_id != e.tenant_id) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "node \"" + e.node_id + "\" is bound to tenant \"" + (*existing)->tenant_id +
                           "\", the enrollment token is for tenant \"" + e.tenant_id + "\"");
    }
    // An existing identity is replaced only with an explicit operator step (--replace): an
    // edge identity, a revoked node, or a node id known before this token was redeemed for
    // it (a token its own ExchangeJoinToken redeemed passed the same check there).
    auto node_state = txn.Query("SELECT state FROM nodes WHERE node_id = ?", {e.node_id});
    if (!node_state) return std::unexpected(node_state.error());
    std::optional<std::string> state;
    if (!node_state->empty()) state = (*node_state)[0].Text(0);
    const bool redeemed_by_exchange = consumed_before;
    const bool replaces = existing->has_value() || (state && *state == kNodeRevoked) ||
                          (state && !redeemed_by_exchange);
    if (replaces) {
      if (auto st = ReenrollAllowed(tok, e.node_id, state ? *state : "edge-enrolled"); !st) {
        return std::unexpected(st.error());
      }
      if (auto st = txn.Exec(
              "UPDATE node_tokens SET revoked_at_ms = ?, revoke_reason = 'replaced', "
              "grace_until_ms = 0 WHERE node_id = ? AND (revoked_at_ms = 0 OR grace_until_ms > ?)",
              {e.now_ms, e.node_id, e.now_ms});
          !st) {
        return std::unexpected(st.error());
      }
    }
    // A replacement lifts a revocation: the operator asked for it with --replace.
    if (auto st = txn.Exec(
            replaces
                ? "INSERT INTO nodes (node_id, tenant_id, state, enrolled_at_ms, last_seen_ms) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET "
                  "tenant_id = excluded.tenant_id, last_seen_ms = excluded.last_seen_ms, "
                  "state = excluded.state"
                : "INSERT INTO nodes (node_id, tenant_id, state, enrolled_at_ms, last_seen_ms) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET "
                  "tenant_id = excluded.tenant_id, last_seen_ms = excluded.last_seen_ms",
            {e.node_id, e.tenant_id, std::string(kNodeEnrolled), e.now_ms, e.now_ms});
        !st) {
      return std::unexpected(st.error());
    }
    if (auto st = txn.Exec(
            "INSERT INTO edge_nodes (node_id, tenant_id, public_key_hex, edge_enrolled_at_ms, "
            "enrollment_jti) VALUES (?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET "
            "tenant_id = excluded.tenant_id, public_key_hex = excluded.public_key_hex, "
            "prev_public_key_hex = '', prev_key_until_ms = 0, "
            "edge_enrolled_at_ms = excluded.edge_enrolled_at_ms, "
            "enrollment_jti = excluded.enrollment_jti",
            {e.node_id, e.tenant_id, HexEncode(e.public_key), e.now_ms, e.jti});
        !st) {
      return std::unexpected(st.error());
    }
    if (auto st = InsertNodeTokenRow(txn, e.token); !st) return std::unexpected(st.error());
    auto rec = LoadEdgeNode(txn, e.node_id);
    if (!rec) return std::unexpected(rec.error());
    (*rec)->identity_replaced = replaces;
    return **rec;
  });
  if (out) BumpAuthGeneration();
  return out;
}

Result<std::optional<EdgeNodeRecord>> SqliteStore::GetEdgeNode(const std::string& node_id) {
  return LoadEdgeNode(*db_, node_id);
}

Result<std::vector<EdgeNodeRecord>> SqliteStore::ListEdgeNodes() {
  return ReadRows(
      db_->Query(std::string("SELECT ") + kEdgeColumns + " FROM edge_nodes ORDER BY node_id"),
      ReadEdgeNode);
}

Status SqliteStore::RecordHello(const std::string& node_id, const std::string& caps_json,
                                bool draining, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = StoreCapabilities(txn, node_id, caps_json, now_ms); !st) return st;
    if (auto st = txn.Exec("UPDATE edge_nodes SET last_heartbeat_ms = ? WHERE node_id = ?",
                           {now_ms, node_id});
        !st) {
      return st;
    }
    return txn.Exec(
        "UPDATE nodes SET state = ?, last_seen_ms = ? WHERE node_id = ? AND state <> 'revoked'",
        {std::string(draining ? kNodeDraining : kNodeHealthy), now_ms, node_id});
  });
}

Status SqliteStore::RecordHeartbeat(const std::string& node_id, int64_t now_ms) {
  // Not waited on to reach the disk (issue 14: one fdatasync per heartbeat on gRPC's callback
  // threads was the limit of a 10 000-node fleet). A power cut can only make the stored time
  // older, which the node's next heartbeat (or its Hello on reconnect) writes again; the
  // monitor then judges by a stale time at worst, as it would for a late heartbeat.
  return db_->Transact(
      [&](SqliteDb::Txn& txn) -> Status {
        if (auto st = txn.Exec("UPDATE edge_nodes SET last_heartbeat_ms = ? WHERE node_id = ?",
                               {now_ms, node_id});
            !st) {
          return st;
        }
        return txn.Exec(
            "UPDATE nodes SET last_seen_ms = ?, state = CASE WHEN state = 'unhealthy' "
            "THEN 'healthy' ELSE state END WHERE node_id = ?",
            {now_ms, node_id});
      },
      Durability::kRelaxed);
}

Status SqliteStore::UpdateCapabilities(const std::string& node_id, const std::string& caps_json,
                                       bool draining, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = StoreCapabilities(txn, node_id, caps_json, now_ms); !st) {
      // An unknown node changes nothing, as before.
      return st.error().code == ErrorCode::kNotFound ? OkStatus() : st;
    }
    return txn.Exec(
        draining ? "UPDATE nodes SET state = 'draining' WHERE node_id = ? AND state <> 'revoked'"
                 : "UPDATE nodes SET state = 'healthy' WHERE node_id = ? AND state = 'draining'",
        {node_id});
  });
}

Status SqliteStore::SetConfigVersion(const std::string& node_id, const std::string& version) {
  return db_->Exec("UPDATE edge_nodes SET config_version = ? WHERE node_id = ?",
                   {version, node_id});
}

Result<int64_t> SqliteStore::SetEdgeNodeLimits(const std::string& node_id,
                                               const std::string& limits_json, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<int64_t> {
    auto old = ReadFirstRow(
        txn.Query("SELECT limits_json, limits_version FROM edge_nodes WHERE node_id = ?",
                  {node_id}),
        [](const SqlRow& r) { return std::make_pair(r.Text(0), r.Int(1)); });
    if (!old) return std::unexpected(old.error());
    if (!*old)
      return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" is not edge-enrolled");
    const auto& [json, version] = **old;
    if (json == limits_json) return version;
    if (auto st = txn.Exec(
            "UPDATE edge_nodes SET limits_json = ?, limits_version = ?, limits_changed_ms = ? "
            "WHERE node_id = ?",
            {limits_json, version + 1, now_ms, node_id});
        !st) {
      return std::unexpected(st.error());
    }
    return version + 1;
  });
}

Result<std::vector<std::string>> SqliteStore::MarkStaleNodes(int64_t cutoff_ms) {
  // Relaxed: a marking undone by a power cut is made again by the next sweep after the restart.
  return db_->Transact(
      [&](SqliteDb::Txn& txn) -> Result<std::vector<std::string>> {
        auto candidates = ReadRows(
            txn.Query("SELECT n.node_id FROM nodes n JOIN edge_nodes e ON e.node_id = n.node_id "
                      "WHERE n.state IN ('healthy', 'draining') AND e.last_heartbeat_ms < ? "
                      "ORDER BY n.node_id",
                      {cutoff_ms}),
            [](const SqlRow& row) { return row.Text(0); });
        if (!candidates) return std::unexpected(candidates.error());
        std::vector<std::string> marked;
        for (const auto& id : *candidates) {
          if (auto st = txn.Exec("UPDATE nodes SET state = 'unhealthy' WHERE node_id = ? "
                                 "AND state IN ('healthy', 'draining')",
                                 {id});
              !st) {
            return std::unexpected(st.error());
          }
          if (txn.Changes() == 1) marked.push_back(id);
        }
        return marked;
      },
      Durability::kRelaxed);
}

Status SqliteStore::RevokeNode(const std::string& node_id, int64_t now_ms) {
  auto out = db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec("UPDATE nodes SET state = 'revoked' WHERE node_id = ?", {node_id});
        !st) {
      return st;
    }
    if (txn.Changes() == 0) {
      return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" not found");
    }
    if (auto st = txn.Exec(
            "UPDATE node_tokens SET revoked_at_ms = ?, revoke_reason = 'node revoked', "
            "grace_until_ms = 0 WHERE node_id = ? AND (revoked_at_ms = 0 OR grace_until_ms > ?)",
            {now_ms, node_id, now_ms});
        !st) {
      return st;
    }
    // Its registered keys go too: after a new bootstrap the node must edge-enroll again
    // with a new join token, never re-attest with the key that was revoked.
    return txn.Exec(
        "UPDATE edge_nodes SET public_key_hex = '', prev_public_key_hex = '', "
        "prev_key_until_ms = 0 WHERE node_id = ?",
        {node_id});
  });
  if (out) BumpAuthGeneration();
  return out;
}

Status SqliteStore::InsertNodeToken(const NodeTokenRecord& token) {
  return InsertNodeTokenRow(*db_, token);
}

Result<std::optional<NodeTokenRecord>> SqliteStore::GetNodeToken(const std::string& jti) {
  return ReadFirstRow(
      db_->Query(std::string("SELECT ") + kNodeTokenColumns + " FROM node_tokens WHERE jti = ?",
                 {jti}),
      ReadNodeToken);
}

Result<EdgeNodeRecord> SqliteStore::RotateEdgeKey(const KeyRotation& r) {
  auto out = db_->Transact([&](SqliteDb::Txn& txn) -> Result<EdgeNodeRecord> {
    auto node = LoadEdgeNode(txn, r.node_id);
    if (!node) return std::unexpected(node.error());
    if (!*node) {
      return MakeError(ErrorCode::kNotFound, "node \"" + r.node_id + "\" is not edge-enrolled");
    }
    if (auto st = txn.Exec(
            "INSERT INTO rotation_nonces (nonce_hex, node_id, seen_at_ms) VALUES (?, ?, ?) "
            "ON CONFLICT (nonce_hex) DO NOTHING",
            {HexEncode(r.nonce), r.node_id, r.now_ms});
        !st) {
      return std::unexpected(st.error());
    }
    if (txn.Changes() != 1) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "rotation nonce was already used (a replayed RotateEdgeKey request)");
    }
    const std::string aborted = "a concurrent key rotation for node \"" + r.node_id +
                                "\" completed first; retry with the current key";
    if ((*node)->public_key != r.expected_public_key) {
      return MakeError(ErrorCode::kAborted, aborted);
    }
    if (r.new_public_key != r.expected_public_key) {
      if (auto st = txn.Exec(
              "UPDATE edge_nodes SET public_key_hex = ?, prev_public_key_hex = public_key_hex, "
              "prev_key_until_ms = ?, key_rotated_at_ms = ? "
              "WHERE node_id = ? AND public_key_hex = ?",
              {HexEncode(r.new_public_key), r.overlap_until_ms, r.now_ms, r.node_id,
               HexEncode(r.expected_public_key)});
          !st) {
        return std::unexpected(st.error());
      }
      if (txn.Changes() != 1) return MakeError(ErrorCode::kAborted, aborted);
    }
    if (auto st = txn.Exec("UPDATE node_tokens SET revoked_at_ms = ?, revoke_reason = 'rotated', "
                           "grace_until_ms = ? WHERE jti = ? AND node_id = ? AND revoked_at_ms = 0",
                           {r.now_ms, r.overlap_until_ms, r.old_token_jti, r.node_id});
        !st) {
      return std::unexpected(st.error());
    }
    if (txn.Changes() != 1) {
      return MakeError(ErrorCode::kAborted,
                       "the node security token was revoked by a "
                       "concurrent rotation; retry with the new token");
    }
    if (auto st = InsertNodeTokenRow(txn, r.new_token); !st) return std::unexpected(st.error());
    auto rec = LoadEdgeNode(txn, r.node_id);
    if (!rec) return std::unexpected(rec.error());
    return **rec;
  });
  if (out) BumpAuthGeneration();
  return out;
}

Status SqliteStore::PruneExpired(int64_t cutoff_ms) {
  bool pruned_tokens = false;
  // Relaxed: what a power cut brings back expired long ago (refused on its expiry anyway) and
  // goes again at the next sweep.
  auto out = db_->Transact(
      [&](SqliteDb::Txn& txn) -> Status {
        if (auto st = txn.Exec("DELETE FROM node_tokens WHERE expires_at_ms < ?", {cutoff_ms});
            !st) {
          return st;
        }
        pruned_tokens = txn.Changes() > 0;
        return txn.Exec("DELETE FROM rotation_nonces WHERE seen_at_ms < ?", {cutoff_ms});
      },
      Durability::kRelaxed);
  if (out && pruned_tokens) BumpAuthGeneration();
  return out;
}

namespace {
Status InsertCommandIn(SqliteDb::Txn& txn, const CommandRecord& c) {
  if (auto st =
          txn.Exec("INSERT INTO commands (command_id, node_id, tool, args_json, security_context, "
                   "deadline_ms, state, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT (command_id) DO NOTHING",
                   {c.command_id, c.node_id, c.tool, c.args_json, c.security_context, c.deadline_ms,
                    c.state, c.created_at_ms});
      !st) {
    return st;
  }
  if (txn.Changes() != 1) {
    return MakeError(ErrorCode::kAlreadyExists, "command " + c.command_id + " already exists");
  }
  return OkStatus();
}
}  // namespace

Status SqliteStore::InsertCommand(const CommandRecord& c) {
  return db_->Transact([&](SqliteDb::Txn& txn) { return InsertCommandIn(txn, c); });
}

Status SqliteStore::InsertCommands(const std::vector<CommandRecord>& commands) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    for (const auto& c : commands) {
      if (auto st = InsertCommandIn(txn, c); !st) return st;
    }
    return OkStatus();
  });
}

namespace {
// Inside `txn`: the first result of a command. The outer Result fails only for the store's own
// errors (which end the transaction); the inner one is this result's answer: true stored,
// false a duplicate, NOT_FOUND or PERMISSION_DENIED.
Result<Result<bool>> CompleteCommandIn(SqliteDb::Txn& txn, const CommandCompletion& c) {
  auto owner = txn.Query("SELECT node_id FROM commands WHERE command_id = ?", {c.command_id});
  if (!owner) return std::unexpected(owner.error());
  if (owner->empty()) {
    return Result<bool>(MakeError(ErrorCode::kNotFound, "command " + c.command_id + " not found"));
  }
  if (const std::string sent_to = (*owner)[0].Text(0); sent_to != c.node_id) {
    return Result<bool>(
        MakeError(ErrorCode::kPermissionDenied, "command " + c.command_id + " was sent to node \"" +
                                                    sent_to + "\", not \"" + c.node_id + "\""));
  }
  const CommandOutcomeRecord& r = c.result;
  // Conditional: only the first result changes the row.
  if (auto st =
          txn.Exec("UPDATE commands SET state = 'completed', completed_at_ms = ?, outcome = ?, "
                   "exit_code = ?, error_code = ?, message = ?, payload_json = ?, duration_ms = ? "
                   "WHERE command_id = ? AND state <> 'completed'",
                   {c.now_ms, r.outcome, static_cast<int64_t>(r.exit_code), r.error_code, r.message,
                    r.payload_json, r.duration_ms, c.command_id});
      !st) {
    return std::unexpected(st.error());
  }
  return Result<bool>(txn.Changes() == 1);
}
}  // namespace

Result<bool> SqliteStore::CompleteCommand(const std::string& command_id, const std::string& node_id,
                                          const CommandOutcomeRecord& r, int64_t now_ms) {
  const CommandCompletion c{command_id, node_id, r, now_ms};
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<bool> {
    auto answer = CompleteCommandIn(txn, c);
    if (!answer) return std::unexpected(answer.error());
    return *answer;
  });
}

std::vector<Result<bool>> SqliteStore::CompleteCommands(
    const std::vector<CommandCompletion>& results) {
  std::vector<Result<bool>> answers;
  auto st = db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    answers.clear();
    answers.reserve(results.size());
    for (const auto& c : results) {
      auto answer = CompleteCommandIn(txn, c);
      if (!answer) return std::unexpected(answer.error());
      answers.push_back(std::move(*answer));
    }
    return OkStatus();
  });
  if (st) return answers;
  // One statement's failure ended the batch: each result alone, so the others are stored
  // (a failing disk fails them all again, each with its error).
  return Store::CompleteCommands(results);
}

Result<std::optional<CommandRecord>> SqliteStore::GetCommand(const std::string& command_id) {
  return ReadFirstRow(
      db_->Query(std::string("SELECT ") + kCommandColumns + " FROM commands WHERE command_id = ?",
                 {command_id}),
      ReadCommand);
}

Result<std::vector<CommandRecord>> SqliteStore::ListCommands(const std::string& node_id,
                                                             int limit) {
  if (limit <= 0) limit = 100;
  std::string sql = std::string("SELECT ") + kCommandColumns + " FROM commands";
  std::vector<SqlParam> params;
  if (!node_id.empty()) {
    sql += " WHERE node_id = ?";
    params.emplace_back(node_id);
  }
  sql += " ORDER BY created_at_ms DESC, command_id DESC LIMIT ?";
  params.emplace_back(static_cast<int64_t>(limit));
  return ReadRows(db_->Query(sql, params), ReadCommand);
}

Result<std::vector<CommandRecord>> SqliteStore::ListPendingCommands(const std::string& node_id,
                                                                    int64_t since_ms) {
  // commands_by_node(node_id, created_at_ms) serves the range; few rows are dispatched.
  return ReadRows(db_->Query(std::string("SELECT ") + kCommandColumns +
                                 " FROM commands WHERE node_id = ? AND created_at_ms >= ? "
                                 "AND state = ? ORDER BY created_at_ms ASC, command_id ASC",
                             {node_id, since_ms, std::string(kCommandDispatched)}),
                  ReadCommand);
}

}  // namespace edge::controller
