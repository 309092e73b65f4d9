// ProcessControl: the handle through which the owner of an interactive command (an
// executor session, wire.md §5.5) reaches its process while it runs: write to its stdin,
// which stays open for the process's whole life, and signal its process group.
//
// The owner makes one and puts it in ProcessSpec::control; the ProcessRunner then gives the
// child a stdin pipe (instead of /dev/null or one-shot stdin bytes), attaches the started
// process to the handle, writes what is queued to the pipe on the io_context (asynchronous,
// no thread ever blocks on the pipe), and ends the handle when the leader exits. Shared by
// the owner and the runner; thread-safe.
//
// Writes are bounded, all or nothing: Write() queues the whole of `data` or nothing. The
// queue holds the bytes the pipe has not taken yet (what the process has not read, beyond the
// kernel's pipe buffer); a write that would take it past `max_queued_bytes` is refused with
// RESOURCE_EXHAUSTED at once, so a process that stops reading never blocks a caller or grows
// memory without bound. Queued bytes reach the pipe in the order they were queued. Bytes
// written before the process started are kept and written once it has.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "common/error.h"

namespace edge::sandbox {

class ProcessControl {
 public:
  static constexpr size_t kDefaultMaxQueuedBytes = 2u << 20;

  explicit ProcessControl(size_t max_queued_bytes = kDefaultMaxQueuedBytes)
      : max_queued_(max_queued_bytes) {}
  ProcessControl(const ProcessControl&) = delete;
  ProcessControl& operator=(const ProcessControl&) = delete;

  // Queues `data` for the process's stdin. NOT_FOUND once the process ended (or the handle
  // was closed by its owner); FAILED_PRECONDITION when the process closed its stdin (a write
  // failed, e.g. EPIPE); RESOURCE_EXHAUSTED when the queue would pass its cap (nothing is
  // queued then). Messages say why, without naming the session (the owner adds that).
  Status Write(std::string data);
  // Sends `sig` to the process group. FAILED_PRECONDITION before the process started;
  // NOT_FOUND once it ended. A group is never signalled after its leader was reaped (the
  // runner detaches the handle first), so a reused process group id cannot be hit.
  Status Signal(int sig);
  // Ends the handle for good: later writes and signals fail with NOT_FOUND ("`why`"), the
  // queue is dropped. Idempotent (the first reason stays).
  void Close(const std::string& why);
  // Bytes queued and not yet taken by the pipe.
  size_t queued_bytes() const;
  // Whether the process was attached and has not ended.
  bool running() const;

  // ---- the runner's side -----------------------------------------------------------------
  // The process started as the leader of group `pgid`. `pump` asks the runner to write what
  // is queued (it is called without the handle's lock held, after each Write, and once here
  // when bytes were queued before the start).
  void Attach(pid_t pgid, std::function<void()> pump);
  // Moves every queued byte into one buffer to write (they stay counted in queued_bytes()
  // until Written). Empty when nothing is queued or the handle is closed.
  std::string TakeForWrite();
  // `n` bytes taken by TakeForWrite reached the pipe.
  void Written(size_t n);
  // The pipe refused a write (the process closed its stdin): later writes get
  // FAILED_PRECONDITION naming `why`; the queue is dropped.
  void StdinFailed(const std::string& why);
  // The leader exited (called before it is reaped): no more signals or writes.
  void Ended(const std::string& why);

 private:
  mutable std::mutex mu_;
  const size_t max_queued_;
  std::deque<std::string> queue_;
  size_t queued_ = 0;  // in queue_ plus taken and not yet written
  pid_t pgid_ = 0;
  bool attached_ = false;
  bool closed_ = false;
  ErrorCode closed_code_ = ErrorCode::kNotFound;
  std::string closed_why_;
  std::function<void()> pump_;
};

}  // namespace edge::sandbox
