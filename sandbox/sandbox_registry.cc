#include "sandbox/sandbox_registry.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "sandbox/file_service.h"
#include "sandbox/scoped_root.h"

namespace edge::sandbox {
namespace {

const std::vector<StateDb::Migration>& Migrations() {
  static const std::vector<StateDb::Migration> m = {
      {1,
       "CREATE TABLE sandboxes ("
       " id TEXT PRIMARY KEY,"
       " provider TEXT NOT NULL,"
       " runtime_id TEXT NOT NULL,"
       " state TEXT NOT NULL,"
       " owner TEXT NOT NULL,"
       " ttl_secs INTEGER NOT NULL,"
       " expires_at_ms INTEGER,"
       " metadata TEXT NOT NULL,"
       " created_at_ms INTEGER NOT NULL);"
       "CREATE INDEX sandboxes_state ON sandboxes (state);"},
  };
  return m;
}

constexpr std::string_view kColumns =
    "id, provider, runtime_id, state, owner, ttl_secs, expires_at_ms, metadata, created_at_ms";

std::string Quote(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

Error NotFound(std::string_view id) {
  return Error{ErrorCode::kNotFound, "sandbox_id " + Quote(id) + " is not a known sandbox"};
}

// Removes <sandboxes_dir>/<id> without following a symlink anywhere beneath it.
Status RemoveSandboxDir(const std::string& sandboxes_dir, std::string_view id) {
  auto root = ScopedRoot::Open(sandboxes_dir, ResolveMode::kWalk);
  if (!root) return std::unexpected(root.error());
  FileService files(std::move(*root));
  auto st = files.Delete(id, /*recursive=*/true);
  if (!st && st.error().code != ErrorCode::kNotFound) return st;
  return OkStatus();
}

}  // namespace

Status SandboxRegistry::ValidateId(std::string_view id) {
  auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sandbox_id " + Quote(id) + " " + std::string(why) +
                         "; it must match [A-Za-z0-9._-]{1,64} and not be \".\" or \"..\"");
  };
  if (id.empty()) return bad("is empty");
  if (id.size() > 64) return bad("is longer than 64 characters");
  for (char c : id) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return bad("contains a character outside the set");
  }
  if (id == "." || id == "..") return bad("names a directory link");
  return OkStatus();
}

Result<std::unique_ptr<SandboxRegistry>> SandboxRegistry::Open(StateDb& db, Clock& clock,
                                                               Options options) {
  if (options.sandboxes_dir.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sandboxes_dir is empty; sandboxes need a directory for their workspaces");
  }
  if (options.max_sandboxes == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "max_sandboxes 0 must be at least 1");
  }
  if (auto st = MakeDirs(options.sandboxes_dir, 0700); !st) return std::unexpected(st.error());
  if (auto st = db.Migrate("sandbox_registry", Migrations()); !st) {
    return std::unexpected(st.error());
  }
  return std::unique_ptr<SandboxRegistry>(new SandboxRegistry(db, clock, std::move(options)));
}

std::string SandboxRegistry::SandboxDir(std::string_view id) const {
  return options_.sandboxes_dir + "/" + std::string(id);
}

std::string SandboxRegistry::RootDir(std::string_view id) const {
  return SandboxDir(id) + "/root";
}

SandboxInfo SandboxRegistry::FromRow(const SqlRow& row) const {
  SandboxInfo info;
  info.id = row.Text(0);
  info.provider = row.Text(1);
  info.runtime_id = row.Text(2);
  info.state = ParseSandboxState(row.Text(3)).value_or(SandboxState::kUnhealthy);
  info.owner = row.Text(4);
  info.ttl = std::chrono::seconds(row.Int(5));
  if (!row.IsNull(6)) info.expires_at = FromEpochMillis(row.Int(6));
  try {
    auto j = nlohmann::json::parse(row.Text(7));
    for (auto& [k, v] : j.items()) {
      if (v.is_string()) info.metadata[k] = v.get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
    // A row this code wrote always parses; anything else leaves metadata empty.
  }
  info.created_at = FromEpochMillis(row.Int(8));
  info.root_dir = RootDir(info.id);
  return info;
}

Result<SandboxInfo> SandboxRegistry::Spawn(const SpawnRequest& req) {
  if (auto st = ValidateId(req.id); !st) return std::unexpected(st.error());
  if (req.ttl.count() < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "ttl " + std::to_string(req.ttl.count()) +
                                                      "s of sandbox " + Quote(req.id) +
                                                      " is negative; use 0 for no expiry");
  }
  // spawn_mu_ serializes every change of a sandbox's existence (Spawn, Destroy), so the checks
  // below still hold at the INSERT. No transaction is open meanwhile: the directory work can
  // take long (a leftover tree), and a transaction would hold the agent's one connection —
  // every command's journal row and result — for all of it.
  std::lock_guard lock(spawn_mu_);
  auto existing = db_.Query("SELECT state FROM sandboxes WHERE id = ?", {req.id});
  if (!existing) return std::unexpected(existing.error());
  if (!existing->empty() && (*existing)[0].Text(0) != SandboxStateName(SandboxState::kDestroyed)) {
    return MakeError(
        ErrorCode::kAlreadyExists,
        "sandbox_id " + Quote(req.id) + " already exists in state " + (*existing)[0].Text(0));
  }
  auto count = db_.Query("SELECT COUNT(*) FROM sandboxes WHERE state != ?",
                         {std::string(SandboxStateName(SandboxState::kDestroyed))});
  if (!count) return std::unexpected(count.error());
  if (static_cast<size_t>((*count)[0].Int(0)) >= options_.max_sandboxes) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "max_sandboxes (" + std::to_string(options_.max_sandboxes) +
                         ") reached; destroy a sandbox before spawning " + Quote(req.id));
  }
  SandboxInfo info;
  info.id = req.id;
  info.provider = req.provider;
  info.runtime_id = req.runtime_id;
  info.state = SandboxState::kRunning;
  info.owner = req.owner;
  info.ttl = req.ttl;
  info.metadata = req.metadata;
  info.created_at = clock_.Now();
  if (req.ttl.count() > 0) info.expires_at = info.created_at + req.ttl;
  info.root_dir = RootDir(req.id);
  // Truncate to what the row keeps, so the returned record equals what Get() reads back.
  info.created_at = FromEpochMillis(ToEpochMillis(info.created_at));
  if (info.expires_at) info.expires_at = FromEpochMillis(ToEpochMillis(*info.expires_at));

  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : req.metadata)
    meta[k] = v;
  std::string meta_text;
  try {
    meta_text = meta.dump();
  } catch (const nlohmann::json::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "metadata of sandbox " + Quote(req.id) + " is not valid UTF-8: " + e.what());
  }
  // A workspace left by an earlier sandbox of the same id (or a crash) is not inherited.
  if (auto st = RemoveSandboxDir(options_.sandboxes_dir, req.id); !st) {
    return std::unexpected(st.error());
  }
  if (auto st = MakeDirs(info.root_dir, 0700); !st) return std::unexpected(st.error());
  ::chmod(SandboxDir(req.id).c_str(), 0700);
  auto st =
      db_.Exec("INSERT OR REPLACE INTO sandboxes (" + std::string(kColumns) +
                   ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               {info.id, info.provider, info.runtime_id, std::string(SandboxStateName(info.state)),
                info.owner, static_cast<int64_t>(info.ttl.count()),
                info.expires_at ? SqlParam(ToEpochMillis(*info.expires_at)) : SqlParam(nullptr),
                meta_text, ToEpochMillis(info.created_at)});
  if (!st) {
    (void)RemoveSandboxDir(options_.sandboxes_dir, req.id);
    return std::unexpected(st.error());
  }
  return info;
}

Result<SandboxInfo> SandboxRegistry::Destroy(std::string_view id) {
  if (auto st = ValidateId(id); !st) return std::unexpected(st.error());
  // Under spawn_mu_, without a transaction, as Spawn: the tree's removal can take long.
  std::lock_guard lock(spawn_mu_);
  auto rows = db_.Query("SELECT " + std::string(kColumns) + " FROM sandboxes WHERE id = ?",
                        {std::string(id)});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::unexpected(NotFound(id));
  SandboxInfo info = FromRow((*rows)[0]);
  if (info.state != SandboxState::kDestroyed) {
    // The directory goes first: a failure or a crash halfway leaves the record as it was, and
    // the next Destroy finishes the removal.
    if (auto st = RemoveSandboxDir(options_.sandboxes_dir, id); !st) {
      return std::unexpected(st.error());
    }
    info.state = SandboxState::kDestroyed;
    if (auto st = db_.Exec("UPDATE sandboxes SET state = ? WHERE id = ?",
                           {std::string(SandboxStateName(info.state)), std::string(id)});
        !st) {
      return std::unexpected(st.error());
    }
  }
  return info;
}

Result<SandboxInfo> SandboxRegistry::Get(std::string_view id) const {
  if (auto st = ValidateId(id); !st) return std::unexpected(st.error());
  auto rows = db_.Query("SELECT " + std::string(kColumns) + " FROM sandboxes WHERE id = ?",
                        {std::string(id)});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::unexpected(NotFound(id));
  return FromRow((*rows)[0]);
}

Result<std::vector<SandboxInfo>> SandboxRegistry::List(bool include_destroyed) const {
  auto rows = db_.Query(
      "SELECT " + std::string(kColumns) + " FROM sandboxes WHERE state != ? OR ? ORDER BY id",
      {std::string(SandboxStateName(SandboxState::kDestroyed)),
       static_cast<int64_t>(include_destroyed ? 1 : 0)});
  if (!rows) return std::unexpected(rows.error());
  std::vector<SandboxInfo> out;
  for (const auto& row : *rows)
    out.push_back(FromRow(row));
  return out;
}

Status SandboxRegistry::SetState(std::string_view id, SandboxState state) {
  if (auto st = ValidateId(id); !st) return st;
  if (state == SandboxState::kDestroyed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "state \"destroyed\" for sandbox " + Quote(id) +
                         " is set by Destroy, which also removes the workspace");
  }
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = txn->Query("SELECT state FROM sandboxes WHERE id = ?", {std::string(id)});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::unexpected(NotFound(id));
  if ((*rows)[0].Text(0) == SandboxStateName(SandboxState::kDestroyed)) {
    return MakeError(ErrorCode::kFailedPrecondition, "sandbox " + Quote(id) +
                                                         " is destroyed; its state cannot become " +
                                                         std::string(SandboxStateName(state)));
  }
  if (auto st = txn->Exec("UPDATE sandboxes SET state = ? WHERE id = ?",
                          {std::string(SandboxStateName(state)), std::string(id)});
      !st) {
    return st;
  }
  return txn->Commit();
}

Status SandboxRegistry::SetRuntimeId(std::string_view id, std::string_view runtime_id) {
  if (auto st = ValidateId(id); !st) return st;
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  if (auto st = txn->Exec("UPDATE sandboxes SET runtime_id = ? WHERE id = ? AND state != ?",
                          {std::string(runtime_id), std::string(id),
                           std::string(SandboxStateName(SandboxState::kDestroyed))});
      !st) {
    return st;
  }
  if (txn->Changes() == 0) {
    auto rows = txn->Query("SELECT 1 FROM sandboxes WHERE id = ?", {std::string(id)});
    if (!rows) return std::unexpected(rows.error());
    if (rows->empty()) return std::unexpected(NotFound(id));
    return MakeError(ErrorCode::kFailedPrecondition,
                     "sandbox " + Quote(id) + " is destroyed; its runtime_id cannot change");
  }
  return txn->Commit();
}

Result<std::vector<SandboxInfo>> SandboxRegistry::Expired(Clock::WallTime now) const {
  auto rows =
      db_.Query("SELECT " + std::string(kColumns) +
                    " FROM sandboxes WHERE state != ? AND expires_at_ms IS NOT NULL"
                    " AND expires_at_ms <= ? ORDER BY expires_at_ms, id",
                {std::string(SandboxStateName(SandboxState::kDestroyed)), ToEpochMillis(now)});
  if (!rows) return std::unexpected(rows.error());
  std::vector<SandboxInfo> out;
  for (const auto& row : *rows)
    out.push_back(FromRow(row));
  return out;
}

}  // namespace edge::sandbox
