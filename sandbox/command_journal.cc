#include "sandbox/command_journal.h"

namespace edge::sandbox {
namespace {

const std::vector<StateDb::Migration>& Migrations() {
  static const std::vector<StateDb::Migration> m = {
      {1,
       "CREATE TABLE command_journal ("
       " command_id TEXT PRIMARY KEY,"
       " tool TEXT NOT NULL,"
       " door TEXT NOT NULL,"
       " admitted_at_ms INTEGER NOT NULL);"},
      // Rows of an agent before version 2 read as admission 0; new admissions start at 1.
      {2, "ALTER TABLE command_journal ADD COLUMN admission INTEGER NOT NULL DEFAULT 0;"},
  };
  return m;
}

}  // namespace

Result<std::unique_ptr<CommandJournal>> CommandJournal::Open(StateDb& db) {
  if (auto st = db.Migrate("command_journal", Migrations()); !st) {
    return std::unexpected(st.error());
  }
  // This process's admissions count on from the rows an earlier one left.
  auto last = db.Query("SELECT COALESCE(MAX(admission), 0) FROM command_journal");
  if (!last) return std::unexpected(last.error());
  const int64_t next = (last->empty() ? 0 : (*last)[0].Int(0)) + 1;
  return std::unique_ptr<CommandJournal>(new CommandJournal(db, next));
}

Result<int64_t> CommandJournal::Admitted(const Entry& entry, Durability durability) {
  const int64_t admission = next_admission_.fetch_add(1);
  if (auto st = db_.Exec(
          "INSERT OR REPLACE INTO command_journal (command_id, tool, door, admitted_at_ms, "
          "admission) VALUES (?, ?, ?, ?, ?)",
          {entry.command_id, entry.tool, entry.door, entry.admitted_at_ms, admission}, durability);
      !st) {
    return std::unexpected(st.error());
  }
  return admission;
}

Status CommandJournal::Finished(std::string_view command_id, int64_t admission) {
  return db_.Exec("DELETE FROM command_journal WHERE command_id = ? AND admission = ?",
                  {std::string(command_id), admission}, Durability::kRelaxed);
}

Result<std::vector<CommandJournal::Entry>> CommandJournal::Unfinished() const {
  auto rows = db_.Query(
      "SELECT command_id, tool, door, admitted_at_ms, admission FROM command_journal "
      "ORDER BY admitted_at_ms, command_id");
  if (!rows) return std::unexpected(rows.error());
  std::vector<Entry> out;
  out.reserve(rows->size());
  for (const auto& r : *rows)
    out.push_back({r.Text(0), r.Text(1), r.Text(2), r.Int(3), r.Int(4)});
  return out;
}

}  // namespace edge::sandbox
