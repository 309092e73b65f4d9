// CommandJournal: the commands the executor has admitted and not yet finished, kept in the
// agent's StateDb (table `command_journal`) so that a command cut short by the agent's death
// (kill -9, a crash, power loss) still gets exactly one terminal result when the agent starts
// again: the Executor turns each row left behind into an AGENT_RESTARTED result (issue 16).
// A row is written when a command with a command_id is admitted and removed once its result
// is stored for idempotency. Thread-safe (the StateDb serialises); borrows the StateDb.
#pragma once

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
  };

  // Creates the table through a StateDb migration.
  static Result<std::unique_ptr<CommandJournal>> Open(StateDb& db);

  // Records an admitted command (a repeat of the same id replaces the row).
  Status Admitted(const Entry& entry);
  // Forgets a command whose result is stored and delivered to its door. Not waited on to reach
  // the disk (Durability::kRelaxed): should a power loss undo it, the row comes back at the
  // next start and the command's stored result (synced before this) is delivered again, the
  // same one; the door keeps the first. Call it only after everything the door must keep is
  // written (Executor::Finish): a removal that survives implies that those writes did.
  Status Finished(std::string_view command_id);
  // Every command admitted and not finished, oldest first.
  Result<std::vector<Entry>> Unfinished() const;

 private:
  explicit CommandJournal(StateDb& db) : db_(db) {}
  StateDb& db_;
};

}  // namespace edge::sandbox
