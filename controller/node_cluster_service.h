// NodeClusterService on the controller (contract 000, wire.md §2): AttestNode, ChallengeNode,
// ConnectEdge and RotateEdgeKey on the callback API. Every call requires a verified client
// certificate whose CN is the node it speaks for (ConnectEdge: the bearer token's sub).
// The logic lives in EdgeAttestation (attest/challenge/rotate) and EdgeStream (the stream);
// this layer checks the caller and maps errors to gRPC statuses. Owns nothing.
#pragma once

#include "common/clock.h"
#include "controller/dispatcher.h"
#include "controller/edge_attestation.h"
#include "controller/edge_stream.h"
#include "controller/node_tokens.h"
#include "controller/refusal_log.h"
#include "controller/store.h"
#include "node_cluster.grpc.pb.h"

namespace edge::controller {

class NodeClusterServiceImpl final
    : public aegis::cluster::v1::NodeClusterService::CallbackService {
 public:
  NodeClusterServiceImpl(
      EdgeAttestation& attestation, Store& store, NodeTokenAuthority& tokens,
      Dispatcher& dispatcher, Clock& clock, RefusalLog* refusals = nullptr,
      TimerQueue* stream_timers = nullptr,
      std::chrono::milliseconds output_stall_limit = EdgeStreamDeps::kOutputStallLimit)
      : attestation_(attestation),
        store_(store),
        tokens_(tokens),
        dispatcher_(dispatcher),
        clock_(clock),
        refusals_(refusals),
        stream_timers_(stream_timers),
        output_stall_limit_(output_stall_limit) {}

  grpc::ServerUnaryReactor* AttestNode(grpc::CallbackServerContext* ctx,
                                       const aegis::cluster::v1::AttestNodeRequest* req,
                                       aegis::cluster::v1::AttestNodeResponse* resp) override;
  grpc::ServerUnaryReactor* ChallengeNode(grpc::CallbackServerContext* ctx,
                                          const aegis::cluster::v1::ChallengeNodeRequest* req,
                                          aegis::cluster::v1::ChallengeNodeResponse* resp) override;
  grpc::ServerBidiReactor<aegis::cluster::v1::EdgeEvent, aegis::cluster::v1::EdgeCommand>*
  ConnectEdge(grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* RotateEdgeKey(grpc::CallbackServerContext* ctx,
                                          const aegis::cluster::v1::RotateEdgeKeyRequest* req,
                                          aegis::cluster::v1::RotateEdgeKeyResponse* resp) override;

  // "ipv4:127.0.0.1:5555" → "ipv4:127.0.0.1" (the rate limit is per address, not per port).
  static std::string PeerAddress(const std::string& peer);

 private:
  EdgeAttestation& attestation_;
  Store& store_;
  NodeTokenAuthority& tokens_;
  Dispatcher& dispatcher_;
  Clock& clock_;
  RefusalLog* refusals_;
  TimerQueue* stream_timers_;  // the edge streams' stall limit (EdgeStreamDeps::timers)
  std::chrono::milliseconds output_stall_limit_;  // config cluster.output_stall_limit
};

}  // namespace edge::controller
