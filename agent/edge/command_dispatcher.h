// CommandDispatcher: the edge door. It turns the EdgeCommands read from ConnectEdge into
// sandbox::Executor calls and the executor's answers into progress chunks and results, and
// does nothing else: admission (stored results of repeated command ids, drain, duplicates,
// the edge.max_concurrent_commands cap passed as the request's DoorLimit), cancel handles and
// the drain state are the executor's.
//
//  - InvokeTool: a duplicate of a running command_id is ignored (Executor::IsRunning; its one
//    result follows). The door's own checks (ToRequest): inner envelope (CheckInnerEnvelope),
//    the user token (UserTokenVerifier, when issuers are configured), args Struct → JSON,
//    deadline → the executor's timeout. Output goes out as CommandProgress chunks, then
//    exactly one CommandResult per command_id, kept under edge.max_message_bytes (FitResult)
//    and written to the outbox BEFORE it is handed to the host. An InvokeTool without
//    command_id cannot be answered: it is logged and counted (stats().rejected_commands).
//  - Cancel: Executor::Cancel; ids not running are logged and ignored.
//  - PushConfig: config::ApplyDelta over the current config; tools, security contexts and
//    labels apply to the next InvokeTool (running ones keep theirs); the version is recorded.
//  - Drain: the executor drains; the host acknowledges (CapabilityUpdate agent.state=draining).
//  - Shutdown{grace}: the executor cancels what still runs after grace; then the host is told.
//  - a command with no known kind is logged and counted.
//
// Thread-safe. Created as a shared_ptr: the executor's callbacks hold a weak reference, so
// results of work that ends after the dispatcher is gone are only in the executor's store.
// Borrows the Executor, the OutboxStore and the Clock; the host is attached/detached.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/edge/outbox_store.h"
#include "agent/edge/user_token_verifier.h"
#include "common/clock.h"
#include "common/error.h"
#include "config/agent_config.h"
#include "node_cluster.pb.h"
#include "sandbox/cancel.h"
#include "sandbox/executor.h"

namespace edge::agentedge {

// What the dispatcher needs from the stream side (the EdgeSession).
class DispatcherHost {
 public:
  virtual ~DispatcherHost() = default;
  // A chunk of a running command. `ack` must be called exactly once, when the chunk was
  // written or dropped (back-pressure on the child's output).
  virtual void SendProgress(const std::string& command_id, aegis::cluster::v1::Chunk chunk,
                            std::function<void()> ack) = 0;
  // The terminal result of `command_id`, already stored in the outbox.
  virtual void SendResult(const std::string& command_id,
                          const aegis::cluster::v1::EdgeResult& result) = 0;
  // A PushConfig was applied; `capabilities_changed` when tools, contexts or labels changed.
  virtual void ConfigApplied(const config::AgentConfig& config, bool capabilities_changed) = 0;
  // A Drain was received and the executor refuses new work.
  virtual void DrainRequested() = 0;
  // A Shutdown was received and every command has ended (their results were sent first).
  virtual void ShutdownFinished() = 0;
};

// The inner SealEnvelope of an InvokeTool: present, user_security_token a compact JWT (three
// non-empty dot-separated parts), tenant_id equal to the node's tenant (`tid` of its
// NodeSecurityToken), security_context_name equal to the outer one. PERMISSION_DENIED or
// INVALID_ARGUMENT naming the field. (The token's signature and claims are checked after
// this by UserTokenVerifier when issuers are configured.)
Status CheckInnerEnvelope(const aegis::cluster::v1::InvokeTool& invoke, std::string_view tenant);

// Bytes a CommandResult event adds around its EdgeResult (the sealed envelope with its
// NodeSecurityToken, signature and canonical payload, the command id): results are kept below
// edge.max_message_bytes minus this.
inline constexpr size_t kResultEnvelopeReserve = 16 * 1024;
// CommandProgress chunks follow the streaming output policy of sandbox/executor_types.h
// (kStreamingOutputWindowBytes, kStreamingOutputLinger): one envelope (a SHA-256 of the chunk
// and an Ed25519 signature, verified again by the controller) per chunk of up to 1 MiB, the
// window capped by edge.max_message_bytes minus kResultEnvelopeReserve.

// The result to send for `result` under a message limit: itself when it fits, else an Err
// RESOURCE_EXHAUSTED that names its size, the limit and the config key (never a message the
// controller would refuse, which would end the stream).
aegis::cluster::v1::EdgeResult FitResult(const std::string& command_id,
                                         aegis::cluster::v1::EdgeResult result,
                                         uint64_t max_message_bytes);

class CommandDispatcher : public std::enable_shared_from_this<CommandDispatcher> {
 public:
  // Applies a new config to the executor (tools, security contexts); the daemon supplies it.
  using ApplyConfig = std::function<Status(const config::AgentConfig&)>;

  struct Stats {
    size_t running = 0;
    uint64_t invoked = 0;
    uint64_t rejected_commands = 0;  // commands that could not be answered (no id, no kind)
    bool draining = false;
    bool shutting_down = false;
    std::string config_version;     // of the last applied PushConfig ("" = as loaded)
    std::string last_config_error;  // of the last refused PushConfig
  };

  // `clock` judges the user tokens' expiry.
  static std::shared_ptr<CommandDispatcher> Create(sandbox::ExecutorApi& executor,
                                                   OutboxStore& outbox, config::AgentConfig config,
                                                   ApplyConfig apply_config, Clock& clock);

  // The host receives chunks, results and notices until Detach(), which waits for calls in
  // progress to return (never call it from inside a host call).
  void Attach(DispatcherHost* host);
  void Detach();
  // The node's tenant (`tid` of the current NodeSecurityToken).
  void SetTenant(std::string tenant);

  // Handles one command (from the stream's read callback; does not block on work). Never
  // throws: a failure while handling an InvokeTool answers that command with Err INTERNAL;
  // false when a command could not be handled at all (the caller should end the stream).
  bool Handle(const aegis::cluster::v1::EdgeCommand& command);

  Stats stats() const;
  config::AgentConfig config() const;
  bool draining() const;

 private:
  CommandDispatcher(sandbox::ExecutorApi& executor, OutboxStore& outbox, config::AgentConfig config,
                    ApplyConfig apply_config, Clock& clock)
      : executor_(executor),
        outbox_(outbox),
        clock_(clock),
        config_(std::move(config)),
        apply_config_(std::move(apply_config)) {}

  void HandleOne(const aegis::cluster::v1::EdgeCommand& command);
  // Loads security.user_token_issuers of `config` (mu_ held).
  void LoadVerifierLocked();
  // The door's name for the executor's per-door cap and counts.
  inline static constexpr const char* kDoor = "edge";

  void HandleInvoke(const aegis::cluster::v1::InvokeTool& invoke);
  Result<sandbox::InvokeRequest> ToRequest(const aegis::cluster::v1::InvokeTool& invoke);
  void HandleCancel(const aegis::cluster::v1::Cancel& cancel);
  void HandlePushConfig(const aegis::cluster::v1::PushConfig& push);
  void HandleDrain();
  void HandleShutdown(const aegis::cluster::v1::Shutdown& shutdown);
  // Stores the result in the outbox, forgets the command and hands the result to the host.
  // True when the outbox has stored a result of the command (this one, or a first one).
  bool Complete(const std::string& command_id, const aegis::cluster::v1::EdgeResult& result);
  void WithHost(const std::function<void(DispatcherHost&)>& fn);

  sandbox::ExecutorApi& executor_;
  OutboxStore& outbox_;
  Clock& clock_;

  mutable std::mutex mu_;
  config::AgentConfig config_;
  ApplyConfig apply_config_;
  std::string tenant_;
  std::shared_ptr<const UserTokenVerifier> verifier_;
  std::string verifier_error_;  // why the configured issuers could not be loaded
  bool shutting_down_ = false;
  Stats stats_;

  std::mutex host_mu_;
  std::condition_variable host_cv_;
  DispatcherHost* host_ = nullptr;
  int host_calls_ = 0;
};

}  // namespace edge::agentedge
