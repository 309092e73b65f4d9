// ComputeStream: one CloudEventsService.startStreaming call (seeds/003, wire.md §3) as a
// gRPC callback-API ClientBidiReactor (design.md §4): no thread of its own, one outbound
// queue with one write in flight, and a read always pending that hands each CloudEvent to the
// owner in arrival order. The same shape as the edge stream's reactor (agent/edge/
// edge_stream.h), without envelope sealing.
//
// A write's callback reports whether it reached the transport (false when the stream ended
// first); it is called exactly once, never under the stream's lock. The stream keeps itself
// alive until gRPC calls OnDone; the owner holds a shared_ptr to Send, Finish or Cancel it.
// Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/grpc_write_queue.h"
#include "cyoda/cyoda-cloud-api.grpc.pb.h"

namespace edge::compute {

class ComputeStream final : public grpc::ClientBidiReactor<io::cloudevents::v1::CloudEvent,
                                                           io::cloudevents::v1::CloudEvent> {
 public:
  using WriteCallback = std::function<void(bool ok)>;
  struct Callbacks {
    // Each event read, in order; the next read starts when this returns. false (or an
    // exception) = the event could not be handled: the stream is cancelled.
    std::function<bool(io::cloudevents::v1::CloudEvent)> on_event;
    // Once, when the call is over (after every write callback).
    std::function<void(const grpc::Status&)> on_done;
  };

  // Starts startStreaming with metadata `authorization: Bearer <bearer_token>`.
  static std::shared_ptr<ComputeStream> Start(
      org::cyoda::cloud::api::grpc::CloudEventsService::Stub& stub, const std::string& bearer_token,
      Callbacks callbacks);
  ~ComputeStream() override = default;

  // Queues `event`; false (and `done` is not called) when the stream is closed or finishing.
  bool Send(io::cloudevents::v1::CloudEvent event, WriteCallback done = {});
  // Half-closes the stream (WritesDone) once every queued event is written.
  void Finish();
  // Ends the call at once (the server sees CANCELLED).
  void Cancel();
  bool closed() const;
  size_t queued() const;

  // grpc::ClientBidiReactor
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  struct Pending {
    io::cloudevents::v1::CloudEvent event;
    WriteCallback done;
  };
  using Queue = WriteQueue<Pending>;
  // Write callbacks to run once the lock is let go, with their ok.
  using Calls = std::vector<std::pair<WriteCallback, bool>>;
  explicit ComputeStream(Callbacks callbacks) : callbacks_(std::move(callbacks)) {}
  // mu_ held: does what `step` says (start a write; collect the callbacks of the written
  // message, with `ok`, and of the dropped ones), sends WritesDone once finishing and idle.
  // Returns true when the hold may be released (read side over, no write in flight).
  bool ApplyLocked(Queue::Step step, bool ok, Calls& calls);
  // Outside the lock: releases the hold and runs the callbacks.
  void Complete(bool release, Calls& calls);

  Callbacks callbacks_;
  grpc::ClientContext context_;
  io::cloudevents::v1::CloudEvent in_;
  mutable std::mutex mu_;  // guards the flags below; every writes_ call is made under it
  Queue writes_;           // one write in flight (common/grpc_write_queue.h)
  bool finishing_ = false;
  bool writes_done_sent_ = false;
  bool read_closed_ = false;
  bool closed_ = false;
  bool hold_released_ = false;
  std::shared_ptr<ComputeStream> self_;  // keeps the reactor alive until OnDone
};

}  // namespace edge::compute
