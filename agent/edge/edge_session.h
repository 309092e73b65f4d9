// EdgeSession: the agent's side of the edge stream (seeds/000, wire.md §2.3) — one control
// thread runs the connect loop, a TimerQueue on the injected Clock runs the periodic work:
//
//   loop: key (keys/node.ed25519, created if missing) → token (AttestNode → ChallengeNode, the
//         pending join token as proof on the first enrollment; reused while it stays valid
//         for token_reuse_margin) → ConnectEdge (Bearer token) → Hello{capabilities, new
//         UUIDv4 stream_id} → outbox resent → heartbeats every cluster.heartbeat_interval_secs
//         → wait for the stream to end → backoff (FullJitterBackoff, reset after the first
//         message received on a new stream) → again.
//   token renewal at a jittered 70–90 % of its lifetime (RotateEdgeKey with the same key,
//         falling back to a new attestation); the next envelope carries the new token.
//   key rotation on disk (edge-agent rotate-key): seen at the next heartbeat (the key file's
//         fingerprint changed) or reconnect; the session re-attests with the new key and
//         switches key and token without dropping the stream.
//   commands go to the CommandDispatcher; results come back through the outbox.
//   Shutdown: when every command has ended and its result is queued, the stream is
//         half-closed (WritesDone), and once it is over `request_exit` is called.
//
// Every EdgeEvent is sealed (identity::EnvelopeCodec::SealEvent) when it is written.
// The loop, its backoff and its reset rule are the shared ReconnectLoop (common/
// reconnect_loop.h); the stream is the shared client stream (agent/edge/edge_stream.h), on a
// ClientCallQueue of its own.
// Stop() ends every wait and call at once. Owns the stream, the dispatcher, the outbox
// connection, its TimerQueue and its ReconnectLoop (the thread); borrows the Executor and the
// injected Clock/Random/Backoff.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "agent/edge/command_dispatcher.h"
#include "agent/edge/edge_stream.h"
#include "agent/edge/node_attestor.h"
#include "agent/edge/node_key_store.h"
#include "agent/edge/node_token.h"
#include "agent/edge/outbox_store.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/reconnect_loop.h"
#include "common/timer_queue.h"
#include "config/agent_config.h"
#include "sandbox/executor.h"

namespace edge::agentedge {

struct SessionDeps {
  Clock& clock;
  Random& random;    // renewal jitter
  Backoff& backoff;  // reconnects (wire.md: base 1 s, cap 60 s)
  sandbox::ExecutorApi& executor;
  std::shared_ptr<grpc::Channel> channel;  // mTLS to the controller
  std::string controller;                  // its address, for logs and status
  CommandDispatcher::ApplyConfig apply_config;
  // Asks the process to exit 0 (after a Shutdown command); must not block.
  std::function<void(const std::string& reason)> request_exit;
  // Called when the state changes (connected, backoff, ...), a config is applied or a drain
  // asked for, so the daemon's status file shows it at once; may be called with the
  // session's lock held: must not block nor call back into the session. Optional.
  std::function<void()> status_changed;
};

struct SessionOptions {
  std::string agent_version;
  std::chrono::milliseconds rpc_timeout{std::chrono::seconds(15)};
  OutboxStore::Options outbox;
  // A token is reused on reconnect only while it stays valid at least this long.
  std::chrono::milliseconds token_reuse_margin{std::chrono::minutes(2)};
  // After WritesDone on Shutdown, how long the controller has to end the stream.
  std::chrono::milliseconds close_timeout{std::chrono::seconds(5)};
};

struct SessionStatus;
// Why a session is wedged at `now_ms`: connected, but no heartbeat has left for three
// heartbeat intervals (30 s when the controller named none). Every other state is a bounded
// wait (attestation and stream calls have deadlines; backoff ends) and never stuck.
std::optional<std::string> SessionStuck(const SessionStatus& s, int64_t now_ms);

struct SessionStatus {
  std::string state;  // starting | attesting | connected | backoff | shutting_down | stopped
  std::string controller;
  std::string stream_id;  // of the current stream ("" when none)
  uint64_t attempts = 0;  // connect attempts (attestation or stream)
  uint64_t streams = 0;   // streams opened
  std::chrono::milliseconds last_backoff{0};
  std::string last_error;
  int64_t last_heartbeat_ms = 0;
  int64_t connected_since_ms = 0;  // when the current stream opened
  int64_t token_expires_at_ms = 0;
  std::string tenant_id;
  int64_t heartbeat_interval_secs = 0;
  size_t outbox_entries = 0;
  CommandDispatcher::Stats commands;
};

class EdgeSession final : public DispatcherHost {
 public:
  // Opens the outbox (data_dir/state/agent.db) and builds the dispatcher. Validates node_id.
  static Result<std::unique_ptr<EdgeSession>> Create(config::AgentConfig config, SessionDeps deps,
                                                     SessionOptions options);
  ~EdgeSession() override;
  EdgeSession(const EdgeSession&) = delete;
  EdgeSession& operator=(const EdgeSession&) = delete;

  // Starts the control thread (non-blocking).
  Status Start();
  // Ends every wait, call and the stream; returns when the thread has ended. Idempotent.
  void Stop();

  SessionStatus status() const;
  // The timers run on the injected clock: tests advance a ManualClock and Poke() them.
  TimerQueue& timers() { return timers_; }
  CommandDispatcher& dispatcher() { return *dispatcher_; }
  OutboxStore& outbox() { return *outbox_; }

  // DispatcherHost
  void SendProgress(const std::string& command_id, aegis::cluster::v1::Chunk chunk,
                    std::function<void()> ack) override;
  void SendResult(const std::string& command_id,
                  const aegis::cluster::v1::EdgeResult& result) override;
  void ConfigApplied(const config::AgentConfig& config, bool capabilities_changed) override;
  void DrainRequested() override;
  void ShutdownFinished() override;

 private:
  EdgeSession(config::AgentConfig config, SessionDeps deps, SessionOptions options);

  // One pass of the reconnect loop (common/reconnect_loop.h): credentials, the stream, its end.
  ReconnectLoop::Next Attempt();
  // After a finished shutdown: asks the process to exit and ends the loop.
  ReconnectLoop::Next ExitAfterShutdown();
  // Stop(): ends every wait and call of the attempt in progress.
  void Interrupt();
  // Key and token for the next stream; false (error recorded) when they could not be had.
  bool EnsureCredentials();
  void InstallToken(NodeToken token, std::optional<identity::NodeKey> key);
  // While connected: renewal and key changes; returns when the stream has ended or on Stop.
  void ServeStream(uint64_t gen);
  void OpenStreamLocked();
  void SetError(const std::string& what);
  struct UnwrittenResult;
  // The stream `stream_id` ended with `status`: when the status blames a message, the results
  // on it count a failed attempt in the outbox (OutboxStore::BlameStream).
  void BlameResultsOf(const std::string& stream_id, const grpc::Status& status,
                      const std::shared_ptr<UnwrittenResult>& unwritten);

  // All *Locked functions expect mu_ held.
  bool StreamUpLocked() const;
  // status_.state = `state`, and status_changed when it differs.
  void SetStateLocked(std::string_view state);
  bool SendLocked(aegis::cluster::v1::EdgeEvent event, EdgeStream::WriteCallback done = {});
  void SendResultLocked(const std::string& command_id,
                        const aegis::cluster::v1::EdgeResult& result);
  void SendCapabilitiesLocked();
  void ScheduleHeartbeatLocked();
  void ScheduleRenewalLocked(std::chrono::milliseconds delay);
  void CancelStreamTimersLocked();
  aegis::cluster::v1::EdgeCapabilities CapabilitiesLocked() const;
  Status Seal(aegis::cluster::v1::EdgeEvent& event, const std::string& stream_id);
  void OnHeartbeat(uint64_t gen);
  // Prunes the outbox `delay` from now, unless a prune of stream `gen` is due by then already.
  void SchedulePrune(uint64_t gen, std::chrono::milliseconds delay);
  void PruneSettled(uint64_t gen);

  const std::string node_id_;
  config::AgentConfig config_;
  SessionDeps deps_;
  SessionOptions options_;
  NodeKeyStore keys_;
  TimerQueue timers_;
  ReconnectLoop loop_;  // the session's thread: attempts and the backoff between them
  std::unique_ptr<OutboxStore> outbox_;
  std::shared_ptr<CommandDispatcher> dispatcher_;
  std::unique_ptr<NodeAttestor> attestor_;
  std::unique_ptr<aegis::cluster::v1::NodeClusterService::Stub> stub_;

  // What envelopes are sealed with; never held while calling out.
  mutable std::mutex cred_mu_;
  std::optional<identity::NodeKey> key_;
  std::string token_string_;

  // The outbox prune pending, for stream generation `gen` (0: none). Scheduled from write
  // callbacks, which may run inside Send with mu_ held, so it has its own (leaf) lock.
  struct PendingPrune {
    uint64_t gen = 0;
    Clock::MonoTime due{};
    TimerQueue::TimerId timer = 0;
  };
  std::mutex prune_mu_;
  PendingPrune prune_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::optional<NodeToken> token_;
  uint64_t key_fingerprint_ = 0;
  bool key_changed_ = false;
  bool renew_due_ = false;
  bool shutdown_finished_ = false;
  std::shared_ptr<EdgeStream> stream_;
  // The result whose write was under way (or the first queued) when a stream ended: written
  // from write callbacks, which may run inside Send with mu_ held, so it has its own lock.
  struct UnwrittenResult {
    std::mutex mu;
    std::string command_id;  // "" while every result written on the stream completed
  };
  std::shared_ptr<UnwrittenResult> unwritten_;  // of the current stream
  uint64_t gen_ = 0;                            // identifies the current stream in callbacks
  std::string stream_id_;
  bool stream_done_ = false;
  grpc::Status done_status_;
  TimerQueue::TimerId heartbeat_timer_ = 0;
  TimerQueue::TimerId stable_timer_ = 0;  // the stream stayed up kStableStream: taken
  TimerQueue::TimerId renew_timer_ = 0;
  Clock::MonoTime renew_at_{};  // when renew_timer_ fires (monotonic)
  SessionStatus status_;
  // The stream's events run on this queue's thread. Declared last, so it is shut down and
  // joined first, while everything its callbacks use still lives: the loop's thread (joined by
  // Stop() in the destructor's body) waits for the stream's on_done, but only for 10 s after a
  // cancel, so a stalled stream may still be ending then.
  ClientCallQueue calls_{"edge-stream"};
};

}  // namespace edge::agentedge
