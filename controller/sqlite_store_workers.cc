// SqliteStore: worker leases and the workers' heartbeats (the worker contract's cluster-store
// semantics). The SQL is portable: a unique key on resource_id, a conditional upsert
// (INSERT … ON CONFLICT … DO UPDATE … WHERE) for acquire and conditional UPDATEs for renew
// and release, each inside BEGIN IMMEDIATE so concurrent callers serialize on the row.
#include <string>

#include "common/rfc3339.h"
#include "controller/sqlite_store.h"

namespace edge::controller {
namespace {

constexpr const char* kLeaseColumns =
    "resource_id, holder_id, generation, expires_at_ms, updated_at_ms";

LeaseRecord ReadLease(const SqlRow& s) {
  return LeaseRecord{.resource_id = s.Text(0),
                     .holder_id = s.Text(1),
                     .generation = s.Int(2),
                     .expires_at_ms = s.Int(3),
                     .updated_at_ms = s.Int(4)};
}

std::string At(int64_t ms) {
  return FormatRfc3339(Clock::WallTime(std::chrono::milliseconds(ms)));
}

// Why `holder_id` cannot renew or release `lease` (which it does not hold, or not in time).
Error LeaseRefusal(const LeaseRecord& lease, const std::string& holder_id, int64_t now_ms) {
  if (lease.holder_id.empty()) {
    return {ErrorCode::kAborted, "the lease on " + lease.resource_id +
                                     " was released (generation " +
                                     std::to_string(lease.generation) + ")"};
  }
  if (lease.holder_id != holder_id) {
    return {ErrorCode::kAborted, "the lease on " + lease.resource_id + " is held by " +
                                     lease.holder_id + ", not " + holder_id + " (until " +
                                     At(lease.expires_at_ms) + ")"};
  }
  if (lease.expires_at_ms <= now_ms) {
    return {ErrorCode::kFailedPrecondition,
            "the lease on " + lease.resource_id + " expired at " + At(lease.expires_at_ms)};
  }
  return {ErrorCode::kInternal, "lease on " + lease.resource_id + " changed concurrently"};
}

constexpr const char* kWorkerColumns =
    "worker_id, hostname, status, rpc_url, preview_domain, max_sandboxes, "
    "max_sandboxes_per_owner, providers_json, capabilities_json, remote_addr, first_seen_ms, "
    "last_heartbeat_ms, heartbeats";

WorkerRecord ReadWorker(const SqlRow& s) {
  return WorkerRecord{.worker_id = s.Text(0),
                      .hostname = s.Text(1),
                      .status = s.Text(2),
                      .rpc_url = s.Text(3),
                      .preview_domain = s.Text(4),
                      .max_sandboxes = s.Int(5),
                      .max_sandboxes_per_owner = s.Int(6),
                      .providers_json = s.Text(7),
                      .capabilities_json = s.Text(8),
                      .remote_addr = s.Text(9),
                      .first_seen_ms = s.Int(10),
                      .last_heartbeat_ms = s.Int(11),
                      .heartbeats = s.Int(12)};
}

template <typename Q>
Result<std::optional<LeaseRecord>> LoadLease(Q& q, const std::string& resource_id) {
  return ReadFirstRow(
      q.Query(std::string("SELECT ") + kLeaseColumns + " FROM worker_leases WHERE resource_id = ?",
              {resource_id}),
      ReadLease);
}

}  // namespace

Result<std::optional<LeaseRecord>> SqliteStore::GetLease(const std::string& resource_id) {
  return LoadLease(*db_, resource_id);
}

Result<LeaseRecord> SqliteStore::AcquireLease(const std::string& resource_id,
                                              const std::string& holder_id, int64_t ttl_ms,
                                              int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<LeaseRecord> {
    if (auto st = txn.Exec(
            "INSERT INTO worker_leases (resource_id, holder_id, generation, expires_at_ms, "
            "updated_at_ms) VALUES (?1, ?2, 1, ?3, ?4) "
            "ON CONFLICT (resource_id) DO UPDATE SET holder_id = excluded.holder_id, "
            "generation = worker_leases.generation + 1, expires_at_ms = excluded.expires_at_ms, "
            "updated_at_ms = excluded.updated_at_ms "
            "WHERE worker_leases.holder_id = excluded.holder_id OR worker_leases.holder_id = '' "
            "OR worker_leases.expires_at_ms <= ?4",
            {resource_id, holder_id, now_ms + ttl_ms, now_ms});
        !st) {
      return std::unexpected(st.error());
    }
    const bool won = txn.Changes() == 1;
    auto lease = LoadLease(txn, resource_id);
    if (!lease) return std::unexpected(lease.error());
    if (!*lease) {
      return MakeError(ErrorCode::kInternal,
                       "acquire lease on " + resource_id + ": the row vanished");
    }
    if (!won || (*lease)->holder_id != holder_id) {
      return std::unexpected(LeaseRefusal(**lease, holder_id, now_ms));
    }
    return **lease;
  });
}

Result<LeaseRecord> SqliteStore::RenewLease(const std::string& resource_id,
                                            const std::string& holder_id,
                                            std::optional<int64_t> expected_generation,
                                            int64_t ttl_ms, int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Result<LeaseRecord> {
    auto current = LoadLease(txn, resource_id);
    if (!current) return std::unexpected(current.error());
    if (!*current) {
      return MakeError(ErrorCode::kNotFound, "there is no lease on " + resource_id);
    }
    const LeaseRecord& l = **current;
    if (l.holder_id != holder_id || l.expires_at_ms <= now_ms) {
      return std::unexpected(LeaseRefusal(l, holder_id, now_ms));
    }
    if (expected_generation && *expected_generation != l.generation) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "the presented lease on " + resource_id + " has generation " +
                           std::to_string(*expected_generation) + ", the current one is " +
                           std::to_string(l.generation) + " (stale)");
    }
    if (auto st =
            txn.Exec("UPDATE worker_leases SET generation = generation + 1, expires_at_ms = ?, "
                     "updated_at_ms = ? WHERE resource_id = ? AND holder_id = ? AND generation = ?",
                     {now_ms + ttl_ms, now_ms, resource_id, holder_id, l.generation});
        !st) {
      return std::unexpected(st.error());
    }
    if (txn.Changes() != 1) return std::unexpected(LeaseRefusal(l, holder_id, now_ms));
    auto renewed = LoadLease(txn, resource_id);
    if (!renewed) return std::unexpected(renewed.error());
    return **renewed;
  });
}

Status SqliteStore::ReleaseLease(const std::string& resource_id, const std::string& holder_id,
                                 int64_t now_ms) {
  return db_->Transact([&](SqliteDb::Txn& txn) -> Status {
    auto current = LoadLease(txn, resource_id);
    if (!current) return std::unexpected(current.error());
    if (!*current) return MakeError(ErrorCode::kNotFound, "there is no lease on " + resource_id);
    if ((*current)->holder_id != holder_id) {
      return std::unexpected(LeaseRefusal(**current, holder_id, now_ms));
    }
    return txn.Exec(
        "UPDATE worker_leases SET holder_id = '', expires_at_ms = 0, updated_at_ms = ? "
        "WHERE resource_id = ? AND holder_id = ?",
        {now_ms, resource_id, holder_id});
  });
}

Status SqliteStore::RecordWorkerHeartbeat(const WorkerRecord& w) {
  return db_->Exec(
      "INSERT INTO workers (worker_id, hostname, status, rpc_url, preview_domain, "
      "max_sandboxes, max_sandboxes_per_owner, providers_json, capabilities_json, "
      "remote_addr, first_seen_ms, last_heartbeat_ms, heartbeats) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, 1) "
      "ON CONFLICT (worker_id) DO UPDATE SET hostname = excluded.hostname, "
      "status = excluded.status, rpc_url = excluded.rpc_url, "
      "preview_domain = excluded.preview_domain, max_sandboxes = excluded.max_sandboxes, "
      "max_sandboxes_per_owner = excluded.max_sandboxes_per_owner, "
      "providers_json = excluded.providers_json, "
      "capabilities_json = excluded.capabilities_json, remote_addr = excluded.remote_addr, "
      "last_heartbeat_ms = excluded.last_heartbeat_ms, "
      "heartbeats = workers.heartbeats + 1",
      {w.worker_id, w.hostname, w.status, w.rpc_url, w.preview_domain, w.max_sandboxes,
       w.max_sandboxes_per_owner, w.providers_json, w.capabilities_json, w.remote_addr,
       w.last_heartbeat_ms});
}

Result<std::optional<WorkerRecord>> SqliteStore::GetWorker(const std::string& worker_id) {
  return ReadFirstRow(
      db_->Query(std::string("SELECT ") + kWorkerColumns + " FROM workers WHERE worker_id = ?",
                 {worker_id}),
      ReadWorker);
}

Result<std::vector<WorkerRecord>> SqliteStore::ListWorkers() {
  return ReadRows(
      db_->Query(std::string("SELECT ") + kWorkerColumns + " FROM workers ORDER BY worker_id"),
      ReadWorker);
}

}  // namespace edge::controller
