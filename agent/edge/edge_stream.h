// EdgeStream: one ConnectEdge call (seeds/000) — the shared client stream
// (common/grpc_client_stream.h: driven on a ClientCallQueue, one write in flight, a read
// always pending) with EdgeEvent out and EdgeCommand in.
//
// Every queued EdgeEvent is sealed (Callbacks::seal) just before it is written, so its
// envelope carries the current token and a fresh timestamp. Callbacks::on_read gets each
// command; false (or an exception) cancels the stream, so the controller sees the node go away
// instead of a node that heartbeats but never reads. The session owns it through a shared_ptr.
#pragma once

#include <memory>
#include <string>

#include "common/grpc_client_stream.h"
#include "node_cluster.grpc.pb.h"

namespace edge {
extern template class ClientStream<aegis::cluster::v1::EdgeEvent, aegis::cluster::v1::EdgeCommand>;
}  // namespace edge

namespace edge::agentedge {

using EdgeStream = ClientStream<aegis::cluster::v1::EdgeEvent, aegis::cluster::v1::EdgeCommand>;

// Starts ConnectEdge with metadata `authorization: Bearer <bearer_token>`.
// Its events run on `queue`, which must outlive the call (until on_done has returned).
std::shared_ptr<EdgeStream> StartEdgeStream(aegis::cluster::v1::NodeClusterService::Stub& stub,
                                            const std::string& bearer_token,
                                            EdgeStream::Callbacks callbacks,
                                            ClientCallQueue& queue);

}  // namespace edge::agentedge
