#include "sandbox/idempotency_store.h"

namespace edge::sandbox {
namespace {

const std::vector<StateDb::Migration>& Migrations() {
  static const std::vector<StateDb::Migration> m = {
      {1,
       "CREATE TABLE idempotency ("
       " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
       " command_id TEXT NOT NULL UNIQUE,"
       " result BLOB NOT NULL,"
       " recorded_at_ms INTEGER NOT NULL);"
       "CREATE INDEX idempotency_age ON idempotency (recorded_at_ms, seq);"},
  };
  return m;
}

constexpr size_t kMaxCommandIdBytes = 256;

// Keeps the newest max_entries rows by insertion order: those above MAX(seq) - max_entries,
// two lookups of the rowid's b-tree whatever the table holds. Rows are removed oldest first
// (this trim and the age limit), so the seqs in the table are contiguous and exactly
// max_entries stay; a wall clock stepped back can make the age limit leave a gap, and then
// fewer stay, never more. (Issue 14: the trim was an ORDER BY … OFFSET max_entries that
// walked every row on each Record, which was 8 % of the agent's CPU with the rest of Record
// at 600 commands a second.) Insertion order is also the right order when the wall clock steps
// back: ordered by recorded_at_ms, the result just recorded was the first to go.
constexpr const char* kTrimToMaxEntries =
    "DELETE FROM idempotency WHERE seq <= (SELECT MAX(seq) FROM idempotency) - ?";

Status ValidateCommandId(std::string_view id) {
  if (id.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "command_id \"" + std::string(id) +
                                                      "\" is blank; it must identify the command");
  }
  if (id.size() > kMaxCommandIdBytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "command_id of " + std::to_string(id.size()) + " bytes is longer than " +
                         std::to_string(kMaxCommandIdBytes) + " bytes");
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<IdempotencyStore>> IdempotencyStore::Open(StateDb& db, Clock& clock,
                                                                 Options options) {
  if (options.max_entries == 0 || options.max_age.count() <= 0 || options.max_result_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "idempotency window: max_entries (" + std::to_string(options.max_entries) +
                         "), max_age (" + std::to_string(options.max_age.count()) +
                         "s) and max_result_bytes (" + std::to_string(options.max_result_bytes) +
                         ") must all be positive");
  }
  if (auto st = db.Migrate("idempotency_store", Migrations()); !st) {
    return std::unexpected(st.error());
  }
  return std::unique_ptr<IdempotencyStore>(new IdempotencyStore(db, clock, options));
}

Result<std::optional<std::string>> IdempotencyStore::Lookup(std::string_view command_id) const {
  if (auto st = ValidateCommandId(command_id); !st) return std::unexpected(st.error());
  const int64_t oldest = ToEpochMillis(clock_.Now() - options_.max_age);
  auto rows =
      db_.Query("SELECT result FROM idempotency WHERE command_id = ? AND recorded_at_ms > ?",
                {std::string(command_id), oldest});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::optional<std::string>();
  return std::optional<std::string>((*rows)[0].Text(0));
}

Status IdempotencyStore::Record(std::string_view command_id, std::string_view result,
                                Durability durability) {
  if (auto st = ValidateCommandId(command_id); !st) return st;
  if (result.size() > options_.max_result_bytes) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "result of command_id \"" + std::string(command_id) + "\" is " +
                         std::to_string(result.size()) + " bytes, more than max_result_bytes " +
                         std::to_string(options_.max_result_bytes));
  }
  const int64_t now = ToEpochMillis(clock_.Now());
  const int64_t oldest = ToEpochMillis(clock_.Now() - options_.max_age);
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  // An expired entry with the same id no longer counts.
  if (auto st = txn->Exec("DELETE FROM idempotency WHERE recorded_at_ms <= ?", {oldest}); !st) {
    return st;
  }
  auto existing =
      txn->Query("SELECT 1 FROM idempotency WHERE command_id = ?", {std::string(command_id)});
  if (!existing) return std::unexpected(existing.error());
  if (!existing->empty()) {
    return MakeError(ErrorCode::kAlreadyExists,
                     "command_id \"" + std::string(command_id) + "\" already has a stored result");
  }
  if (auto st =
          txn->Exec("INSERT INTO idempotency (command_id, result, recorded_at_ms) VALUES (?, ?, ?)",
                    {std::string(command_id), SqlBlob{std::string(result)}, now});
      !st) {
    return st;
  }
  if (auto st = txn->Exec(kTrimToMaxEntries, {static_cast<int64_t>(options_.max_entries)}); !st) {
    return st;
  }
  return txn->Commit(durability);
}

Result<size_t> IdempotencyStore::Prune() {
  const int64_t oldest = ToEpochMillis(clock_.Now() - options_.max_age);
  auto txn = db_.Begin();
  if (!txn) return std::unexpected(txn.error());
  if (auto st = txn->Exec("DELETE FROM idempotency WHERE recorded_at_ms <= ?", {oldest}); !st) {
    return std::unexpected(st.error());
  }
  size_t removed = static_cast<size_t>(txn->Changes());
  if (auto st = txn->Exec(kTrimToMaxEntries, {static_cast<int64_t>(options_.max_entries)}); !st) {
    return std::unexpected(st.error());
  }
  removed += static_cast<size_t>(txn->Changes());
  if (auto st = txn->Commit(); !st) return std::unexpected(st.error());
  return removed;
}

Result<size_t> IdempotencyStore::Size() const {
  auto rows = db_.Query("SELECT COUNT(*) FROM idempotency", {});
  if (!rows) return std::unexpected(rows.error());
  return static_cast<size_t>((*rows)[0].Int(0));
}

}  // namespace edge::sandbox
