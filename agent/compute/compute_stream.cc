#include "agent/compute/compute_stream.h"

namespace edge {
template class ClientStream<io::cloudevents::v1::CloudEvent, io::cloudevents::v1::CloudEvent>;
}  // namespace edge

namespace edge::compute {

namespace {

constexpr ClientStreamNames kNames{
    .logger = "compute",
    .seal_failed = "compute event not sent: sealing failed",  // no seal: never logged
    .handler_failed = "compute event handler failed",
    .cancelled = "compute stream cancelled: an event could not be handled; the member reconnects",
};

}  // namespace

std::shared_ptr<ComputeStream> StartComputeStream(
    org::cyoda::cloud::api::grpc::CloudEventsService::Stub& stub, const std::string& bearer_token,
    ComputeStream::Callbacks callbacks, ClientCallQueue& queue) {
  return ComputeStream::Start(
      [&stub](grpc::ClientContext* context, grpc::CompletionQueue* cq) {
        return stub.PrepareAsyncstartStreaming(context, cq);
      },
      bearer_token, std::move(callbacks), kNames, queue);
}

}  // namespace edge::compute
