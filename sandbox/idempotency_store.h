// IdempotencyStore: remembers the result of each command_id the agent has run (design.md
// §9), so a repeated command returns its stored result instead of running twice. Results
// are opaque bytes serialized by the caller. The window is bounded by entry count and age
// (oldest evicted first); entries persist in StateDb table `idempotency` across restarts.
// Thread-safe. Borrows the StateDb and the Clock (both must outlive it).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"
#include "sandbox/state_db.h"

namespace edge::sandbox {

class IdempotencyStore {
 public:
  struct Options {
    size_t max_entries = 10000;
    std::chrono::seconds max_age{24 * 3600};
    size_t max_result_bytes = 16u << 20;
  };

  // Creates the table through a StateDb migration. INVALID_ARGUMENT for a zero bound.
  static Result<std::unique_ptr<IdempotencyStore>> Open(StateDb& db, Clock& clock, Options options);
  static Result<std::unique_ptr<IdempotencyStore>> Open(StateDb& db, Clock& clock) {
    return Open(db, clock, Options{});
  }

  // The stored result, or nullopt when `command_id` is unknown or older than max_age.
  // INVALID_ARGUMENT for a blank or over-long (> 256 bytes) command_id.
  Result<std::optional<std::string>> Lookup(std::string_view command_id) const;
  // Stores `result` for `command_id` and evicts what falls outside the window.
  // ALREADY_EXISTS when the id already has a result (the first one is kept);
  // RESOURCE_EXHAUSTED when `result` is larger than max_result_bytes. kRelaxed returns before
  // the disk has it: only for a caller whose next synced write to the same database makes it
  // durable (the WAL is synced as a whole and replayed as a prefix).
  Status Record(std::string_view command_id, std::string_view result,
                Durability durability = Durability::kSynced);
  // Removes entries outside the window; returns how many.
  Result<size_t> Prune();
  Result<size_t> Size() const;

 private:
  IdempotencyStore(StateDb& db, Clock& clock, Options options)
      : db_(db), clock_(clock), options_(options) {}
  StateDb& db_;
  Clock& clock_;
  Options options_;
};

}  // namespace edge::sandbox
