// ComputeStream: one CloudEventsService.startStreaming call (seeds/003, wire.md §3) — the
// shared client stream (common/grpc_client_stream.h: driven on a ClientCallQueue, one write
// in flight, a read always pending) with CloudEvents both ways and no envelope sealing.
//
// Callbacks::on_read gets each event; false (or an exception) cancels the stream and the
// member reconnects. The member owns it through a shared_ptr.
#pragma once

#include <memory>
#include <string>

#include "common/grpc_client_stream.h"
#include "cyoda/cyoda-cloud-api.grpc.pb.h"

namespace edge {
extern template class ClientStream<io::cloudevents::v1::CloudEvent,
                                   io::cloudevents::v1::CloudEvent>;
}  // namespace edge

namespace edge::compute {

using ComputeStream =
    ClientStream<io::cloudevents::v1::CloudEvent, io::cloudevents::v1::CloudEvent>;

// Starts startStreaming with metadata `authorization: Bearer <bearer_token>`; its events run on
// `queue`, which must outlive the call (until on_done has returned).
std::shared_ptr<ComputeStream> StartComputeStream(
    org::cyoda::cloud::api::grpc::CloudEventsService::Stub& stub, const std::string& bearer_token,
    ComputeStream::Callbacks callbacks, ClientCallQueue& queue);

}  // namespace edge::compute
