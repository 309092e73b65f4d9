// SqliteStore: operator sessions and the usage their processes reported (wire.md §5.2, §5.5).
// Costs are stored as millionths (BIGINT) so sums are exact and the SQL stays portable.
#include <cmath>
#include <string>

#include "controller/sqlite_store.h"

namespace edge::controller {
namespace {

constexpr const char* kSessionColumns =
    "session_id, node_id, tenant_id, user_id, agent_name, workspace_path, status, "
    "start_command_id, limits_version, capabilities_version, pinned_tools_json, created_at_ms, "
    "last_activity_at_ms, ended_at_ms, exit_code, end_reason";

OperatorSessionRecord ReadSession(const SqlRow& s) {
  OperatorSessionRecord r{.session_id = s.Text(0),
                          .node_id = s.Text(1),
                          .tenant_id = s.Text(2),
                          .user_id = s.Text(3),
                          .agent_name = s.Text(4),
                          .workspace_path = s.Text(5),
                          .status = s.Text(6),
                          .start_command_id = s.Text(7),
                          .limits_version = s.Int(8),
                          .capabilities_version = s.Int(9),
                          .pinned_tools_json = s.Text(10),
                          .created_at_ms = s.Int(11),
                          .last_activity_at_ms = s.Int(12),
                          .ended_at_ms = s.Int(13)};
  if (!s.IsNull(14)) r.exit_code = static_cast<int32_t>(s.Int(14));
  r.end_reason = s.Text(15);
  return r;
}

}  // namespace

Status SqliteStore::UpsertSession(const OperatorSessionRecord& r) {
  return db_->Exec(
      std::string("INSERT OR REPLACE INTO operator_sessions (") + kSessionColumns +
          ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {r.session_id, r.node_id, r.tenant_id, r.user_id, r.agent_name, r.workspace_path, r.status,
       r.start_command_id, r.limits_version, r.capabilities_version, r.pinned_tools_json,
       r.created_at_ms, r.last_activity_at_ms, r.ended_at_ms,
       r.exit_code ? SqlParam(int64_t{*r.exit_code}) : SqlParam(nullptr), r.end_reason});
}

Result<std::optional<OperatorSessionRecord>> SqliteStore::GetSession(
    const std::string& session_id) {
  return ReadFirstRow(db_->Query(std::string("SELECT ") + kSessionColumns +
                                     " FROM operator_sessions WHERE session_id = ?",
                                 {session_id}),
                      ReadSession);
}

Result<std::vector<OperatorSessionRecord>> SqliteStore::ListSessions(const std::string& tenant_id,
                                                                     const std::string& user_id,
                                                                     const std::string& node_id,
                                                                     const std::string& status,
                                                                     int limit) {
  std::string sql =
      std::string("SELECT ") + kSessionColumns + " FROM operator_sessions WHERE tenant_id = ?";
  std::vector<SqlParam> params{tenant_id};
  if (!user_id.empty()) {
    sql += " AND user_id = ?";
    params.emplace_back(user_id);
  }
  if (!node_id.empty()) {
    sql += " AND node_id = ?";
    params.emplace_back(node_id);
  }
  if (!status.empty()) {
    sql += " AND status = ?";
    params.emplace_back(status);
  } else {
    sql += " AND status <> 'TERMINATED'";
  }
  sql += " ORDER BY created_at_ms DESC, session_id LIMIT ?";
  params.emplace_back(int64_t{limit > 0 ? limit : 100});
  return ReadRows(db_->Query(sql, params), ReadSession);
}

Result<std::vector<OperatorSessionRecord>> SqliteStore::ListOpenSessions() {
  return ReadRows(db_->Query(std::string("SELECT ") + kSessionColumns +
                             " FROM operator_sessions WHERE status <> 'TERMINATED' "
                             "ORDER BY created_at_ms"),
                  ReadSession);
}

Status SqliteStore::InsertUsage(const UsageRecord& u) {
  return db_->Exec(
      "INSERT INTO session_usage (node_id, session_id, at_ms, input_tokens, output_tokens, "
      "cost_micros, tool_invocations) VALUES (?, ?, ?, ?, ?, ?, ?)",
      {u.node_id, u.session_id, u.at_ms, u.input_tokens, u.output_tokens,
       static_cast<int64_t>(std::llround(u.estimated_cost * 1e6)), u.tool_invocations});
}

Result<NodeActivity> SqliteStore::GetNodeActivity(const std::string& node_id, int64_t since_ms,
                                                  int64_t until_ms) {
  NodeActivity a;
  auto usage = db_->Query(
      "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
      "COALESCE(SUM(cost_micros), 0), COALESCE(SUM(tool_invocations), 0) FROM session_usage "
      "WHERE node_id = ? AND at_ms >= ? AND at_ms < ?",
      {node_id, since_ms, until_ms});
  if (!usage) return std::unexpected(usage.error());
  if (!usage->empty()) {
    const SqlRow& r = usage->front();
    a.input_tokens = r.Int(0);
    a.output_tokens = r.Int(1);
    a.estimated_cost = static_cast<double>(r.Int(2)) / 1e6;
    a.session_tool_invocations = r.Int(3);
  }
  auto commands = db_->Query(
      "SELECT COUNT(*) FROM commands WHERE node_id = ? AND created_at_ms >= ? AND "
      "created_at_ms < ?",
      {node_id, since_ms, until_ms});
  if (!commands) return std::unexpected(commands.error());
  if (!commands->empty()) a.commands = commands->front().Int(0);
  // The latest failure: a command that did not end ok (or ended ok with a non-zero exit), or
  // a session that ended with an error reason.
  auto failed = db_->Query(
      "SELECT completed_at_ms, tool, outcome, exit_code, error_code, message FROM commands "
      "WHERE node_id = ? AND state = 'completed' AND (outcome <> 'ok' OR exit_code <> 0) "
      "AND completed_at_ms >= ? AND completed_at_ms < ? ORDER BY completed_at_ms DESC LIMIT 1",
      {node_id, since_ms, until_ms});
  if (!failed) return std::unexpected(failed.error());
  if (!failed->empty()) {
    const SqlRow& r = failed->front();
    a.last_error_at_ms = r.Int(0);
    const std::string outcome = r.Text(2);
    std::string what = r.Text(1) + ": ";
    if (outcome == "ok") {
      what += "exit code " + std::to_string(r.Int(3));
    } else {
      what += r.Text(4).empty() ? outcome : r.Text(4);
      if (!r.Text(5).empty()) what += " — " + r.Text(5);
    }
    a.last_error = what;
  }
  return a;
}

}  // namespace edge::controller
