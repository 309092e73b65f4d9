// ProcessRunner: starts child processes on a caller-owned boost::asio::io_context (no thread
// per child) and reports each one's ProcessResult exactly once.
//
// Every child gets its own session and process group (setsid), PR_SET_PDEATHSIG(SIGKILL), a
// clean environment, no inherited descriptors beyond stdin/stdout/stderr, and optionally a
// run-as user and a process limit. Exit is observed through a pidfd (no SIGCHLD handler)
// and the child is reaped with wait4 (peak RSS from its rusage). When the leader exits, what
// is left of its process group is killed. Cancel, deadline, an output cap with kStop, and
// Shutdown send SIGTERM to the group and SIGKILL after the grace period.
//
// With Options::state_dir set, each live group is recorded in a small file there, so that a
// new runner after `kill -9` of the agent can kill the groups the old one left behind
// (KillStaleGroups). The runner owns its children: destroying it kills and reaps all of
// them without calling their done callbacks. Thread-safe.
//
// PR_SET_PDEATHSIG fires when the *thread* that forked exits, so children are forked on the
// io_context (Run posts there): the io_context's threads must live as long as the children.
// The constructor sets SIGPIPE to SIG_IGN process-wide when it is SIG_DFL (a stdin pipe whose
// reader is gone must not kill the agent); children get every signal back at SIG_DFL.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/error.h"
#include "sandbox/cancel.h"
#include "sandbox/process_result.h"
#include "sandbox/process_spec.h"

namespace edge::sandbox {

class ProcessRunner {
 public:
  struct Options {
    // Directory for the live-group ledger (created 0700); empty = no ledger.
    std::string state_dir;
    // cgroup-v1 pids hierarchy; used for max_processes when writable (one child group per
    // command under <root>/edge-agent/). Empty = never use cgroups.
    std::string pids_cgroup_root = "/sys/fs/cgroup/pids";
  };

  using DoneCallback = std::function<void(Result<ProcessResult>)>;

  ProcessRunner(boost::asio::io_context& io, Clock& clock, Options options);
  ~ProcessRunner();
  ProcessRunner(const ProcessRunner&) = delete;
  ProcessRunner& operator=(const ProcessRunner&) = delete;

  // Starts `spec` on the io_context. `done` is called exactly once on an io_context thread:
  // with the result, or with an error when the child could not be started (INVALID_ARGUMENT
  // for a bad spec, NOT_FOUND for an unknown command or user, PERMISSION_DENIED for run_as
  // without root, DRAINING after Shutdown, INTERNAL for a failed system call). `sink` may be
  // empty (output is read and discarded, still counted against the cap).
  void Run(ProcessSpec spec, CancelToken cancel, OutputSink sink, DoneCallback done);

  // Stops every running child (SIGTERM to its group, SIGKILL after `grace`) and refuses
  // new ones; `all_reaped` (optional) is called on the io_context once none is left.
  void Shutdown(std::chrono::milliseconds grace, std::function<void()> all_reaped = {});

  // Children started and not yet reaped.
  size_t running() const;

  // Kills the process groups recorded in `state_dir` by a previous runner (e.g. one killed
  // with -9) and removes their records, plus leftover cgroups under `pids_cgroup_root`.
  // A record whose leader pid now belongs to another process (start time differs) is
  // dropped without a kill. Returns how many groups were signalled.
  static Result<size_t> KillStaleGroups(const Options& options);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace edge::sandbox
