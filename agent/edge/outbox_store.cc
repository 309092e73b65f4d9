#include "agent/edge/outbox_store.h"

#include "common/log.h"
#include "common/utf8.h"

#include <algorithm>

namespace edge::agentedge {
namespace {

namespace pb = aegis::cluster::v1;
using sandbox::SqlBlob;
using sandbox::SqlParam;

const std::vector<sandbox::StateDb::Migration>& Migrations() {
  static const std::vector<sandbox::StateDb::Migration> m = {
      {1,
       "CREATE TABLE edge_outbox ("
       "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
       "  command_id TEXT NOT NULL UNIQUE,"
       "  result BLOB NOT NULL,"
       "  created_ms INTEGER NOT NULL,"
       "  stream_id TEXT NOT NULL DEFAULT '',"
       "  written_ms INTEGER NOT NULL DEFAULT 0);"},
      {2, "ALTER TABLE edge_outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;"},
      // Issue 16: attempts counted every resend, controller restarts included; they now count
      // only streams the controller ended blaming a message, so the old counts are no evidence.
      {3, "UPDATE edge_outbox SET attempts = 0;"},
  };
  return m;
}

// Issue 14: PruneSettled and NextSettle look entries up by the stream they were written on,
// and Put drops the oldest written entries first; without indexes each prune read the whole
// table (at 500 results a second and a 30 s settle window, 15 000 rows, one prune per
// result). Indexes change no schema version: an older agent (a package rolled back) opens the
// database as it is, and SQLite keeps them up to date whoever writes.
constexpr const char* kIndexes[] = {
    "CREATE INDEX IF NOT EXISTS edge_outbox_written ON edge_outbox (stream_id, written_ms)",
    "CREATE INDEX IF NOT EXISTS edge_outbox_written_seq ON edge_outbox (seq) "
    "WHERE stream_id != ''",
};

constexpr const char* kEntryColumns =
    "seq, command_id, result, created_ms, stream_id, written_ms, attempts";

// An entry from a row of kEntryColumns; false (and `result` left empty) when the stored
// result does not parse.
bool EntryFromRow(const sandbox::SqlRow& row, OutboxStore::Entry& e) {
  e.seq = row.Int(0);
  e.command_id = row.Text(1);
  e.created_ms = row.Int(3);
  e.stream_id = row.Text(4);
  e.written_ms = row.Int(5);
  e.attempts = row.Int(6);
  return e.result.ParseFromString(row.Text(2));
}

}  // namespace

Result<std::unique_ptr<OutboxStore>> OutboxStore::Open(const std::string& data_dir, Clock& clock,
                                                       Options options) {
  if (options.max_entries == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "outbox max_entries 0: must be at least 1");
  }
  auto db = sandbox::StateDb::Open(data_dir, options.state_db);
  if (!db) return std::unexpected(db.error());
  if (auto st = (*db)->Migrate("edge_outbox", Migrations()); !st) {
    return std::unexpected(st.error());
  }
  for (const char* index : kIndexes) {
    if (auto st = (*db)->Exec(index); !st) return std::unexpected(st.error());
  }
  return std::unique_ptr<OutboxStore>(new OutboxStore(std::move(*db), clock, options));
}

Result<int64_t> OutboxStore::RowsLocked(sandbox::StateDb::Txn& txn) {
  int64_t rows = rows_.load();
  if (rows >= 0) return rows;
  auto count = txn.Query("SELECT COUNT(*) FROM edge_outbox");
  if (!count) return std::unexpected(count.error());
  rows = count->front().Int(0);
  rows_.store(rows);
  return rows;
}

Status OutboxStore::CommitCounted(sandbox::StateDb::Txn& txn, int64_t rows) {
  rows_.store(rows);
  auto st = txn.Commit(Durability::kRelaxed);
  if (!st) rows_.store(-1);  // rolled back: counted again on next use
  return st;
}

Result<bool> OutboxStore::Put(const std::string& command_id, const pb::EdgeResult& result) {
  if (command_id.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "outbox: command_id must not be empty");
  }
  std::string bytes;
  if (!result.SerializeToString(&bytes)) {
    return MakeError(ErrorCode::kInternal, "outbox: cannot serialize the result of " + command_id);
  }
  auto txn = db_->Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = RowsLocked(*txn);
  if (!rows) return std::unexpected(rows.error());
  if (auto st = txn->Exec(
          "INSERT OR IGNORE INTO edge_outbox (command_id, result, created_ms) VALUES (?, ?, ?)",
          {command_id, SqlBlob{bytes}, ToEpochMillis(clock_.Now())});
      !st) {
    return std::unexpected(st.error());
  }
  const bool inserted = txn->Changes() > 0;
  if (inserted) ++*rows;
  // Past the bound, entries go oldest first, and those already written before those never
  // written: a written result has almost surely arrived (it is kept only in case its stream
  // breaks within the settle window), an unwritten one has surely not.
  int64_t excess = *rows - static_cast<int64_t>(options_.max_entries);
  size_t written_dropped = 0;
  std::vector<std::string> dropped;  // never written
  // Both walks go in seq order and stop after `excess` rows: the written ones on their partial
  // index; the unwritten ones (reached only when no written entry is left) on the table, kept
  // off the (stream_id, written_ms) index by `+`, which would sort them all first.
  for (const bool written : {true, false}) {
    if (excess <= 0) break;
    auto oldest =
        txn->Query(std::string("SELECT seq, command_id FROM edge_outbox WHERE ") +
                       (written ? "stream_id != ''" : "+stream_id = ''") + " ORDER BY seq LIMIT ?",
                   {excess});
    if (!oldest) return std::unexpected(oldest.error());
    for (const auto& row : *oldest) {
      if (auto st = txn->Exec("DELETE FROM edge_outbox WHERE seq = ?", {row.Int(0)}); !st) {
        return std::unexpected(st.error());
      }
      --excess;
      --*rows;
      if (written) {
        ++written_dropped;
      } else {
        dropped.push_back(row.Text(1));
      }
    }
  }
  // Not waited on to reach the disk (see Put in the header).
  if (auto st = CommitCounted(*txn, *rows); !st) return std::unexpected(st.error());
  // Written entries dropped early are summed into at most one line a minute: at a sustained
  // rate above max_entries per settle window it would otherwise be a line per result.
  size_t early_to_log = 0;
  if (written_dropped > 0) {
    std::lock_guard lock(drop_log_mu_);
    written_dropped_unlogged_ += written_dropped;
    const Clock::MonoTime now = clock_.Monotonic();
    if (!written_drop_logged_ || now - *written_drop_logged_ >= std::chrono::minutes(1)) {
      early_to_log = std::exchange(written_dropped_unlogged_, 0);
      written_drop_logged_ = now;
    }
  }
  if (early_to_log > 0) {
    log::Get("edge")->info(
        "outbox full ({} entries): {} written result(s) pruned before their settle window "
        "ended, oldest first (since the last such line)",
        options_.max_entries, early_to_log);
  }
  for (const auto& id : dropped) {
    log::Get("edge")->warn(
        "outbox full ({} entries): dropped the undelivered result of command {} (oldest first)",
        options_.max_entries, id);
  }
  return inserted;
}

Result<std::vector<OutboxStore::Entry>> OutboxStore::All() const {
  auto rows = db_->Query(std::string("SELECT ") + kEntryColumns + " FROM edge_outbox ORDER BY seq");
  if (!rows) return std::unexpected(rows.error());
  std::vector<Entry> out;
  out.reserve(rows->size());
  for (const auto& row : *rows) {
    Entry e;
    if (!EntryFromRow(row, e)) {
      log::Get("edge")->warn("outbox: the stored result of command {} is unreadable; skipped",
                             log::Escape(e.command_id));
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<OutboxStore::Entry>> OutboxStore::TakeForResend(uint64_t max_result_bytes) {
  auto txn = db_->Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = txn->Query(std::string("SELECT ") + kEntryColumns +
                         " FROM edge_outbox ORDER BY attempts, seq");
  if (!rows) return std::unexpected(rows.error());
  std::vector<Entry> out;
  out.reserve(rows->size());
  std::vector<std::pair<std::string, std::string>> replaced;  // command id, why
  std::vector<std::string> dropped;  // rows no controller could match to a command
  for (const auto& row : *rows) {
    Entry e;
    const bool readable = EntryFromRow(row, e);
    if (!IsValidUtf8(e.command_id)) {
      // Command ids come from a protobuf string field: valid UTF-8 by construction. A row
      // without one was damaged on disk; its result cannot even be addressed on the wire.
      if (auto st = txn->Exec("DELETE FROM edge_outbox WHERE seq = ?", {e.seq}); !st) {
        return std::unexpected(st.error());
      }
      dropped.push_back(ToValidUtf8(e.command_id));
      continue;
    }
    const size_t bytes = row.Text(2).size();
    std::string why, code;
    if (!readable) {
      code = "INTERNAL";
      why = "its stored result is unreadable";
    } else if (max_result_bytes > 0 && bytes > max_result_bytes) {
      code = "RESOURCE_EXHAUSTED";
      why = "its result is " + std::to_string(bytes) + " bytes, more than the " +
            std::to_string(max_result_bytes) + " one edge stream message can carry";
    } else if (e.attempts >= options_.max_attempts) {
      code = "UNAVAILABLE";
      why = "the controller ended the stream its result was on " + std::to_string(e.attempts) +
            " times with an error that blames a message (" + std::to_string(bytes) + " bytes)";
    }
    if (!why.empty()) {
      e.result.Clear();
      auto* err = e.result.mutable_err();
      err->set_code(code);
      err->set_message("the result of command " + e.command_id + " could not be delivered: " + why +
                       "; it was replaced by this error");
      std::string small;
      e.result.SerializeToString(&small);
      if (auto st = txn->Exec("UPDATE edge_outbox SET result = ?, attempts = 0 WHERE seq = ?",
                              {SqlBlob{small}, e.seq});
          !st) {
        return std::unexpected(st.error());
      }
      e.attempts = 0;
      replaced.emplace_back(e.command_id, why);
    }
    out.push_back(std::move(e));
  }
  // Not waited on to reach the disk (see Put in the header).
  if (!dropped.empty()) rows_.store(-1);  // rare (damaged rows): counted again on next use
  if (auto st = txn->Commit(Durability::kRelaxed); !st) return std::unexpected(st.error());
  for (const auto& id : dropped) {
    log::Get("edge")->error(
        "outbox: an entry with a damaged command id ({}) was dropped: no command can match it",
        log::Escape(id));
  }
  for (const auto& [id, why] : replaced) {
    log::Get("edge")->error(
        "outbox: the result of command {} could not be delivered ({}); an "
        "error result is sent in its place",
        log::Escape(id), why);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Entry& a, const Entry& b) { return a.attempts < b.attempts; });
  return out;
}

Result<std::optional<pb::EdgeResult>> OutboxStore::Get(const std::string& command_id) const {
  auto rows = db_->Query("SELECT result FROM edge_outbox WHERE command_id = ?", {command_id});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::optional<pb::EdgeResult>();
  pb::EdgeResult r;
  if (!r.ParseFromString(rows->front().Text(0))) {
    return MakeError(ErrorCode::kInternal,
                     "outbox: the stored result of command " + command_id + " is unreadable");
  }
  return std::optional<pb::EdgeResult>(std::move(r));
}

Status OutboxStore::MarkWritten(const std::string& command_id, const std::string& stream_id) {
  return db_->Exec("UPDATE edge_outbox SET stream_id = ?, written_ms = ? WHERE command_id = ?",
                   {stream_id, ToEpochMillis(clock_.Now()), command_id}, Durability::kRelaxed);
}

Result<size_t> OutboxStore::BlameStream(const std::string& stream_id,
                                        const std::string& in_flight) {
  if (stream_id.empty() && in_flight.empty()) return size_t{0};
  auto txn = db_->Begin();
  if (!txn) return std::unexpected(txn.error());
  if (auto st = txn->Exec(
          "UPDATE edge_outbox SET attempts = attempts + 1 WHERE (stream_id = ? AND stream_id != "
          "'') OR (command_id = ? AND command_id != '')",
          {stream_id, in_flight});
      !st) {
    return std::unexpected(st.error());
  }
  const auto n = static_cast<size_t>(txn->Changes());
  if (auto st = txn->Commit(); !st) return std::unexpected(st.error());
  return n;
}

Result<size_t> OutboxStore::PruneSettled(const std::string& stream_id) {
  if (stream_id.empty()) return size_t{0};
  auto txn = db_->Begin();
  if (!txn) return std::unexpected(txn.error());
  auto rows = RowsLocked(*txn);
  if (!rows) return std::unexpected(rows.error());
  const int64_t cutoff = ToEpochMillis(clock_.Now()) - options_.settle.count();
  if (auto st = txn->Exec("DELETE FROM edge_outbox WHERE stream_id = ? AND written_ms <= ?",
                          {stream_id, cutoff});
      !st) {
    return std::unexpected(st.error());
  }
  const auto n = static_cast<size_t>(txn->Changes());
  if (auto st = CommitCounted(*txn, *rows - static_cast<int64_t>(n)); !st) {
    return std::unexpected(st.error());
  }
  return n;
}

Result<std::optional<Clock::WallTime>> OutboxStore::NextSettle(const std::string& stream_id) const {
  using R = std::optional<Clock::WallTime>;
  if (stream_id.empty()) return R();
  auto rows =
      db_->Query("SELECT MIN(written_ms) FROM edge_outbox WHERE stream_id = ?", {stream_id});
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty() || rows->front().IsNull(0)) return R();
  return R(FromEpochMillis(rows->front().Int(0)) + options_.settle);
}

Result<size_t> OutboxStore::Size() const {
  auto rows = db_->Query("SELECT COUNT(*) FROM edge_outbox");
  if (!rows) return std::unexpected(rows.error());
  return static_cast<size_t>(rows->front().Int(0));
}

}  // namespace edge::agentedge
