// SqliteStore: the operator's node tags and fleet commands (schema version 6). Tags live in
// `node_tags` (one row per node and key), written only by UpdateNodeTags — nothing a node
// sends reaches this table. A fleet command is a `fleet_commands` row and one `fleet_parts`
// row per node (node id + command id); the parts' states are the `commands` rows themselves.
#include <string>

#include "controller/sqlite_store.h"

namespace edge::controller {
namespace {

// NOT_FOUND "node N not found" unless `node_id` has a nodes row.
template <typename Q>
Status CheckNodeExists(Q& q, const std::string& node_id) {
  auto rows = q.Query("SELECT 1 FROM nodes WHERE node_id = ?", {node_id});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return MakeError(ErrorCode::kNotFound, "node \"" + node_id + "\" not found");
  return OkStatus();
}

template <typename Q>
Result<NodeTags> LoadTags(Q& q, const std::string& node_id) {
  auto rows = q.Query("SELECT tag_key, tag_value FROM node_tags WHERE node_id = ? ORDER BY tag_key",
                      {node_id});
  if (!rows) return std::unexpected(rows.error());
  NodeTags tags;
  for (const auto& r : *rows)
    tags.emplace(r.Text(0), r.Text(1));
  return tags;
}

constexpr const char* kFleetColumns =
    "fleet_id, tenant_id, created_by, selector, tool, args_json, security_context, deadline_ms, "
    "created_at_ms, cancelled_at_ms";

FleetCommandRecord ReadFleet(const SqlRow& s) {
  return FleetCommandRecord{.fleet_id = s.Text(0),
                            .tenant_id = s.Text(1),
                            .created_by = s.Text(2),
                            .selector = s.Text(3),
                            .tool = s.Text(4),
                            .args_json = s.Text(5),
                            .security_context = s.Text(6),
                            .deadline_ms = s.Int(7),
                            .created_at_ms = s.Int(8),
                            .cancelled_at_ms = s.Int(9)};
}

template <typename Q>
Status LoadParts(Q& q, FleetCommandRecord& fleet) {
  auto parts = ReadRows(q.Query("SELECT node_id, command_id, error_code, error_message FROM "
                                "fleet_parts WHERE fleet_id = ? ORDER BY node_id",
                                {fleet.fleet_id}),
                        [](const SqlRow& r) {
                          return FleetPartRecord{.node_id = r.Text(0),
                                                 .command_id = r.Text(1),
                                                 .error_code = r.Text(2),
                                                 .error_message = r.Text(3)};
                        });
  if (!parts) return std::unexpected(parts.error());
  fleet.parts = std::move(*parts);
  return OkStatus();
}

}  // namespace

Result<NodeTags> SqliteStore::GetNodeTags(const std::string& node_id) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<NodeTags> {
    if (auto st = CheckNodeExists(txn, node_id); !st) return std::unexpected(st.error());
    return LoadTags(txn, node_id);
  });
}

Result<std::map<std::string, NodeTags>> SqliteStore::ListNodeTags() {
  auto rows = db_->Query("SELECT node_id, tag_key, tag_value FROM node_tags ORDER BY node_id");
  if (!rows) return std::unexpected(rows.error());
  std::map<std::string, NodeTags> out;
  for (const auto& r : *rows)
    out[r.Text(0)].emplace(r.Text(1), r.Text(2));
  return out;
}

Result<NodeTags> SqliteStore::UpdateNodeTags(const std::string& node_id, const NodeTags& set,
                                             const std::vector<TagRemoval>& remove, size_t max_tags,
                                             int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<NodeTags> {
    if (auto st = CheckNodeExists(txn, node_id); !st) return std::unexpected(st.error());
    auto tags = LoadTags(txn, node_id);
    if (!tags) return tags;
    for (const auto& r : remove) {
      auto it = tags->find(r.key);
      if (it == tags->end()) {
        return MakeError(ErrorCode::kNotFound,
                         "node \"" + node_id + "\" has no tag \"" + r.key + "\"");
      }
      if (r.value && *r.value != it->second) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         "tag \"" + r.key + "\" of node \"" + node_id + "\" is \"" + it->second +
                             "\", not \"" + *r.value + "\" (remove it as " + r.key +
                             " to remove it whatever its value)");
      }
      if (auto st =
              txn.Exec("DELETE FROM node_tags WHERE node_id = ? AND tag_key = ?", {node_id, r.key});
          !st) {
        return std::unexpected(st.error());
      }
      tags->erase(it);
    }
    for (const auto& [key, value] : set) {
      if (auto st =
              txn.Exec("INSERT INTO node_tags (node_id, tag_key, tag_value, updated_at_ms) "
                       "VALUES (?, ?, ?, ?) ON CONFLICT (node_id, tag_key) DO UPDATE SET "
                       "tag_value = excluded.tag_value, updated_at_ms = excluded.updated_at_ms",
                       {node_id, key, value, now_ms});
          !st) {
        return std::unexpected(st.error());
      }
      (*tags)[key] = value;
    }
    if (tags->size() > max_tags) {
      return MakeError(ErrorCode::kResourceExhausted,
                       "node \"" + node_id + "\" would have " + std::to_string(tags->size()) +
                           " tags; at most " + std::to_string(max_tags) +
                           " are allowed per node (remove some first)");
    }
    return tags;
  });
}

Status SqliteStore::InsertFleetCommand(const FleetCommandRecord& f) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec(
            "INSERT INTO fleet_commands (fleet_id, tenant_id, created_by, selector, tool, "
            "args_json, security_context, deadline_ms, created_at_ms, cancelled_at_ms) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fleet_id) DO NOTHING",
            {f.fleet_id, f.tenant_id, f.created_by, f.selector, f.tool, f.args_json,
             f.security_context, f.deadline_ms, f.created_at_ms, f.cancelled_at_ms});
        !st) {
      return st;
    }
    if (txn.Changes() != 1) {
      return MakeError(ErrorCode::kAlreadyExists,
                       "fleet command " + f.fleet_id + " already exists");
    }
    for (const auto& p : f.parts) {
      if (auto st = txn.Exec("INSERT INTO fleet_parts (fleet_id, node_id, command_id, error_code, "
                             "error_message) VALUES (?, ?, ?, ?, ?)",
                             {f.fleet_id, p.node_id, p.command_id, p.error_code, p.error_message});
          !st) {
        return st;
      }
    }
    return OkStatus();
  });
}

Status SqliteStore::SetFleetPartError(const std::string& fleet_id, const std::string& node_id,
                                      const std::string& code, const std::string& message) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    if (auto st = txn.Exec(
            "UPDATE fleet_parts SET error_code = ?, error_message = ? WHERE fleet_id = ? AND "
            "node_id = ?",
            {code, message, fleet_id, node_id});
        !st) {
      return st;
    }
    if (txn.Changes() != 1) {
      return MakeError(ErrorCode::kNotFound,
                       "fleet command " + fleet_id + " has no part for node \"" + node_id + "\"");
    }
    return OkStatus();
  });
}

Status SqliteStore::MarkFleetCancelled(const std::string& fleet_id, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    auto rows = txn.Query("SELECT 1 FROM fleet_commands WHERE fleet_id = ?", {fleet_id});
    if (!rows) return std::unexpected(rows.error());
    if (rows->empty()) {
      return MakeError(ErrorCode::kNotFound, "fleet command " + fleet_id + " not found");
    }
    return txn.Exec(
        "UPDATE fleet_commands SET cancelled_at_ms = ? WHERE fleet_id = ? AND cancelled_at_ms = 0",
        {now_ms, fleet_id});
  });
}

Result<std::optional<FleetCommandRecord>> SqliteStore::GetFleetCommand(
    const std::string& fleet_id) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<std::optional<FleetCommandRecord>> {
    auto fleet = ReadFirstRow(txn.Query(std::string("SELECT ") + kFleetColumns +
                                            " FROM fleet_commands WHERE fleet_id = ?",
                                        {fleet_id}),
                              ReadFleet);
    if (!fleet || !*fleet) return fleet;
    if (auto st = LoadParts(txn, **fleet); !st) return std::unexpected(st.error());
    return fleet;
  });
}

Result<std::vector<FleetCommandRecord>> SqliteStore::ListFleetCommands(int limit) {
  if (limit <= 0) limit = 100;
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<std::vector<FleetCommandRecord>> {
    auto list = ReadRows(txn.Query(std::string("SELECT ") + kFleetColumns +
                                       " FROM fleet_commands ORDER BY created_at_ms DESC, "
                                       "fleet_id DESC LIMIT ?",
                                   {static_cast<int64_t>(limit)}),
                         ReadFleet);
    if (!list) return list;
    for (auto& f : *list)
      if (auto st = LoadParts(txn, f); !st) return std::unexpected(st.error());
    return list;
  });
}

}  // namespace edge::controller
