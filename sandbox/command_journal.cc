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
  };
  return m;
}

}  // namespace

Result<std::unique_ptr<CommandJournal>> CommandJournal::Open(StateDb& db) {
  if (auto st = db.Migrate("command_journal", Migrations()); !st) {
    return std::unexpected(st.error());
  }
  return std::unique_ptr<CommandJournal>(new CommandJournal(db));
}

Status CommandJournal::Admitted(const Entry& entry) {
  return db_.Exec(
      "INSERT OR REPLACE INTO command_journal (command_id, tool, door, admitted_at_ms) "
      "VALUES (?, ?, ?, ?)",
      {entry.command_id, entry.tool, entry.door, entry.admitted_at_ms});
}

Status CommandJournal::Finished(std::string_view command_id) {
  return db_.Exec("DELETE FROM command_journal WHERE command_id = ?", {std::string(command_id)},
                  Durability::kRelaxed);
}

Result<std::vector<CommandJournal::Entry>> CommandJournal::Unfinished() const {
  auto rows = db_.Query(
      "SELECT command_id, tool, door, admitted_at_ms FROM command_journal "
      "ORDER BY admitted_at_ms, command_id");
  if (!rows) return std::unexpected(rows.error());
  std::vector<Entry> out;
  out.reserve(rows->size());
  for (const auto& r : *rows)
    out.push_back({r.Text(0), r.Text(1), r.Text(2), r.Int(3)});
  return out;
}

}  // namespace edge::sandbox
