// ProcessSpec: everything ProcessRunner needs to start one command. A plain value built by
// the executor (or a provider wrapping it, e.g. bwrap); it owns nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace edge::sandbox {

class ProcessControl;

// What happens when a command's output reaches max_output_bytes.
enum class OutputCapPolicy {
  kDrop,  // keep the child running, read and discard the rest (default)
  kStop,  // stop the child's process group as for a cancel
};

struct ProcessSpec {
  // argv[0] is a path, or a name looked up in the child's PATH (the spec's PATH, else
  // kDefaultPath). Use ShellArgv() for `sh -c` with the worker contract's quoting.
  std::vector<std::string> argv;
  // The child's environment is clean: only `env`, plus the variables named in `env_allow`
  // copied from the agent's environment (`env` wins), plus PATH=kDefaultPath when unset.
  std::map<std::string, std::string> env;
  std::vector<std::string> env_allow;
  // Absolute path of an existing directory (the caller checks it lies inside the sandbox).
  std::string cwd;
  // Bytes written to the child's stdin, which is then closed; nullopt = stdin is /dev/null.
  std::optional<std::string> stdin_data;
  // An interactive command (sandbox/process_control.h): stdin is a pipe that stays open
  // while the process runs, written through this handle, which also signals the group.
  // Exclusive with stdin_data. The spec shares the handle with its owner.
  std::shared_ptr<ProcessControl> control;
  // Wall-clock limit from the start; 0 = none. Expiry: SIGTERM to the group, then SIGKILL.
  std::chrono::milliseconds timeout{0};
  // Time between SIGTERM and SIGKILL of the group on cancel, deadline or shutdown.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(10)};
  // User name (or numeric uid) to run as; empty = the agent's own user. Needs root unless
  // it names the agent's own user.
  std::string run_as;
  // Output bytes (stdout + stderr) delivered to the sink; beyond it output is dropped and
  // the result says output_truncated.
  uint64_t max_output_bytes = 64ull << 20;
  OutputCapPolicy on_output_cap = OutputCapPolicy::kDrop;
  // Processes the command may have at once; 0 = no limit. Applied through RLIMIT_NPROC
  // when the child runs as a non-root user, and through pids.max of the command's own cgroup
  // when the runner has a pids-capable one (cgroup v1 `pids`, or v2 with the pids
  // controller; see ProcessRunner::Isolation()). If that cgroup cannot be set up with the
  // limit, the command does not start.
  int max_processes = 0;
  // Output read ahead while a chunk is with the sink, and the largest chunk delivered. 0 =
  // stop-and-wait: one read of at most OutputChunk::kMaxChunkBytes, then nothing more of
  // that stream until the sink acks it. N > 0: the runner keeps reading while less than N
  // bytes of a stream wait for the sink, and each delivery joins the waiting reads of one
  // stream (in order, never across streams) into one chunk of at most N bytes. Without a
  // linger (below) a fast consumer still gets small chunks at once; a slower one, or any
  // with a linger, gets fewer, bigger chunks, so a
  // per-chunk cost (the edge door signs each chunk) is paid once per N bytes. Memory stays
  // bounded: at most N bytes per stream wait, plus the chunk with the sink. A window of
  // 128 KiB or more also enlarges the stdout pipe of a command without `control` (not an
  // interactive one, which may live for hours) to min(N, 1 MiB) while the runner's budget
  // lasts (ProcessRunner::Options::large_pipe_budget_bytes), so a producer of small writes
  // wakes its reader less often.
  size_t output_window_bytes = 0;
  // With a window: a chunk smaller than the window waits up to this long (real time, from
  // when the sink could take it) for more of its stream's output to join it, while the pipe
  // keeps being read. A fast producer then fills chunks of up to the window (at least the
  // window less one read, unless the linger runs out first; exactly the window for stdout
  // when the window is 256 KiB or more: its reads take up to 256 KiB, never more than the
  // chunk has room for) instead of one pipe read each (32 KiB, OutputChunk::kMaxChunkBytes,
  // otherwise), so a per-chunk cost is paid as rarely as the window allows; a quiet one's output is
  // delivered at most this much later. End of its stream, or the other stream's output behind it
  // deliver at once. 0 = never waits. A throughput setting, not a behaviour timer: real time like
  // the drain after exit, so tests on an injected clock never have to move it.
  std::chrono::microseconds output_linger{0};
  // Written beside the group in the runner's ledger (the executor: the command id), so that
  // KillStaleGroups can say whose leftover group it killed. Newlines are dropped.
  std::string label;

  static constexpr const char* kDefaultPath =
      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
};

}  // namespace edge::sandbox
