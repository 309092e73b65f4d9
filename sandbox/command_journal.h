// CommandJournal: the commands the executor has admitted and not yet finished, kept in the
// agent's StateDb (table `command_journal`) so that a command cut short by the agent's death
// (kill -9, a crash, power loss) still gets exactly one terminal result when the agent starts
// again: the Executor turns each row left behind into an AGENT_RESTARTED result (issue 16).
// A row is written when a command with a command_id is admitted and removed once its result
// is stored for idempotency. Each admission has its own number, greater than any row's left
// by an earlier process, and a row is removed only by the admission that wrote it: when a
// command's id is admitted again while its first run is ending (its result could not be
// stored, so the repeat runs it again), the first run's removal leaves the second's row.
// Thread-safe (the StateDb serialises); borrows the StateDb.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "sandbox/state_db.h"

namespace edge::sandbox {

class CommandJournal {
 public:
  struct Entry {
    std::string command_id;
    std::string tool;
    std::string door;  // the admitting door's name ("edge", "worker", "compute"; "" = none)
    int64_t admitted_at_ms = 0;
    int64_t admission = 0;  // which admission wrote the row (Admitted's answer)
  };

  // Creates the table through a StateDb migration.
  static Result<std::unique_ptr<CommandJournal>> Open(StateDb& db);

  // Records an admitted command (a repeat of the same id replaces the row) under a new
  // admission number, which it returns (`entry.admission` is not read). kRelaxed: the caller
  // waits for the disk itself (StateDb::Sync) before the command starts.
  Result<int64_t> Admitted(const Entry& entry, Durability durability = Durability::kSynced);
  // Forgets the command `command_id` as admission `admission` recorded it, once its result is
  // stored and delivered to its door; a row of a later admission of the same id stays. Not
  // waited on to reach the disk (Durability::kRelaxed): should a power loss undo it, the row
  // comes back at the next start and the command's stored result (synced before this) is
  // delivered again, the same one; the door keeps the first. Call it only after everything the
  // door must keep is written (Executor::Finish): a removal that survives implies that those
  // writes did.
  Status Finished(std::string_view command_id, int64_t admission);
  // Every command admitted and not finished, oldest first.
  Result<std::vector<Entry>> Unfinished() const;

 private:
  CommandJournal(StateDb& db, int64_t next_admission) : db_(db), next_admission_(next_admission) {}
  StateDb& db_;
  std::atomic<int64_t> next_admission_;
};

}  // namespace edge::sandbox
