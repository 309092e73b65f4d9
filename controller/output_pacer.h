// OutputPacer: the back-pressure between the node streams that carry a command's output and
// one operator client it is queued for (an admin Invoke or FleetInvoke call). design.md: "a
// slow peer slows the pipe read, it does not grow memory" — before it, the controller read a
// node's stream as fast as the node sent and queued every chunk for the client, so a client
// slower than the node (a busy CLI, `| less`, a stopped terminal) made the controller hold up
// to the whole output in memory (hundreds of MiB for one 512 MiB stream, issue 14).
//
// The client's reactor counts the output bytes it queues (Admit) and the ones that leave its
// queue, written or dropped (Sent). Over `high_water` queued bytes the pacer is congested: the
// node stream that delivered the chunk does not read its next message (WhenRoom) until the
// queue is down to `low_water`, so gRPC's flow control holds the node's writes, the agent's
// output window fills and the command blocks on its pipe — end to end, nothing lost.
//
// A node's stream carries every command of the node and its heartbeats, so it waits for a
// client at most `stall_limit` (EdgeStreamDeps): a client that held it that long is lagging
// (GiveUp). A lagging client no longer holds any stream up; its queue may grow to
// `max_lagging`, past which its output is dropped (Admit says so, with a status note for the
// client) until the queue is back under `low_water`; the next chunk queued comes with a note of
// how much was missed. The command's result still carries the output's tail.
//
// Thread-safe. Callbacks (a stream's resume) run outside the pacer's lock, on the thread
// whose Sent, GiveUp or Close let them go.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/timer_queue.h"
#include "controller/command_notes.h"

namespace edge::controller {

class OutputPacer {
 public:
  struct Limits {
    size_t high_water = size_t{8} << 20;    // queued bytes that make the node's stream wait
    size_t low_water = size_t{4} << 20;     // where it reads on (and a lagging client recovers)
    size_t max_lagging = size_t{32} << 20;  // a lagging client's queue; output past it is dropped
  };
  // A status note for the client about its output (kOutputDropped, kOutputResumed).
  struct Note {
    const char* state;
    std::string message;
  };
  using Resume = std::function<void()>;
  using WaitId = uint64_t;

  OutputPacer() : OutputPacer(Limits{}) {}
  explicit OutputPacer(Limits limits);

  // A chunk of `bytes` output for the client: true to queue it (counted), false to drop it.
  // `note`, when set, is queued for the client first: the first chunk of a run of drops sets
  // kOutputDropped, the first chunk queued after one kOutputResumed with what was missed.
  bool Admit(size_t bytes, std::optional<Note>& note);
  // Bytes Admit counted have left the queue (written, or dropped with the call).
  void Sent(size_t bytes);
  // The output is over (an Invoke's result is queued next; a FleetInvoke's parts have all
  // ended): the drops no chunk after them reported, as a kOutputResumed note of how much was
  // missed; nullopt when every drop was reported. A run of drops that lasted to the end is
  // told this way.
  std::optional<Note> UnreportedDrops();

  // Over high water, not lagging, not closed: a node stream that queued output here must wait.
  bool Congested() const;
  // When congested, keeps `resume` and returns its id: it runs once, when the queue is down to
  // low water, on GiveUp(id) or on Close. Otherwise returns 0 and drops `resume` unrun.
  WaitId WaitForRoom(Resume resume);
  // The wait `id` lasted the stall limit: if it is still pending the client is lagging from
  // now on, and the wait's resume runs. A wait already over is left alone.
  void GiveUp(WaitId id);
  // The client's call ended: every wait resumes, nothing more is queued or waited for.
  void Close();

  size_t queued_bytes() const;
  bool lagging() const;
  uint64_t dropped_bytes() const;  // in all, since the pacer was made

  // Runs `resume` once, when none of `pacers` is congested any more — at once when none is —
  // or `stall_limit` after the call (on `timers`), when the ones still congested give up.
  // Without `timers` it waits for room (or Close) only. What a node stream calls before
  // reading on.
  static void WhenRoom(const std::vector<std::shared_ptr<OutputPacer>>& pacers, TimerQueue* timers,
                       std::chrono::milliseconds stall_limit, Resume resume);

 private:
  std::vector<Resume> TakeWaitsLocked();

  const Limits limits_;
  mutable std::mutex mu_;
  size_t queued_ = 0;
  bool lagging_ = false;
  bool closed_ = false;
  bool dropping_ = false;  // in a run of drops (the client was told)
  uint64_t dropped_total_ = 0;
  uint64_t dropped_pending_ = 0;  // dropped and not yet reported after a recovery
  WaitId next_wait_ = 1;
  std::map<WaitId, Resume> waits_;
};

}  // namespace edge::controller
