// One ConnectEdge stream on the controller (wire.md §2.3–§2.4): a ServerBidiReactor that
// authenticates the call (metadata `authorization: Bearer <NodeSecurityToken>` whose sub is
// the client certificate's CN, else UNAUTHENTICATED), requires Hello first (else
// INVALID_ARGUMENT), verifies every EdgeEvent's envelope (signature by the node's registered
// key(s), node id = the token's sub, stream id = the Hello's, timestamp ±60 s, and a valid
// token of the node — else UNAUTHENTICATED; the node's keys and token are re-read and
// re-verified only when EdgeAuthCache says they may have changed), records
// Hello/Heartbeat/CapabilityUpdate in the Store and hands progress and results to the Dispatcher.
// It reads one event at a time, and after a progress chunk whose operator client is over its
// queue's high water it reads the next only once that client has room (OutputPacer), at most
// `output_stall_limit` later: a slow client slows the node's output, it does not grow memory.
// Commands go out through one outbound queue with one write in flight. Keeps itself alive (self
// reference) until gRPC's OnDone; the Dispatcher may hold it longer, Send then returns false.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/grpc_write_queue.h"
#include "common/timer_queue.h"
#include "controller/dispatcher.h"
#include "controller/edge_auth_cache.h"
#include "controller/node_tokens.h"
#include "controller/output_pacer.h"
#include "controller/refusal_log.h"
#include "controller/store.h"
#include "node_cluster.grpc.pb.h"

namespace edge::controller {

struct EdgeStreamDeps {
  Store& store;
  NodeTokenAuthority& tokens;
  Dispatcher& dispatcher;
  Clock& clock;
  RefusalLog* refusals = nullptr;  // rate-limits the log lines of refused streams
  // Back-pressure from the operator clients of the node's command output (OutputPacer): the
  // stream reads on once their queues have room, or after `output_stall_limit` on `timers`
  // (then they lag and drop output instead). Without timers it waits for room only.
  TimerQueue* timers = nullptr;
  std::chrono::milliseconds output_stall_limit{kOutputStallLimit};

  // How long one node's stream waits for a slow client: well inside the envelopes' ±60 s
  // timestamp window (an event sealed before the wait is read after it) and the stale
  // threshold (90 s by default), and long enough that a client that is only slower than the
  // node (a busy CLI on the same cores) loses nothing.
  static constexpr std::chrono::milliseconds kOutputStallLimit{10'000};
};

class EdgeStream final : public grpc::ServerBidiReactor<aegis::cluster::v1::EdgeEvent,
                                                        aegis::cluster::v1::EdgeCommand>,
                         public CommandSink,
                         public std::enable_shared_from_this<EdgeStream> {
 public:
  // Creates the reactor for a new call and starts it (authenticates, then reads).
  static grpc::ServerBidiReactor<aegis::cluster::v1::EdgeEvent, aegis::cluster::v1::EdgeCommand>*
  Start(grpc::CallbackServerContext* ctx, EdgeStreamDeps deps);

  EdgeStream(grpc::CallbackServerContext* ctx, EdgeStreamDeps deps) : ctx_(ctx), deps_(deps) {}

  bool Send(const aegis::cluster::v1::EdgeCommand& command) override;
  void Close(const grpc::Status& status) override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Begin();
  // Checks and applies one event; a non-OK status ends the stream.
  // Verifies one event (Authenticate), then acts on it; may move its payload out (a
  // progress chunk goes to the command's observers without a copy).
  grpc::Status Handle(aegis::cluster::v1::EdgeEvent& event);
  grpc::Status Authenticate(const aegis::cluster::v1::EdgeEvent& event);

  grpc::CallbackServerContext* ctx_;
  EdgeStreamDeps deps_;
  std::shared_ptr<EdgeStream> self_;
  std::string node_id_;    // the token's sub (= certificate CN)
  std::string stream_id_;  // from the Hello
  bool attached_ = false;
  EdgeAuthCache auth_;  // what Authenticate has verified, reused while it still holds
  aegis::cluster::v1::EdgeEvent in_;
  // The clients Handle's progress found congested: the next read waits for them (ReadOn).
  std::vector<std::shared_ptr<OutputPacer>> congested_;
  std::mutex read_mu_;
  bool read_paused_ = false;  // no read pending: waiting for room (OutputPacer::WhenRoom)
  bool cancelled_ = false;    // OnCancel ran

  // The next read, once the congested clients have room; or the end, if the call was
  // cancelled meanwhile.
  void ReadOn();

  // Starts the write and finishes the call as `step` says.
  void Apply(WriteQueue<aegis::cluster::v1::EdgeCommand>::Step step);

  // Commands to the node, one write in flight; Close finishes after the write in flight.
  WriteQueue<aegis::cluster::v1::EdgeCommand> writes_;
};

}  // namespace edge::controller
