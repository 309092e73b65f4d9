// FakeExecutor: a door's stand-in for the executor in unit tests — no io_context, no SQLite,
// no child processes. It records every call; the test decides when and how each invocation
// ends (Chunk, Finish) and what the admission answers are (Refuse, SetStored, Drain).
//
// It applies no rule of its own beyond what a door may rely on from the ExecutorApi
// contract: `done` is called exactly once per Invoke (by Finish, a refusal, or Shutdown),
// a draining executor refuses with DRAINING, a stored result is replayed with `replayed`.
// Thread-safe; callbacks run on the thread that calls Finish/Chunk/Shutdown (or Invoke's, for
// refusals), never under the fake's lock.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/executor_api.h"

namespace edge::testing {

class FakeExecutor final : public sandbox::ExecutorApi {
 public:
  struct Call {
    sandbox::InvokeRequest request;
    sandbox::CancelToken cancel;
    sandbox::ChunkSink on_chunk;
    DoneCallback done;
  };

  explicit FakeExecutor(std::vector<std::string> tools = {"exec", "file.read", "file.write",
                                                          "sysinfo"})
      : tools_(std::move(tools)) {}

  // ---- ExecutorApi ----
  void Invoke(sandbox::InvokeRequest request, sandbox::CancelToken cancel,
              sandbox::ChunkSink on_chunk, DoneCallback done) override;
  Result<std::optional<sandbox::InvokeResult>> StoredResult(
      const std::string& command_id) const override;
  bool IsRunning(const std::string& command_id) const override;
  bool Cancel(const std::string& command_id, const std::string& reason) override;
  std::vector<sandbox::InvokeResult> TakeInterrupted(const std::string& door) override;
  // Records the id (confirmed()).
  edge::Status ConfirmInterrupted(const std::string& command_id) override;
  std::vector<std::string> confirmed() const;
  void Drain() override;
  bool draining() const override;
  void DrainSpawns() override;
  bool spawns_draining() const override;
  void Shutdown(std::chrono::milliseconds grace, std::function<void()> done) override;
  std::vector<std::string> Tools() const override;
  size_t running(const std::string& door) const override;
  edge::Status Reconfigure(
      const std::map<std::string, sandbox::ToolConfig>& tools,
      const std::map<std::string, sandbox::SecurityContextConfig>& security_contexts) override;
  Result<sandbox::SandboxInfo> Spawn(const sandbox::SpawnRequest& request,
                                     const sandbox::Lease* lease) override;
  void Destroy(std::string_view sandbox_id, const sandbox::Lease* lease,
               DestroyCallback done) override;
  Result<sandbox::SandboxInfo> Status(std::string_view sandbox_id) const override;
  Result<std::vector<sandbox::SandboxInfo>> List() const override;
  Result<sandbox::Lease> RenewLease(const sandbox::Lease& renewed) override;
  Result<std::vector<std::string>> Logs(std::string_view sandbox_id, size_t n) override;

  // ---- what the test controls ----
  // The next Invoke is refused with `error` (done called at once, nothing recorded).
  void RefuseNext(Error error);
  // The next Invoke throws std::runtime_error(what) before recording anything: a fault
  // inside the executor, for the door's last line of defence.
  void ThrowOnNextInvoke(std::string what) {
    std::lock_guard lock(mu_);
    throw_next_ = std::move(what);
  }
  // A completed command: Invoke and StoredResult replay it.
  void SetStored(sandbox::InvokeResult result);
  // A result TakeInterrupted(door) hands over once (as if the previous agent died).
  void AddInterrupted(const std::string& door, sandbox::InvokeResult result);
  // Sends a chunk of the pending invocation `command_id`; returns false when none is pending.
  // `ack` is called when the door acknowledges it (back-pressure).
  bool Chunk(
      const std::string& command_id, sandbox::OutputChunk chunk, std::function<void()> ack = [] {});
  // Ends the pending invocation `command_id` with `result` (its command_id is filled in).
  bool Finish(const std::string& command_id, sandbox::InvokeResult result);
  // The log line-source for Logs and the next Spawn/Destroy/Renew answers.
  void SetLogs(std::vector<std::string> lines) { logs_ = std::move(lines); }

  // Every request Invoke received (refused ones too), in order.
  std::vector<sandbox::InvokeRequest> requests() const;
  // Invocations admitted and not yet finished.
  size_t pending() const;
  // (command_id, reason) of every Cancel call that found its command.
  std::vector<std::pair<std::string, std::string>> cancels() const;
  // Reconfigure calls received.
  size_t reconfigures() const;
  // Leases given to Spawn/Destroy/RenewLease, in order.
  std::vector<sandbox::Lease> leases() const;
  // Every request Spawn received, in order.
  std::vector<sandbox::SpawnRequest> spawns() const;

 private:
  std::optional<Call> Take(const std::string& command_id);

  std::vector<std::string> tools_;
  mutable std::mutex mu_;
  std::vector<sandbox::InvokeRequest> requests_;
  std::vector<sandbox::SpawnRequest> spawns_;
  std::vector<Call> pending_;
  std::map<std::string, sandbox::InvokeResult> stored_;
  std::map<std::string, std::vector<sandbox::InvokeResult>> interrupted_;
  std::vector<std::string> confirmed_;  // ConfirmInterrupted calls, in order
  std::optional<Error> refuse_next_;
  std::optional<std::string> throw_next_;
  std::vector<std::pair<std::string, std::string>> cancels_;
  bool draining_ = false;
  bool spawns_draining_ = false;
  size_t reconfigures_ = 0;
  std::map<std::string, sandbox::SandboxInfo> sandboxes_;
  std::vector<sandbox::Lease> leases_;
  std::vector<std::string> logs_;
};

}  // namespace edge::testing
