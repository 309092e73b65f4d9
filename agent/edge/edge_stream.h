// EdgeStream: one ConnectEdge call (seeds/000) as a gRPC callback-API ClientBidiReactor
// (design.md §4): no thread of its own, one outbound queue with one write in flight, and a
// read always pending that hands each EdgeCommand to the owner in arrival order.
//
// Every queued EdgeEvent is sealed (Callbacks::seal) just before it is written, so its
// envelope carries the current token and a fresh timestamp. A write's callback reports
// whether it reached the transport (false when the stream ended first); it is called exactly
// once, never under the stream's lock. The stream keeps itself alive until gRPC calls OnDone;
// the owner holds a shared_ptr to Send, Finish (half-close once the queue is written) or
// Cancel it. Thread-safe.
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
#include "node_cluster.grpc.pb.h"

namespace edge::agentedge {

class EdgeStream final : public grpc::ClientBidiReactor<aegis::cluster::v1::EdgeEvent,
                                                        aegis::cluster::v1::EdgeCommand> {
 public:
  using WriteCallback = std::function<void(bool ok)>;
  struct Callbacks {
    // Fills the event's envelope; an error drops the event (its callback gets false).
    std::function<Status(aegis::cluster::v1::EdgeEvent&)> seal;
    // Each command read, in order; the next read starts when this returns.
    // false (or an exception) = the command could not be handled: the stream is cancelled, so
    // the controller sees the node go away instead of a node that heartbeats but never reads.
    std::function<bool(aegis::cluster::v1::EdgeCommand)> on_command;
    // Once, when the call is over (after every write callback).
    std::function<void(const grpc::Status&)> on_done;
  };

  // Starts ConnectEdge with metadata `authorization: Bearer <bearer_token>`.
  static std::shared_ptr<EdgeStream> Start(aegis::cluster::v1::NodeClusterService::Stub& stub,
                                           const std::string& bearer_token, Callbacks callbacks);
  ~EdgeStream() override = default;

  // Queues `event`; false (and `done` is not called) when the stream is closed or finishing.
  bool Send(aegis::cluster::v1::EdgeEvent event, WriteCallback done = {});
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
    aegis::cluster::v1::EdgeEvent event;
    WriteCallback done;
  };
  using Queue = WriteQueue<Pending>;
  // Write callbacks to run once the lock is let go, with their ok.
  using Calls = std::vector<std::pair<WriteCallback, bool>>;
  explicit EdgeStream(Callbacks callbacks);
  // Seals an event as its turn to be written comes (the queue's Prepare); false drops it.
  bool Seal(Pending& pending);
  // mu_ held: does what `step` says (start a write; collect the callbacks of the written
  // message, with `ok`, and of the dropped ones), sends WritesDone once finishing and idle.
  // Returns true when the hold may be released (read side over, no write in flight).
  bool ApplyLocked(Queue::Step step, bool ok, Calls& calls);
  // Outside the lock: releases the hold and runs the callbacks.
  void Complete(bool release, Calls& calls);

  Callbacks callbacks_;
  grpc::ClientContext context_;
  aegis::cluster::v1::EdgeCommand in_;
  mutable std::mutex mu_;  // guards the flags below; every writes_ call is made under it
  Queue writes_;
  bool finishing_ = false;
  bool writes_done_sent_ = false;
  bool read_closed_ = false;
  bool closed_ = false;
  bool hold_released_ = false;
  std::shared_ptr<EdgeStream> self_;  // keeps the reactor alive until OnDone
};

}  // namespace edge::agentedge
