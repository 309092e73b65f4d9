// ExecutorApi: what a door (edge stream, worker RPC, compute member) may ask of the executor,
// and nothing more. Doors program against this interface; `Executor` is the implementation
// (SQLite state, child processes, the blocking-work pool) and tests of a door use a fake
// (tests/support/fake_executor.h) instead of all that.
//
// Every rule lives behind it: admission (drain, caps per executor / door / security
// context, duplicate command ids, idempotent replay), leases, paths, deadlines and output
// caps. A door maps its wire format to these calls and the results back; it keeps cancel
// handles, nothing else. Work never runs on the calling thread: Invoke's `done` and chunk
// sink run on an executor thread, or on the caller's thread only for an immediate refusal.
//
// File operations are tools (file.read, file.write, file.list, file.stat, file.delete,
// file.move, file.chmod, file.glob) run through Invoke with `sandbox_id` and `lease`, so they
// are admitted, fenced and scheduled like any other command; so are sessions (session.start,
// session.input, session.signal: wire.md §5.5). Sandbox lifecycle calls are
// synchronous and short (registry rows and a directory), and check the lease first.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "sandbox/cancel.h"
#include "sandbox/executor_types.h"
#include "sandbox/sandbox_registry.h"
#include "sandbox/sandbox_types.h"
#include "sandbox/security_context.h"
#include "sandbox/tool_registry.h"

namespace edge::sandbox {

class ExecutorApi {
 public:
  using DoneCallback = std::function<void(InvokeResult)>;

  virtual ~ExecutorApi() = default;

  // THE one place a command is admitted, whatever door it came through; `done` is called
  // exactly once (see Executor::Invoke for the order of the checks).
  virtual void Invoke(InvokeRequest request, CancelToken cancel, ChunkSink on_chunk,
                      DoneCallback done) = 0;
  // The stored result of a completed command_id (`replayed` set), nullopt when there is none.
  virtual Result<std::optional<InvokeResult>> StoredResult(const std::string& command_id) const = 0;
  // Whether `command_id` runs now (through any door).
  virtual bool IsRunning(const std::string& command_id) const = 0;
  // Cancels the running `command_id`; false when it is not running.
  virtual bool Cancel(const std::string& command_id, const std::string& reason) = 0;
  // The results of the commands `door` had admitted when the previous agent process died
  // without ending them (AGENT_RESTARTED, already stored for their command_ids), handed over
  // once: the door delivers them as it delivers any result.
  virtual std::vector<InvokeResult> TakeInterrupted(const std::string& door) = 0;
  // A door of ExecutorOptions::confirming_doors has stored the interrupted result of
  // `command_id` where it keeps results: its journal row goes now. Idempotent.
  virtual edge::Status ConfirmInterrupted(const std::string& command_id) = 0;

  // The executor's drain state is the only one: new work is refused with DRAINING.
  virtual void Drain() = 0;
  virtual bool draining() const = 0;
  // A worker's drain (worker.shutdown): new spawns are refused with DRAINING, while commands,
  // files and the existing sandboxes keep working. Drain() implies it.
  virtual void DrainSpawns() = 0;
  virtual bool spawns_draining() const = 0;
  // Drain, wait up to `grace`, cancel what is left; `done` once nothing runs.
  virtual void Shutdown(std::chrono::milliseconds grace, std::function<void()> done) = 0;

  // Tool names (advertised by a door) and how many invocations of a door run now.
  virtual std::vector<std::string> Tools() const = 0;
  virtual size_t running(const std::string& door) const = 0;
  // Replaces the config tools and security contexts (validated; on error nothing changes).
  virtual edge::Status Reconfigure(
      const std::map<std::string, ToolConfig>& tools,
      const std::map<std::string, SecurityContextConfig>& security_contexts) = 0;

  // Sandboxes (the worker door). Spawn and Destroy accept the lease for the sandbox id
  // before anything is created or removed; RenewLease replaces the current lease.
  virtual Result<SandboxInfo> Spawn(const SpawnRequest& request, const Lease* lease) = 0;
  // Destroy answers through `done`, exactly once, when the sandbox's commands have ended and
  // its workspace is gone (the control plane releases the lease on that answer), or with
  // UNAVAILABLE when they have not ended in time. A refusal (unknown id, lease) is answered
  // before the call returns; otherwise `done` runs on an executor thread and must not block.
  using DestroyCallback = std::function<void(Result<SandboxInfo>)>;
  virtual void Destroy(std::string_view sandbox_id, const Lease* lease, DestroyCallback done) = 0;
  virtual Result<SandboxInfo> Status(std::string_view sandbox_id) const = 0;
  virtual Result<std::vector<SandboxInfo>> List() const = 0;
  virtual Result<Lease> RenewLease(const Lease& renewed) = 0;
  // The last `n` lines of a sandbox's console log.
  virtual Result<std::vector<std::string>> Logs(std::string_view sandbox_id, size_t n) = 0;
};

}  // namespace edge::sandbox
