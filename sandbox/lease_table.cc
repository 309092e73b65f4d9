#include "sandbox/lease_table.h"

namespace edge::sandbox {
namespace {

const std::vector<StateDb::Migration>& Migrations() {
  static const std::vector<StateDb::Migration> m = {
      {1,
       "CREATE TABLE leases ("
       " resource_id TEXT PRIMARY KEY,"
       " highest_generation INTEGER NOT NULL,"
       " holder_id TEXT,"  // NULL once released
       " generation INTEGER,"
       " expires_at_ms INTEGER);"
       "CREATE INDEX leases_expiry ON leases (expires_at_ms) WHERE holder_id IS NOT NULL;"},
  };
  return m;
}

std::string Quote(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

Error Rejected(std::string message) {
  return Error{ErrorCode::kLeaseRejected, std::move(message)};
}

// The rules that need no stored state and no clock.
Status CheckShape(const Lease* lease, std::string_view own_id, std::string_view resource_id) {
  if (lease == nullptr) {
    return std::unexpected(Rejected("lease is missing; resource " + Quote(resource_id) +
                                    " needs a lease for this call"));
  }
  if (lease->holder_id != own_id) {
    return std::unexpected(Rejected("lease.holder_id " + Quote(lease->holder_id) +
                                    " is not this agent (" + Quote(own_id) + ")"));
  }
  if (lease->resource_id.find_first_not_of(" \t\r\n") == std::string::npos) {
    return std::unexpected(Rejected("lease.resource_id " + Quote(lease->resource_id) +
                                    " is blank; it must name the resource"));
  }
  if (lease->resource_id != resource_id) {
    return std::unexpected(Rejected("lease.resource_id " + Quote(lease->resource_id) +
                                    " does not match the call's resource " + Quote(resource_id)));
  }
  if (lease->generation < 0) {
    return std::unexpected(Rejected("lease.generation " + std::to_string(lease->generation) +
                                    " for " + Quote(resource_id) + " is negative"));
  }
  return OkStatus();
}

Status CheckGeneration(const Lease& lease, int64_t highest) {
  if (lease.generation < highest) {
    return std::unexpected(Rejected("lease.generation " + std::to_string(lease.generation) +
                                    " for " + Quote(lease.resource_id) +
                                    " is lower than the highest accepted generation " +
                                    std::to_string(highest)));
  }
  return OkStatus();
}

constexpr std::string_view kSelect =
    "SELECT resource_id, highest_generation, holder_id, generation, expires_at_ms FROM leases"
    " WHERE resource_id = ?";

LeaseRecord FromRow(const SqlRow& row) {
  LeaseRecord rec;
  rec.resource_id = row.Text(0);
  rec.highest_generation = row.Int(1);
  if (!row.IsNull(2)) {
    rec.current = Lease{rec.resource_id, row.Text(2), row.Int(3), FromEpochMillis(row.Int(4))};
  }
  return rec;
}

}  // namespace

Result<std::unique_ptr<LeaseTable>> LeaseTable::Open(StateDb& db) {
  if (auto st = db.Migrate("lease_table", Migrations()); !st) return std::unexpected(st.error());
  return std::unique_ptr<LeaseTable>(new LeaseTable(db));
}

bool LeaseTable::Expired(const Lease& lease, const Clock& clock) const {
  {
    std::lock_guard lock(mu_);
    auto it = anchors_.find(lease.resource_id);
    if (it != anchors_.end() && it->second.generation == lease.generation &&
        ToEpochMillis(it->second.expires_at) == ToEpochMillis(lease.expires_at)) {
      return clock.Monotonic() >= it->second.deadline;
    }
  }
  return lease.expires_at <= clock.Now();
}

Status LeaseTable::CheckExpiry(const Lease& lease, const Clock& clock) const {
  if (!Expired(lease, clock)) return OkStatus();
  return std::unexpected(Rejected("lease for " + Quote(lease.resource_id) + " expired at " +
                                  std::to_string(ToEpochMillis(lease.expires_at)) + " ms (now " +
                                  std::to_string(ToEpochMillis(clock.Now())) +
                                  " ms); expires_at must be in the future"));
}

void LeaseTable::AnchorLease(const Lease& lease, const Clock& clock) {
  const auto left = lease.expires_at - clock.Now();
  std::lock_guard lock(mu_);
  auto it = anchors_.find(lease.resource_id);
  if (it != anchors_.end() && it->second.generation == lease.generation &&
      ToEpochMillis(it->second.expires_at) == ToEpochMillis(lease.expires_at)) {
    return;  // the same lease presented again keeps the deadline it was given first
  }
  anchors_[lease.resource_id] =
      Anchor{lease.generation, lease.expires_at,
             clock.Monotonic() + std::chrono::duration_cast<Clock::MonoTime::duration>(left)};
}

Status LeaseTable::Check(const Lease* lease, std::string_view own_id, std::string_view resource_id,
                         const Clock& clock) const {
  if (auto st = CheckShape(lease, own_id, resource_id); !st) return st;
  if (auto st = CheckExpiry(*lease, clock); !st) return st;
  auto rows = db_.Query("SELECT highest_generation FROM leases WHERE resource_id = ?",
                        {std::string(resource_id)});
  if (!rows) return std::unexpected(rows.error());
  return CheckGeneration(*lease, rows->empty() ? 0 : (*rows)[0].Int(0));
}

Status LeaseTable::Accept(const Lease* lease, std::string_view own_id, std::string_view resource_id,
                          const Clock& clock) {
  if (auto st = CheckShape(lease, own_id, resource_id); !st) return st;
  if (auto st = CheckExpiry(*lease, clock); !st) return st;
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = txn->Query("SELECT highest_generation FROM leases WHERE resource_id = ?",
                         {std::string(resource_id)});
  if (!rows) return std::unexpected(rows.error());
  if (auto st = CheckGeneration(*lease, rows->empty() ? 0 : (*rows)[0].Int(0)); !st) return st;
  if (auto st =
          txn->Exec("INSERT INTO leases (resource_id, highest_generation, holder_id, generation,"
                    " expires_at_ms) VALUES (?1, ?2, ?3, ?2, ?4)"
                    " ON CONFLICT (resource_id) DO UPDATE SET"
                    " highest_generation = MAX(highest_generation, excluded.highest_generation),"
                    " holder_id = excluded.holder_id, generation = excluded.generation,"
                    " expires_at_ms = excluded.expires_at_ms",
                    {lease->resource_id, lease->generation, lease->holder_id,
                     ToEpochMillis(lease->expires_at)});
      !st) {
    return st;
  }
  auto committed = txn->Commit();
  if (committed) AnchorLease(*lease, clock);
  return committed;
}

Status LeaseTable::Renew(const Lease& renewed, std::string_view own_id, const Clock& clock) {
  if (auto st = CheckShape(&renewed, own_id, renewed.resource_id); !st) return st;
  if (auto st = CheckExpiry(renewed, clock); !st) return st;
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = txn->Query(kSelect, {renewed.resource_id});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty() || (*rows)[0].IsNull(2)) {
    return std::unexpected(
        Rejected("resource " + Quote(renewed.resource_id) + " has no current lease to renew"));
  }
  LeaseRecord rec = FromRow((*rows)[0]);
  if (rec.current->holder_id != own_id) {
    return std::unexpected(Rejected("current lease of " + Quote(renewed.resource_id) +
                                    " is held by " + Quote(rec.current->holder_id) +
                                    ", not this agent (" + Quote(own_id) + ")"));
  }
  if (auto st = CheckGeneration(renewed, rec.highest_generation); !st) return st;
  if (auto st = txn->Exec(
          "UPDATE leases SET highest_generation = MAX(highest_generation, ?2), holder_id = ?3,"
          " generation = ?2, expires_at_ms = ?4 WHERE resource_id = ?1",
          {renewed.resource_id, renewed.generation, renewed.holder_id,
           ToEpochMillis(renewed.expires_at)});
      !st) {
    return st;
  }
  auto committed = txn->Commit();
  if (committed) AnchorLease(renewed, clock);
  return committed;
}

Result<LeaseRecord> LeaseTable::Get(std::string_view resource_id) const {
  auto rows = db_.Query(kSelect, {std::string(resource_id)});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) {
    return MakeError(ErrorCode::kNotFound,
                     "resource_id " + Quote(resource_id) + " has no lease record");
  }
  return FromRow((*rows)[0]);
}

Status LeaseTable::Release(std::string_view resource_id, std::string_view holder_id) {
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = txn->Query(kSelect, {std::string(resource_id)});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty() || (*rows)[0].IsNull(2)) {
    return MakeError(ErrorCode::kNotFound,
                     "resource_id " + Quote(resource_id) + " has no current lease to release");
  }
  LeaseRecord rec = FromRow((*rows)[0]);
  if (rec.current->holder_id != holder_id) {
    return std::unexpected(Rejected("lease of " + Quote(resource_id) + " is held by " +
                                    Quote(rec.current->holder_id) + ", not " + Quote(holder_id) +
                                    "; only the holder can release it"));
  }
  if (auto st =
          txn->Exec("UPDATE leases SET holder_id = NULL, generation = NULL, expires_at_ms = NULL"
                    " WHERE resource_id = ?",
                    {std::string(resource_id)});
      !st) {
    return st;
  }
  auto committed = txn->Commit();
  if (committed) {
    std::lock_guard lock(mu_);
    anchors_.erase(std::string(resource_id));
  }
  return committed;
}

Result<std::vector<Lease>> LeaseTable::ExpiredLeases(const Clock& clock) const {
  auto rows = db_.Query(
      "SELECT resource_id, highest_generation, holder_id, generation, expires_at_ms FROM leases"
      " WHERE holder_id IS NOT NULL ORDER BY expires_at_ms, resource_id");
  if (!rows) return std::unexpected(rows.error());
  std::vector<Lease> out;
  for (const auto& row : *rows) {
    Lease lease = *FromRow(row).current;
    if (Expired(lease, clock)) out.push_back(std::move(lease));
  }
  return out;
}

}  // namespace edge::sandbox
