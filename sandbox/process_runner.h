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
// Every command also gets its own cgroup when the agent can make one (see Isolation()): a
// cgroup-v1 `pids` group (pids.max = max_processes, or "max") or, without a writable v1
// pids hierarchy, a group in a writable cgroup-v2 subtree (pids.max when the `pids`
// controller is available there). A process that leaves the process group (setsid,
// setpgid) stays in the cgroup, so when the leader exits everything left in the cgroup is
// killed (cgroup.kill on v2 where the kernel has it, else freeze + SIGKILL each member; on
// v1 SIGKILL each pid of cgroup.procs, again until the cgroup is empty) before the result
// is reported. Without a usable cgroup only the process group is killed.
//
// With Options::state_dir set, each live group is recorded there (ProcessLedger: one slot of
// one file that stays open), so that a new runner after `kill -9` of the agent can kill the
// groups the old one left behind (KillStaleGroups). The runner owns its children: destroying it
// kills and reaps all of them without calling their done callbacks. Thread-safe.
//
// PR_SET_PDEATHSIG fires when the *thread* that spawned exits, so children are spawned on the
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
#include "common/timer_queue.h"
#include "sandbox/cancel.h"
#include "sandbox/process_result.h"
#include "sandbox/process_spec.h"

namespace edge::sandbox {

class ProcessRunner {
 public:
  struct Options {
    // Directory for the live-group ledger (created 0700); empty = no ledger.
    std::string state_dir;
    // cgroup-v1 pids hierarchy; used when writable (one group per command under
    // <root>/edge-agent/<agent pid>-<n>-<tag>, the tag a hash of state_dir, so that agents
    // sharing a root sweep only their own leftovers). Empty = never use cgroup v1.
    std::string pids_cgroup_root = "/sys/fs/cgroup/pids";
    // cgroup-v2 directory delegated to the agent (writable; e.g. the unit's own cgroup under
    // systemd with Delegate=yes), used when cgroup v1 pids is not: one group per command
    // under <root>/edge-agent/<agent pid>-<n>-<tag>. "auto" = the agent's own cgroup on the cgroup2
    // mount (/proc/self/mountinfo + /proc/self/cgroup). Empty = never use cgroup v2.
    std::string cgroup2_root = "auto";
    // Kernel pipe capacity, in bytes, this runner may give its commands' stdout pipes beyond
    // the kernel's default of 64 KiB. A command with an output window of 128 KiB or more
    // (ProcessSpec::output_window_bytes) and no `control` gets a stdout pipe of min(window,
    // 1 MiB) (rounded up to a power of two, as the kernel does) while the budget lasts, else
    // the default; the bytes return to the budget when the command finishes. The bound
    // matters because Linux charges pipe capacity to the user: past fs.pipe-user-pages-soft
    // (64 MiB by default) every new pipe of that user, the commands' own included, is cut to
    // one or two pages. 0 = never enlarge.
    uint64_t large_pipe_budget_bytes = 16ull << 20;
  };

  using DoneCallback = std::function<void(Result<ProcessResult>)>;

  // The deadline and kill grace run on `timers` (the owner's queue on the same clock; it must
  // outlive the runner), or on a queue of the runner's own when null.
  ProcessRunner(boost::asio::io_context& io, Clock& clock, Options options,
                TimerQueue* timers = nullptr);
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

  // What keeps a command's processes together, probed once (the first call or the first
  // command; creates <root>/edge-agent when missing): "cgroup v1 pids (<base>)",
  // "cgroup v2 (<base>; cgroup.kill|freeze+kill; pids limit|no pids controller ...)", or
  // "none: <why> — processes that leave the process group can outlive their command".
  std::string Isolation() const;
  // The same probe for `options` without a runner.
  static std::string ProbeIsolation(const Options& options);
  // The tag that ends the names of the command cgroups of a runner with this state_dir: the
  // 64-bit FNV-1a hash of its bytes as 16 lower-case hex digits.
  static std::string CgroupTag(const std::string& state_dir);

  // Kills the process groups recorded in `state_dir` by a previous runner (e.g. one killed
  // with -9) and everything in their recorded cgroups, and removes the records; then kills
  // and removes the command cgroups under <v1 or v2 root>/edge-agent/ whose agent pid (the
  // name's prefix) is no longer alive and whose tag is this state_dir's (or that have no tag:
  // older releases); another instance's groups are never touched, even when its agent died. A
  // record whose leader pid now belongs to another process (start time differs) is dropped without
  // a group kill. Reports how many groups and cgroups held processes that were signalled, and each
  // recorded group with its label.
  struct StaleGroup {
    long pgid = 0;
    std::string label;       // ProcessSpec::label of the command that ran in it
    bool signalled = false;  // it still held processes, which were killed
  };
  struct StaleReport {
    size_t signalled = 0;
    std::vector<StaleGroup> groups;
  };
  static Result<StaleReport> KillStaleGroups(const Options& options);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace edge::sandbox
