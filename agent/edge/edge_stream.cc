#include "agent/edge/edge_stream.h"

namespace edge {
template class ClientStream<aegis::cluster::v1::EdgeEvent, aegis::cluster::v1::EdgeCommand>;
}  // namespace edge

namespace edge::agentedge {

namespace pb = aegis::cluster::v1;

namespace {

constexpr ClientStreamNames kNames{
    .logger = "edge",
    .seal_failed = "edge event not sent: sealing failed",
    .handler_failed = "edge command handler failed",
    .cancelled = "edge stream cancelled: a command could not be handled; the agent reconnects",
};

}  // namespace

std::shared_ptr<EdgeStream> StartEdgeStream(pb::NodeClusterService::Stub& stub,
                                            const std::string& bearer_token,
                                            EdgeStream::Callbacks callbacks,
                                            ClientCallQueue& queue) {
  return EdgeStream::Start(
      [&stub](grpc::ClientContext* context, grpc::CompletionQueue* cq) {
        return stub.PrepareAsyncConnectEdge(context, cq);
      },
      bearer_token, std::move(callbacks), kNames, queue);
}

}  // namespace edge::agentedge
