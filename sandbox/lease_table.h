// LeaseTable: lease fencing (design.md §6, wire.md §4). For each resource it persists, in
// StateDb table `leases`, the highest generation this agent has accepted and the current
// lease. Mutating work calls Accept() before it starts; the executor polls ExpiredLeases()
// to cancel work whose lease ran out unrenewed. Every rejection is LEASE_REJECTED with a
// message naming the rule. Thread-safe; Accept/Renew are single transactions, so the
// highest generation wins under concurrency. Borrows the StateDb (must outlive it).
//
// Expiry and the local clock: a lease's expires_at is the control plane's wall time. When
// this table accepts (or renews) a lease it also anchors it to the monotonic clock — the
// deadline is "now (monotonic) + what was left by the wall clock" — and from then on that
// lease expires on its monotonic deadline, so a wall clock stepped an hour either way (NTP,
// a resumed VM) neither ends it early nor keeps it an hour too long. A lease with no anchor
// (one presented for the first time, or accepted before the agent restarted) is judged by
// the wall clock, the only reference there is.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "sandbox/sandbox_types.h"
#include "sandbox/state_db.h"

namespace edge::sandbox {

// What the table holds for one resource.
struct LeaseRecord {
  std::string resource_id;
  int64_t highest_generation = 0;
  std::optional<Lease> current;  // nullopt once released
};

class LeaseTable {
 public:
  // Creates the table through a StateDb migration.
  static Result<std::unique_ptr<LeaseTable>> Open(StateDb& db);

  // Rejects (LEASE_REJECTED): a missing lease, holder_id != own_id, a blank resource_id,
  // resource_id != the call's `resource_id`, an expired lease (expires_at <= now), a
  // negative generation, and a generation lower than the highest accepted for the
  // resource (the message names both numbers). Records nothing.
  Status Check(const Lease* lease, std::string_view own_id, std::string_view resource_id,
               const Clock& clock) const;
  // Check, then record the lease as current and its generation as the highest, atomically.
  Status Accept(const Lease* lease, std::string_view own_id, std::string_view resource_id,
                const Clock& clock);
  // A renewed lease (e.g. from the control plane) for a resource that has a current lease
  // held by `own_id`: Check, then it replaces the current lease (LEASE_REJECTED when there
  // is no current lease to renew).
  Status Renew(const Lease& renewed, std::string_view own_id, const Clock& clock);
  // NOT_FOUND when nothing was ever accepted for `resource_id`.
  Result<LeaseRecord> Get(std::string_view resource_id) const;
  // Drops the current lease (the highest generation stays). LEASE_REJECTED when it is held
  // by someone other than `holder_id`; NOT_FOUND when there is no current lease.
  Status Release(std::string_view resource_id, std::string_view holder_id);
  // Current leases that have expired (see above), oldest expiry first.
  Result<std::vector<Lease>> ExpiredLeases(const Clock& clock) const;

 private:
  // Where a lease accepted by this process expires on the monotonic clock.
  struct Anchor {
    int64_t generation = 0;
    Clock::WallTime expires_at;
    Clock::MonoTime deadline;
  };
  explicit LeaseTable(StateDb& db) : db_(db) {}
  bool Expired(const Lease& lease, const Clock& clock) const;
  Status CheckExpiry(const Lease& lease, const Clock& clock) const;
  void AnchorLease(const Lease& lease, const Clock& clock);
  StateDb& db_;
  mutable std::mutex mu_;
  std::map<std::string, Anchor, std::less<>> anchors_;  // by resource_id
};

}  // namespace edge::sandbox
