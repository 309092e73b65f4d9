// SimNode: one simulated edge agent of the fleet bench (issue 14 item 4), speaking the real
// protocol to the real controller with the agent's own libraries:
//  - its own identity: a join token redeemed with bootstrap::JoinTokenRedeemer
//    (ExchangeJoinToken; keystore under its own data_dir), its own Ed25519 NodeKey, first
//    attestation with agentedge::NodeAttestor (AttestNode → ChallengeNode, the join token as
//    proof);
//  - its own mTLS channel (identity::MtlsOptions, with GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, so
//    no two nodes share a subchannel or a TCP connection);
//  - its own ConnectEdge stream: agentedge::EdgeStream (the agent's callback-API reactor),
//    every event sealed with identity::EnvelopeCodec::SealEvent; Hello, a Heartbeat every
//    interval, and each InvokeTool answered with one CommandResult — `sysinfo` from a payload
//    collected once at start (no process is started), any other tool Err NOT_FOUND;
//  - reconnects as agent/edge EdgeSession does: FullJitterBackoff (base 1 s, cap 60 s), reset
//    once the controller has taken the stream (its first message, or 60 s up); the token is
//    reused while it stays valid for 2 more minutes, else the node attests again; renewal
//    (RotateEdgeKey with the same key) at a jittered 70–90 % of the token's lifetime.
//
// Blocking calls (Enroll, re-attestation, renewal) run on the caller's thread or the shared
// WorkPool; stream callbacks on gRPC's threads; heartbeats and reconnects on the shared
// TimerQueue. Owned by the bench; borrows the FleetContext, which outlives it. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/edge/edge_stream.h"
#include "agent/edge/node_attestor.h"
#include "agent/edge/node_token.h"
#include "agent/identity/node_key.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/random.h"
#include "common/timer_queue.h"
#include "node_cluster.grpc.pb.h"
#include "tests/bench/fleet/work_pool.h"

namespace edge::bench {

// Fleet-wide counters, written from every node's callbacks.
struct FleetCounters {
  std::atomic<int64_t> connected{0};       // Hello written and the stream not over
  std::atomic<int64_t> streams_opened{0};  // ConnectEdge calls started
  std::atomic<int64_t> streams_ended{0};   // ... and ended (any status)
  std::atomic<int64_t> heartbeats_sent{0};
  std::atomic<int64_t> invokes_received{0};
  std::atomic<int64_t> results_written{0};
  std::atomic<int64_t> attestations{0};  // after the first: the token was not fresh
  std::atomic<int64_t> renewals{0};
  std::atomic<int64_t> errors{0};  // failed re-attestations, renewals

  // Epoch ms of events the figures need, appended under `mu`.
  std::mutex mu;
  std::vector<int64_t> connects_ms;   // each Hello written
  std::vector<int64_t> attempts_ms;   // each ConnectEdge started
  std::vector<int64_t> invoke_rx_ms;  // each InvokeTool received
  std::string last_end_status;        // the latest non-OK end of a stream, for the report
  void Note(std::vector<int64_t>& v, int64_t ms) {
    std::lock_guard lock(mu);
    v.push_back(ms);
  }
};

struct FleetContext {
  Clock& clock;
  Random& random;
  TimerQueue& timers;
  // Every node's stream runs its events here: the agent's own ClientStream on a queue of two
  // threads (as many as gRPC 1.51's callback API gives its reactions), outliving the nodes.
  ClientCallQueue& calls;
  WorkPool& pool;
  FleetCounters& counters;
  std::string target;  // controller host:port
  std::chrono::seconds heartbeat{30};
  // The answer to every sysinfo: the bench host's sysinfo, collected once and mapped with
  // the agent's agentedge::ToEdgeResult.
  aegis::cluster::v1::EdgeResult sysinfo_result;
};

class SimNode {
 public:
  struct EnrollTimes {
    std::chrono::milliseconds exchange{0};  // ExchangeJoinToken + keystore written and read
    std::chrono::milliseconds attest{0};    // AttestNode → ChallengeNode with the proof
  };

  SimNode(std::string node_id, FleetContext& ctx);
  ~SimNode();
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  const std::string& node_id() const { return node_id_; }

  // Blocking: redeems `join_token` (keystore under `data_dir`, CA checked against
  // `ca_pin`), creates the node key and the channel, attests with the token as proof.
  Result<EnrollTimes> Enroll(const std::string& join_token, const std::string& data_dir,
                             const std::string& ca_pin);
  // Opens the first stream (non-blocking).
  void Start();
  // No more reconnects; cancels the stream. The stream ends later (stream_over()).
  void Stop();
  bool connected() const { return connected_.load(); }
  // True when no stream is open (never started, or its OnDone ran).
  bool stream_over() const;
  // Epoch ms of the latest heartbeats written to the stream, oldest first (at most 8).
  std::vector<int64_t> HeartbeatSends() const;

 private:
  // Starts a stream (token reused) or, with a stale token, attests first on the pool.
  void Attempt();
  void Open();
  void Reattest();
  void OnDone(uint64_t gen, const grpc::Status& status);
  bool OnCommand(uint64_t gen, const aegis::cluster::v1::EdgeCommand& command);
  void OnHeartbeat(uint64_t gen);
  void Taken(uint64_t gen);
  void InstallToken(agentedge::NodeToken token);
  void Renew();
  Status Seal(aegis::cluster::v1::EdgeEvent& event, const std::string& stream_id);
  // Sends on the stream of `gen` (false when it is not the current one).
  bool SendOn(uint64_t gen, aegis::cluster::v1::EdgeEvent event,
              agentedge::EdgeStream::WriteCallback done = {});

  const std::string node_id_;
  FleetContext& ctx_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<aegis::cluster::v1::NodeClusterService::Stub> stub_;
  std::unique_ptr<agentedge::NodeAttestor> attestor_;
  std::string data_dir_;

  // What envelopes are sealed with, and the heartbeats sealed; never held while calling out
  // (the seal runs under the stream's lock).
  mutable std::mutex cred_mu_;
  std::optional<identity::NodeKey> key_;
  std::optional<agentedge::NodeToken> token_;
  std::vector<int64_t> heartbeat_sends_;

  mutable std::mutex mu_;
  bool stopping_ = false;
  uint64_t gen_ = 0;
  std::shared_ptr<agentedge::EdgeStream> stream_;
  bool open_ = false;  // a stream was started and its OnDone has not run
  bool taken_ = false;
  FullJitterBackoff backoff_;
  TimerQueue::TimerId heartbeat_timer_ = 0;
  TimerQueue::TimerId retry_timer_ = 0;
  TimerQueue::TimerId stable_timer_ = 0;
  TimerQueue::TimerId renew_timer_ = 0;

  std::atomic<bool> connected_{false};
};

}  // namespace edge::bench
