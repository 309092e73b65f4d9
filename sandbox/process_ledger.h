// ProcessLedger: the runner's on-disk list of the process groups (and their cgroups) it has
// running, so that the next agent can kill what a crashed one left behind
// (ProcessRunner::KillStaleGroups reads it back with Drain).
//
// One file, <state_dir>/process-ledger, of fixed kSlotBytes slots: a slot holds one record
// (text, ended by a NUL) or starts with a NUL when free. Recording a group is one pwrite into
// a file that stays open, and removing it one pwrite of a NUL, instead of creating and
// unlinking a file per command (issue 14: that was about 8 % of the agent's CPU at 600 commands
// a second, ext4 allocating and freeing inodes, and two metadata writes per command on the
// node's disk). Not synced: it guards against an agent that crashed, whose writes the page
// cache keeps; a power cut ends the processes as well. A slot write is one pwrite within one
// page, so a crash never leaves half a record.
//
// Thread-safe. The file is locked (flock) while open: a second runner on the same state_dir
// gets FAILED_PRECONDITION from Open (and falls back to a file per group), and Drain leaves
// the records of a live runner alone.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace edge::sandbox {

class ProcessLedger {
 public:
  static constexpr size_t kSlotBytes = 4096;
  static constexpr const char* kFileName = "process-ledger";

  // Opens (creating, 0600) <state_dir>/process-ledger. Records already in it (an earlier
  // runner's, not yet read by Drain) keep their slots.
  static Result<std::unique_ptr<ProcessLedger>> Open(const std::string& state_dir);
  ~ProcessLedger();
  ProcessLedger(const ProcessLedger&) = delete;
  ProcessLedger& operator=(const ProcessLedger&) = delete;

  // Records `record` (no NUL in it) in a free slot; the slot, for Remove. INVALID_ARGUMENT
  // when it does not fit a slot (with its NUL), INTERNAL when the write fails.
  Result<size_t> Add(std::string_view record);
  // Frees `slot`. Errors are logged: the record stays, and the next agent finds its group
  // gone (or no longer ours) and kills nothing.
  void Remove(size_t slot);

  // Calls `each` with every record in <state_dir>/process-ledger (none when there is no such
  // file), then removes the file: after the calls, so that an agent that dies while it kills
  // what they name finds them again. Holds the file's lock meanwhile: FAILED_PRECONDITION,
  // with nothing called, while a live runner has it open. INTERNAL naming the file when it
  // cannot be read or removed.
  static Status Drain(const std::string& state_dir,
                      const std::function<void(const std::string& record)>& each);

 private:
  explicit ProcessLedger(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  const int fd_;
  const std::string path_;
  std::mutex mu_;
  std::vector<size_t> free_;  // mu_: freed slots, reused before the file grows
  size_t slots_ = 0;          // mu_: slots the file has had since Open
};

}  // namespace edge::sandbox
