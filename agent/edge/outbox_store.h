// OutboxStore: the edge stream's on-disk result outbox (wire.md §2.3 step 7, agent/edge/README):
// every CommandResult is written here BEFORE it is sent; on every new stream, after Hello, what
// is still here is sent again; an entry is pruned once the stream it was written on has stayed
// up for the settle window (30 s) after the write completed (there is no ack in the contract;
// the controller de-duplicates by command_id). Bounded: past max_entries the oldest entries
// already written go first (summed in an info line at most once a minute: the line counts
// the drops since the one before), then the oldest never written (a warning each).
// Put, MarkWritten, PruneSettled and NextSettle cost the same whatever the table holds (issue
// 14: the row count is kept in memory, the settle lookups and the eviction have indexes);
// All, TakeForResend, BlameStream and Size read the table.
//
// An entry that cannot be delivered never holds the others up (TakeForResend): entries go out
// fewest failed attempts first, and an entry with max_attempts failed attempts — or too large
// for one edge stream message — is replaced by an Err result saying so (the controller keeps
// the first result it got for a command, so replacing a result that did arrive changes
// nothing there). A failed attempt is counted only on evidence against the entry
// (BlameStream: the controller ended the stream it was on with a status that blames a
// message); a stream that merely broke — a controller restart, a reset connection — counts
// nothing, however often it happens, so no real result is ever replaced for it.
//
// Table `edge_outbox` in data_dir/state/agent.db through its own StateDb connection
// (migration component "edge_outbox"). Thread-safe. Borrows the Clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "node_cluster.pb.h"
#include "sandbox/state_db.h"

namespace edge::agentedge {

class OutboxStore {
 public:
  struct Options {
    size_t max_entries = 10000;
    std::chrono::milliseconds settle{std::chrono::seconds(30)};
    int max_attempts = 5;
    sandbox::StateDb::Options state_db;  // its connection's (tests count the WAL's syncs)
  };
  struct Entry {
    int64_t seq = 0;
    std::string command_id;
    aegis::cluster::v1::EdgeResult result;
    int64_t created_ms = 0;
    std::string stream_id;   // "" = never written (or its stream broke before the write)
    int64_t written_ms = 0;  // when the write on `stream_id` completed
    int64_t attempts = 0;    // failed attempts so far (BlameStream)
  };

  // Opens (creating) data_dir/state/agent.db. INVALID_ARGUMENT for a zero bound.
  static Result<std::unique_ptr<OutboxStore>> Open(const std::string& data_dir, Clock& clock,
                                                   Options options);
  static Result<std::unique_ptr<OutboxStore>> Open(const std::string& data_dir, Clock& clock) {
    return Open(data_dir, clock, Options{});
  }

  // Stores the result of `command_id`; false when one is already stored (the first is kept).
  // INVALID_ARGUMENT for an empty command_id. Not waited on to reach the disk (issue 14: one
  // sync less per command): the result of an admitted command is also named by its journal
  // row (sandbox::CommandJournal, synced before the command started), which goes only after
  // this write — so a power cut that takes the row here leaves that one, and the command ends
  // AGENT_RESTARTED (or with its stored result) at the next start; the controller keeps the
  // first result it got. A refusal lost so has not reached the controller either, which sends
  // the command again on the next stream.
  Result<bool> Put(const std::string& command_id, const aegis::cluster::v1::EdgeResult& result);
  // Gives back what its connection caches (SqliteDb::ReleaseMemory); the bytes freed.
  size_t ReleaseMemory() { return db_->ReleaseMemory(); }
  // Every entry, oldest first.
  Result<std::vector<Entry>> All() const;
  // The entries to send again on a new stream, fewest failed attempts first, then oldest.
  // One with max_attempts failed attempts, or whose result is larger than
  // `max_result_bytes` (0 = no limit), is first replaced (stored and returned) by
  // Err{code "RESOURCE_EXHAUSTED" or "UNAVAILABLE", message naming the command and why}. A
  // row whose command id is not UTF-8 (damaged on disk: ids come from a protobuf string) is
  // deleted with an error logged; no controller could match its result.
  Result<std::vector<Entry>> TakeForResend(uint64_t max_result_bytes);
  Result<std::optional<aegis::cluster::v1::EdgeResult>> Get(const std::string& command_id) const;
  // The write of `command_id` on `stream_id` completed now. Not waited on to reach the disk:
  // undone by a power loss, the entry is sent again on the next stream (the controller keeps
  // the first result of a command).
  Status MarkWritten(const std::string& command_id, const std::string& stream_id);
  // The controller ended the stream `stream_id` with a status that blames a message it got
  // (RESOURCE_EXHAUSTED: too large for it; INVALID_ARGUMENT: refused): one of the results on
  // it may be the cause, so each entry whose last write completed on that stream, and
  // `in_flight` (the result whose write was under way when the stream ended; "" for none),
  // counts one failed attempt. Never call it for a stream that merely broke. Returns how
  // many entries were counted.
  Result<size_t> BlameStream(const std::string& stream_id, const std::string& in_flight);
  // Removes the entries written on `stream_id` at least `settle` ago. Call only while that
  // stream is still up. Returns how many were removed. Not waited on to reach the disk (undone
  // by a power loss, the entries are sent again; the controller keeps the first).
  Result<size_t> PruneSettled(const std::string& stream_id);
  // When the oldest entry written on `stream_id` settles (its write + settle), so that one
  // timer can wait for it; nullopt when no entry was written on that stream.
  Result<std::optional<Clock::WallTime>> NextSettle(const std::string& stream_id) const;
  Result<size_t> Size() const;
  const Options& options() const { return options_; }

 private:
  OutboxStore(std::unique_ptr<sandbox::StateDb> db, Clock& clock, Options options)
      : db_(std::move(db)), clock_(clock), options_(options) {}
  // The table's row count, counted (once) when not known; call inside a transaction.
  Result<int64_t> RowsLocked(sandbox::StateDb::Txn& txn);
  // Commits `txn` (not waited on to reach the disk) with the table at `rows` rows.
  Status CommitCounted(sandbox::StateDb::Txn& txn, int64_t rows);

  std::unique_ptr<sandbox::StateDb> db_;
  Clock& clock_;
  Options options_;
  // Rows in edge_outbox, -1 = not known. Set only inside a transaction of db_ (which holds
  // the connection's mutex), before its commit; reset to -1 when the commit fails. Only this
  // store writes the table (one agent per data_dir).
  std::atomic<int64_t> rows_{-1};
  // Written entries dropped by the bound and not logged yet, and when that was last logged.
  std::mutex drop_log_mu_;
  size_t written_dropped_unlogged_ = 0;                 // drop_log_mu_
  std::optional<Clock::MonoTime> written_drop_logged_;  // drop_log_mu_
};

}  // namespace edge::agentedge
