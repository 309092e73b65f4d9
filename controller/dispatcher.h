// Dispatcher: the controller's command side of the edge stream. Keeps the live ConnectEdge
// stream of each node (a newer stream of the same node replaces the older, which is finished
// with ABORTED), assigns command ids (UUIDv4), persists every InvokeTool in the Store BEFORE
// sending it, sends it again each time the node attaches a stream while it has no result
// (within kResendWindow: the agent's idempotency makes a repeat safe, so a command whose
// delivery cannot be confirmed — the stream broke, or the controller restarted — still ends
// with exactly one result), sends InvokeTool / Cancel / PushConfig / Drain / Shutdown, stores the
// first CommandResult of each command (duplicates — e.g. an agent's outbox resending after a
// reconnect — are ignored, also across controller restarts because the Store decides), and
// forwards progress and the result to observers (the admin Invoke stream).
// Owns the stream and observer registrations (shared_ptr); the Store, token authority and
// clock outlive it. Thread-safe; never calls a sink or observer with its lock held.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "common/batch_worker.h"
#include "common/clock.h"
#include "common/error.h"
#include "controller/node_tokens.h"
#include "controller/output_pacer.h"
#include "controller/store.h"
#include "node_cluster.pb.h"

namespace edge::controller {

// The sending half of one node's ConnectEdge stream (EdgeStream implements it).
class CommandSink {
 public:
  virtual ~CommandSink() = default;
  // Queues a command; false when the stream is finishing or gone.
  virtual bool Send(const aegis::cluster::v1::EdgeCommand& command) = 0;
  // Finishes the stream with `status` (after the write in flight, if any).
  virtual void Close(const grpc::Status& status) = 0;
};

// Someone waiting on a command (the admin Invoke stream). Called from gRPC threads.
class CommandObserver {
 public:
  virtual ~CommandObserver() = default;
  // The command is persisted and about to be sent (before any progress can arrive).
  virtual void OnAccepted(const std::string& command_id) = 0;
  // A chunk of the command's output, the observer's own: one observer gets the chunk the node
  // sent (moved, not copied: up to 1 MiB of output per message, issue 14), several get a copy
  // each but the last.
  virtual void OnProgress(aegis::cluster::v1::Chunk chunk) = 0;
  // The pacer of the client this observer queues output for (output_pacer.h), if it queues
  // any: the node's stream waits for it before reading on while it is congested.
  virtual std::shared_ptr<OutputPacer> pacer() { return nullptr; }
  // The stored command with its (first) result; the observer is unsubscribed after this.
  virtual void OnResult(const CommandRecord& command) = 0;
  // The node's stream ended while the command was running; the result may still come after
  // the node reconnects (the agent keeps it in its outbox).
  virtual void OnNodeDisconnected(const std::string& node_id) = 0;
  // The node has a stream again (the command was sent again; its result follows).
  virtual void OnNodeReconnected(const std::string& node_id) = 0;
};

struct InvokeSpec {
  std::string node_id;
  std::string tool;
  std::string args_json;  // a JSON object ("" = {})
  std::string security_context;
  std::chrono::milliseconds deadline{0};  // 0 = the agent's default timeout
  // The command id to use, minted by the caller beforehand (a fleet command stores its parts'
  // ids before sending them); "" = a new UUIDv4. A duplicate is ALREADY_EXISTS.
  std::string command_id;
};

class Dispatcher {
 public:
  // How old a command without a result may be and still be sent again when its node
  // attaches: well inside the agent's idempotency window (24 h), beyond which a repeat could
  // run it twice. An older one stays dispatched; the agent's outbox still delivers its result.
  static constexpr std::chrono::hours kResendWindow{12};

  // `max_message_bytes`: the largest EdgeCommand it sends (grpc.max_message_bytes).
  Dispatcher(Store& store, NodeTokenAuthority& tokens, Clock& clock,
             size_t max_message_bytes = size_t{16} << 20);
  // StopQueues.
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // A node's stream said Hello: it becomes the node's stream; the previous one (if any) is
  // closed with ABORTED "replaced by a newer stream".
  void Attach(const std::string& node_id, std::shared_ptr<CommandSink> sink);
  // The stream ended: forgotten if it is still the node's stream; observers of the node's
  // running commands are told.
  void Detach(const std::string& node_id, const CommandSink* sink);
  bool IsConnected(const std::string& node_id) const;
  // When the node's current stream said Hello (epoch ms); 0 = not connected.
  int64_t ConnectedSinceMs(const std::string& node_id) const;
  // Closes the node's stream, if any, with `status` (a revoked node).
  void Disconnect(const std::string& node_id, const grpc::Status& status);
  // Closes every stream (controller stop).
  void CloseAll(const grpc::Status& status);

  // Persists and sends an InvokeTool; returns its command id. INVALID_ARGUMENT bad spec (args
  // not a JSON object, nested deeper than 64, or an InvokeTool above max_message_bytes);
  // NOT_FOUND unknown node; FAILED_PRECONDITION revoked node; UNAVAILABLE "node N is not
  // connected" (nothing is persisted). `observer` (may be null) is subscribed before sending.
  Result<std::string> Invoke(const InvokeSpec& spec, std::shared_ptr<CommandObserver> observer);
  // Called with the command id once the command is stored and sent, or with why it was not.
  using InvokeDone = std::function<void(Result<std::string>)>;
  // Invoke without waiting for the disk, for callers that must not block (the admin Invoke
  // stream, on gRPC's callback threads: issue 14). The spec is checked on this thread, and a
  // refusal calls `done` before this returns. Otherwise the command waits for the dispatcher's
  // invokes thread, which stores every command queued meanwhile in one transaction (one sync;
  // should the transaction fail, each command is stored alone, so that one bad command refuses
  // no other), tells each observer OnAccepted, sends each, and calls each `done` — on that
  // thread (or on this one once the dispatcher stops). The queue is bounded (4096 commands,
  // 64 MiB of InvokeTool): past that, the caller waits for room.
  void InvokeAsync(const InvokeSpec& spec, std::shared_ptr<CommandObserver> observer,
                   InvokeDone done);
  // Invoke for many commands at once (a fleet command's parts): each spec is checked as Invoke
  // checks it; the accepted ones are persisted in one transaction (one wait for the disk for
  // all of them — a fleet of 10 000 nodes is not 10 000 synced commits), then each is sent.
  // One result per spec, in order. A failure to store them (a duplicate command_id among
  // them, a full disk) refuses every accepted spec — "none of the N commands was stored: "
  // and the error, with its code — and stores none.
  // `observers[i]` (missing or null = none) is subscribed to specs[i] before it is sent.
  std::vector<Result<std::string>> InvokeMany(
      const std::vector<InvokeSpec>& specs,
      const std::vector<std::shared_ptr<CommandObserver>>& observers);
  void Unsubscribe(const std::string& command_id, const CommandObserver* observer);

  // Cancel a dispatched command: NOT_FOUND unknown; FAILED_PRECONDITION already completed;
  // UNAVAILABLE node not connected.
  Status Cancel(const std::string& command_id, const std::string& reason);
  // NOT_FOUND unknown node; UNAVAILABLE not connected.
  Status Drain(const std::string& node_id);
  Status Shutdown(const std::string& node_id, std::chrono::milliseconds grace);
  Status PushConfig(const std::string& node_id, const std::string& delta,
                    const std::string& version);

  // Who is told when a node reported its capabilities (Hello, CapabilityUpdate), after they
  // are stored: the session manager (node.config.changed). One listener; set before streams
  // arrive, cleared (nullptr) before the listener goes.
  void SetCapabilitiesListener(std::function<void(const std::string& node_id)> listener);
  void CapabilitiesReported(const std::string& node_id);

  // From a node's stream (already authenticated as `node_id`); `chunk` goes to the command's
  // observers (CommandObserver::OnProgress). Returns the pacers of the observers' clients that
  // are congested now: the stream reads its next message once they have room
  // (OutputPacer::WhenRoom).
  std::vector<std::shared_ptr<OutputPacer>> OnProgress(const std::string& node_id,
                                                       const std::string& command_id,
                                                       aegis::cluster::v1::Chunk chunk);
  // Queues the result and returns: the dispatcher's results thread stores it (the first
  // result of a command wins) and only then tells the command's observers — so the caller of
  // Invoke learns a result once it is on disk, while the node's stream reads on without
  // waiting for the disk, and the results that arrive meanwhile, from every node, are stored
  // in one transaction with one sync (issue 14). The queue is bounded (4096 results, 64 MiB):
  // past that the caller waits for room, as it waited for the disk before.
  void OnResult(const std::string& node_id, const std::string& command_id,
                const aegis::cluster::v1::EdgeResult& result);
  // Returns once every result queued before the call is stored and its observers told.
  void FlushResults();
  // Returns once every command InvokeAsync queued before the call is stored, sent and done.
  void FlushInvokes();
  // Stores and sends the commands InvokeAsync queued, then stores the queued results, and ends
  // both threads; what comes later is handled on its caller's thread (controller stop: after
  // the servers, before the observers' owners go).
  void StopQueues();

 private:
  // The InvokeTool of a command (its args parsed from rec.args_json), with a freshly minted
  // user token.
  Result<aegis::cluster::v1::EdgeCommand> InvokeToolFor(const CommandRecord& rec,
                                                        const std::string& tenant_id,
                                                        google::protobuf::Struct args);
  // An InvokeTool that passed Invoke's checks, ready to be stored and sent.
  struct Prepared {
    CommandRecord rec;
    aegis::cluster::v1::EdgeCommand cmd;
  };
  // Invoke's checks (the node connected among them), the command record and its InvokeTool;
  // nothing is stored.
  Result<Prepared> Prepare(const InvokeSpec& spec);
  // `observer` (may be null) waits on p's command.
  void Subscribe(const Prepared& p, const std::shared_ptr<CommandObserver>& observer);
  // After Prepare and Subscribe: stores `ready` in one transaction, tells every observer
  // (`observers[k]` of ready[k]; null = none) OnAccepted, then sends each; one result per
  // command, in order. When the transaction fails, every command is refused — "none of the N
  // commands was stored: " and the error, with its code — or, with `each_alone`, each one is
  // stored by itself (a single command gets the error as it is).
  std::vector<Result<std::string>> StoreAndSend(
      const std::vector<Prepared>& ready,
      const std::vector<std::shared_ptr<CommandObserver>>& observers, bool each_alone);
  // A command InvokeAsync checked, waiting for the invokes thread (which subscribes its
  // observer just before the store: node events while it waits are not its news).
  struct QueuedInvoke {
    Prepared p;
    std::shared_ptr<CommandObserver> observer;
    InvokeDone done;
  };
  // The invokes thread's batch: Subscribe, StoreAndSend (each alone on failure), then each
  // `done`; should anything throw, every `done` is still called, with INTERNAL.
  void StoreInvokes(std::vector<QueuedInvoke>& batch);
  // The node's stream now (nullptr: none).
  std::shared_ptr<CommandSink> CurrentStream(const std::string& node_id) const;
  // After `p.rec` is stored: sends it on the node's stream of now. When that fails and no
  // newer stream has it (Attach resends what has no result), the command is completed
  // UNAVAILABLE, `observer` (may be null) unsubscribed, and the send refused.
  Result<std::string> SendStored(const Prepared& p, CommandObserver* observer);
  // Sends the node's commands that have no result yet again on `sink` (Attach).
  void ResendPending(const std::string& node_id, CommandSink& sink);
  // The node's stream, or NOT_FOUND / FAILED_PRECONDITION / UNAVAILABLE.
  Result<std::shared_ptr<CommandSink>> StreamOf(const std::string& node_id);
  Status SendTo(const std::string& node_id, const aegis::cluster::v1::EdgeCommand& cmd);
  // Stores a batch of results (one transaction) and tells each first result's observers.
  void StoreResults(const std::vector<CommandCompletion>& batch);

  Store& store_;
  NodeTokenAuthority& tokens_;
  Clock& clock_;
  const size_t max_message_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<CommandSink>> streams_;
  std::map<std::string, int64_t> attached_ms_;  // node → when its current stream attached
  std::mutex listener_mu_;  // held while the listener runs, so clearing it waits for it
  std::function<void(const std::string&)> capabilities_listener_;
  struct Waiter {
    std::string node_id;
    std::shared_ptr<CommandObserver> observer;
  };
  std::multimap<std::string, Waiter> waiters_;  // command id → observers

  // Last: the destructor's StopQueues ends their threads before any member they use goes.
  BatchWorker<CommandCompletion> results_;  // OnResult's queue: the "ctl-results" thread
  BatchWorker<QueuedInvoke> invokes_;       // InvokeAsync's queue: the "ctl-invokes" thread
};

}  // namespace edge::controller
