// ClientStream<Req, Resp>: one client-side bidirectional gRPC call as a callback-API
// ClientBidiReactor (design.md §4) — the agent's edge stream (ConnectEdge, agent/edge/
// edge_stream.h) and its compute-member stream (startStreaming, agent/compute/
// compute_stream.h) are this template with their own types, method and log lines. No thread
// of its own, one outbound queue with one write in flight (WriteQueue, common/
// grpc_write_queue.h), and a read always pending that hands each message to the owner in
// arrival order.
//
// What differs between the streams is a parameter: the RPC that starts the call (a callable
// given to Start), an optional seal run on each message just before it is written (so its
// envelope carries the current token and a fresh timestamp), and the log lines (Names).
//
// A write's callback reports whether it reached the transport (false when the stream ended
// first); it is called exactly once, never under the stream's lock. The stream keeps itself
// alive until gRPC calls OnDone; the owner holds a shared_ptr to Send, Finish (half-close once
// the queue is written) or Cancel it, and borrows nothing to it but its callbacks.
// Thread-safe. Header-only; needs gRPC++'s client callback API.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/status.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/grpc_write_queue.h"
#include "common/log.h"

namespace edge {

// The log lines of one kind of client stream.
struct ClientStreamNames {
  std::string_view logger;          // log::Get(logger)
  std::string_view seal_failed;     // warn "<seal_failed>: <error>": a message not sent
  std::string_view handler_failed;  // error "<handler_failed>: <what>": on_read threw
  std::string_view cancelled;       // error: on_read refused a message, the call is cancelled
};

template <typename Req, typename Resp>
class ClientStream final : public grpc::ClientBidiReactor<Req, Resp> {
 public:
  using Reactor = grpc::ClientBidiReactor<Req, Resp>;
  using WriteCallback = std::function<void(bool ok)>;
  struct Callbacks {
    // Fills the message's envelope as its turn to be written comes; an error drops it (its
    // callback gets false). Optional.
    std::function<Status(Req&)> seal;
    // Each message read, in order; the next read starts when this returns. false (or an
    // exception) = the message could not be handled: the call is cancelled, so the server
    // sees the client go away instead of one that keeps writing but never reads.
    std::function<bool(Resp)> on_read;
    // Once, when the call is over (after every write callback).
    std::function<void(const grpc::Status&)> on_done;
  };
  // Starts the RPC on the context and reactor, e.g. stub.async()->Method(context, reactor).
  using StartRpc = std::function<void(grpc::ClientContext*, Reactor*)>;

  // Starts the call with metadata `authorization: Bearer <bearer_token>`.
  static std::shared_ptr<ClientStream> Start(const StartRpc& start_rpc,
                                             const std::string& bearer_token, Callbacks callbacks,
                                             const ClientStreamNames& names) {
    std::shared_ptr<ClientStream> s(new ClientStream(std::move(callbacks), names));
    s->self_ = s;
    s->context_.AddMetadata("authorization", "Bearer " + bearer_token);
    start_rpc(&s->context_, s.get());
    // The hold lets Send start writes from outside reactions until the read side has ended.
    s->AddHold();
    s->StartRead(&s->in_);
    s->StartCall();
    return s;
  }
  ~ClientStream() override = default;

  // Queues `msg`; false (and `done` is not called) when the stream is closed or finishing.
  bool Send(Req msg, WriteCallback done = {}) {
    Calls calls;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      if (closed_ || read_closed_ || finishing_ || hold_released_) return false;
      release = ApplyLocked(writes_.Push(Pending{std::move(msg), std::move(done)}), false, calls);
    }
    Complete(release, calls);
    return true;
  }
  // Half-closes the stream (WritesDone) once every queued message is written.
  void Finish() {
    Calls calls;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      finishing_ = true;
      release = ApplyLocked(writes_.Check(), false, calls);
    }
    Complete(release, calls);
  }
  // Ends the call at once (the server sees CANCELLED).
  void Cancel() { context_.TryCancel(); }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_ || read_closed_;
  }
  size_t queued() const { return writes_.size(); }

  // grpc::ClientBidiReactor
  void OnReadDone(bool ok) override {
    if (ok) {
      Resp msg = std::move(in_);
      in_.Clear();
      bool handled = true;
      try {
        if (callbacks_.on_read) handled = callbacks_.on_read(std::move(msg));
      } catch (const std::exception& e) {
        log::Get(names_.logger)->error("{}: {}", names_.handler_failed, log::Escape(e.what()));
        handled = false;
      } catch (...) {
        handled = false;
      }
      if (!handled) {
        log::Get(names_.logger)->error("{}", names_.cancelled);
        context_.TryCancel();
      }
      this->StartRead(&in_);  // completes (not ok) after a cancel, which closes the read side
      return;
    }
    Calls calls;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      // What is queued is still written; the hold goes once no write is in flight.
      read_closed_ = true;
      release = ApplyLocked(writes_.Check(), false, calls);
    }
    Complete(release, calls);
  }
  void OnWriteDone(bool ok) override {
    Calls calls;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      // A failed write means the stream is broken: nothing queued behind it can be written.
      if (!ok) closed_ = true;
      release = ApplyLocked(writes_.WriteDone(ok), ok, calls);
    }
    Complete(release, calls);
  }
  void OnDone(const grpc::Status& status) override {
    Calls calls;
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      for (auto& d : writes_.Close().dropped)
        calls.emplace_back(std::move(d.done), false);
    }
    Complete(false, calls);
    if (callbacks_.on_done) callbacks_.on_done(status);
    // Last: may destroy this object when the owner already let go of it.
    auto self = std::move(self_);
  }

 private:
  struct Pending {
    Req msg;
    WriteCallback done;
  };
  using Queue = WriteQueue<Pending>;
  // Write callbacks to run once the lock is let go, with their ok.
  using Calls = std::vector<std::pair<WriteCallback, bool>>;

  ClientStream(Callbacks callbacks, const ClientStreamNames& names)
      : callbacks_(std::move(callbacks)),
        names_(names),
        writes_([this](Pending& p) { return Seal(p); }) {}

  // Seals a message as its turn to be written comes (the queue's Prepare); false drops it.
  bool Seal(Pending& pending) {
    if (!callbacks_.seal) return true;
    if (auto st = callbacks_.seal(pending.msg); !st) {
      log::Get(names_.logger)->warn("{}: {}", names_.seal_failed, st.error().ToString());
      return false;
    }
    return true;
  }
  // mu_ held: does what `step` says (start a write; collect the callbacks of the written
  // message, with `ok`, and of the dropped ones), sends WritesDone once finishing and idle.
  // Returns true when the hold may be released (read side over, no write in flight).
  bool ApplyLocked(typename Queue::Step step, bool ok, Calls& calls) {
    if (step.write != nullptr) this->StartWrite(&step.write->msg);
    if (step.completed) calls.emplace_back(std::move(step.completed->done), ok);
    for (auto& d : step.dropped)
      calls.emplace_back(std::move(d.done), false);
    if (step.idle && finishing_ && !writes_done_sent_ && !closed_ && !read_closed_) {
      writes_done_sent_ = true;
      this->StartWritesDone();
    }
    if (read_closed_ && !writes_.writing() && !hold_released_) {
      hold_released_ = true;
      return true;
    }
    return false;
  }
  // Outside the lock: releases the hold and runs the callbacks.
  void Complete(bool release, Calls& calls) {
    if (release) this->RemoveHold();
    for (auto& [cb, ok] : calls)
      if (cb) cb(ok);
  }

  Callbacks callbacks_;
  const ClientStreamNames names_;
  grpc::ClientContext context_;
  Resp in_;
  mutable std::mutex mu_;  // guards the flags below; every writes_ call is made under it
  Queue writes_;
  bool finishing_ = false;
  bool writes_done_sent_ = false;
  bool read_closed_ = false;
  bool closed_ = false;
  bool hold_released_ = false;
  std::shared_ptr<ClientStream> self_;  // keeps the reactor alive until OnDone
};

}  // namespace edge
