// NodeClusterService on the controller (contract 000, wire.md §2). Every call requires a
// verified client certificate whose CN is the node it speaks for. This part is the
// mTLS gate and AttestNode's challenge; ChallengeNode, ConnectEdge and RotateEdgeKey answer
// UNIMPLEMENTED until the edge-stream work lands.
#pragma once

#include <map>
#include <mutex>

#include "common/clock.h"
#include "node_cluster.grpc.pb.h"

namespace edge::controller {

class NodeClusterServiceImpl final
    : public aegis::cluster::v1::NodeClusterService::CallbackService {
 public:
  explicit NodeClusterServiceImpl(Clock& clock) : clock_(clock) {}

  grpc::ServerUnaryReactor* AttestNode(grpc::CallbackServerContext* ctx,
                                       const aegis::cluster::v1::AttestNodeRequest* req,
                                       aegis::cluster::v1::AttestNodeResponse* resp) override;

 private:
  struct Challenge {
    std::string node_id;
    std::string nonce;
    std::string public_key;
    Clock::WallTime expires_at;
  };
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Challenge> challenges_;
};

}  // namespace edge::controller
