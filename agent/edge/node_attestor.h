// NodeAttestor: the agent's unary calls that obtain and renew its NodeSecurityToken
// (wire.md §2.3, §2.5): AttestNode (role EDGE, raw public key) → ChallengeNode (Ed25519 over
// the raw nonce), and RotateEdgeKey (dual signature; new key == old key is a token refresh).
//
// First edge enrollment: when certs/join_token.pending exists (or a token is passed in), it
// goes as ChallengeNode.bootstrap_proof.enrollment_token, and the file is deleted after the
// first successful ChallengeNode. If the controller answers FAILED_PRECONDITION with the
// proof (the token was already redeemed for us, e.g. an answer lost on the way), the
// attestation is retried once without it. Later attestations send no proof.
//
// Blocking calls with a deadline, made from the edge session's control thread (or the CLI);
// CancelInFlight() ends a call at once (Stop). Errors map the gRPC status to ErrorCode
// (UNAVAILABLE/DEADLINE_EXCEEDED → kUnavailable, ...) with "<Rpc>: <server message>".
// Thread-safe; borrows the channel and the Clock.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/edge/node_token.h"
#include "agent/identity/node_key.h"
#include "common/clock.h"
#include "common/error.h"
#include "node_cluster.grpc.pb.h"

namespace edge::agentedge {

class NodeAttestor {
 public:
  struct Options {
    std::chrono::milliseconds rpc_timeout{std::chrono::seconds(15)};
  };
  struct Rotation {
    NodeToken token;
    std::chrono::milliseconds overlap_window{0};
  };

  NodeAttestor(std::shared_ptr<grpc::Channel> channel, std::string node_id, std::string data_dir,
               Clock& clock, Options options);
  NodeAttestor(std::shared_ptr<grpc::Channel> channel, std::string node_id, std::string data_dir,
               Clock& clock)
      : NodeAttestor(std::move(channel), std::move(node_id), std::move(data_dir), clock,
                     Options{}) {}

  // AttestNode → ChallengeNode with `key`. `enrollment_token` (a token from the command line,
  // never stored) takes precedence over certs/join_token.pending.
  Result<NodeToken> Attest(const identity::NodeKey& key, const std::string& enrollment_token = "");
  // RotateEdgeKey from `old_key` to `new_key`, authorized by `current`.
  Result<Rotation> Rotate(const identity::NodeKey& old_key, const identity::NodeKey& new_key,
                          const NodeToken& current);
  // A fresh token for the same key: RotateEdgeKey with new key == old key, falling back to a
  // new attestation when that fails.
  Result<NodeToken> Renew(const identity::NodeKey& key, const NodeToken& current);

  // Cancels the calls in flight; later calls fail with CANCELLED until Reset().
  void CancelInFlight();
  void Reset();

 private:
  // A ClientContext registered for CancelInFlight while it lives.
  class Call;
  Result<NodeToken> AttestOnce(const identity::NodeKey& key, const std::string& proof);

  std::unique_ptr<aegis::cluster::v1::NodeClusterService::Stub> stub_;
  std::string node_id_;
  std::string data_dir_;
  Clock& clock_;
  Options options_;
  std::mutex mu_;
  std::set<grpc::ClientContext*> in_flight_;
  bool cancelled_ = false;
};

}  // namespace edge::agentedge
