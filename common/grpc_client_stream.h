// ClientStream<Req, Resp>: one client-side bidirectional gRPC call, driven through gRPC's
// asynchronous API on a ClientCallQueue (common/grpc_call_queue.h) — the agent's edge stream
// (ConnectEdge, agent/edge/edge_stream.h) and its compute-member stream (startStreaming,
// agent/compute/compute_stream.h) are this template with their own types, method and log
// lines. No thread of its own (its events run on the queue's), one outbound queue with one
// write in flight (WriteQueue, common/grpc_write_queue.h), and a read always pending that
// hands each message to the owner in arrival order.
//
// Why not the callback API (design.md §4 names it): gRPC 1.51 on Linux runs callback
// reactions on two `nexting_thread`s that poll every 100–200 ms whether or not anything
// happens; an idle agent's two streams cost two threads and ~340 wake-ups a minute that way.
// A queue thread blocked in Next() without a deadline costs neither. The semantics are the
// callback API's: on_read per message in order, each write's callback once, on_done last.
//
// What differs between the streams is a parameter: the RPC that starts the call (a callable
// given to Start), an optional seal run on each message just before it is written (so its
// envelope carries the current token and a fresh timestamp), and the log lines (Names).
//
// A write's callback reports whether it reached the transport (false when the stream ended
// first); it is called exactly once, never under the stream's lock. The stream keeps itself
// alive until on_done has run; the owner holds a shared_ptr to Send, Finish (half-close once
// the queue is written) or Cancel it, and borrows nothing to it but its callbacks. The queue
// must outlive the call: until on_done has returned. Thread-safe. Header-only; needs gRPC++.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/support/async_stream.h>
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
#include "common/grpc_call_queue.h"
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
class ClientStream final {
 public:
  using Rpc = grpc::ClientAsyncReaderWriter<Req, Resp>;
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
  // Prepares the RPC on the context and queue, e.g. stub.PrepareAsyncMethod(context, cq).
  using StartRpc =
      std::function<std::unique_ptr<Rpc>(grpc::ClientContext*, grpc::CompletionQueue*)>;

  // Starts the call on `queue` with metadata `authorization: Bearer <bearer_token>`.
  static std::shared_ptr<ClientStream> Start(const StartRpc& start_rpc,
                                             const std::string& bearer_token, Callbacks callbacks,
                                             const ClientStreamNames& names,
                                             ClientCallQueue& queue) {
    std::shared_ptr<ClientStream> s(new ClientStream(std::move(callbacks), names));
    s->self_ = s;
    s->context_.AddMetadata("authorization", "Bearer " + bearer_token);
    s->rpc_ = start_rpc(&s->context_, queue.cq());
    std::lock_guard lock(s->mu_);  // a tag may complete on a queue thread before this returns
    s->pending_ = 2;
    s->rpc_->StartCall(s->Tag(s->start_tag_));
    s->rpc_->Read(&s->in_, s->Tag(s->read_tag_));
    return s;
  }
  ~ClientStream() = default;

  // Queues `msg`; false (and `done` is not called) when the stream is closed or finishing.
  bool Send(Req msg, WriteCallback done = {}) {
    Calls calls;
    {
      std::lock_guard lock(mu_);
      if (closed_ || read_closed_ || finishing_ || finish_started_) return false;
      ApplyLocked(writes_.Push(Pending{std::move(msg), std::move(done)}), false, calls);
    }
    Run(calls);
    return true;
  }
  // Half-closes the stream (WritesDone) once every queued message is written.
  void Finish() {
    Calls calls;
    {
      std::lock_guard lock(mu_);
      finishing_ = true;
      ApplyLocked(writes_.Check(), false, calls);
    }
    Run(calls);
  }
  // Ends the call at once (the server sees CANCELLED).
  void Cancel() { context_.TryCancel(); }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_ || read_closed_;
  }
  size_t queued() const { return writes_.size(); }

 private:
  struct Pending {
    Req msg;
    WriteCallback done;
  };
  using Queue = WriteQueue<Pending>;
  // Write callbacks to run once the lock is let go, with their ok.
  using Calls = std::vector<std::pair<WriteCallback, bool>>;
  // A queue event of this call: runs `handler` with Next()'s ok.
  struct OpTag final : ClientCallQueue::Tag {
    OpTag(ClientStream* s, void (ClientStream::*h)(bool)) : stream(s), handler(h) {}
    void Done(bool ok) override { (stream->*handler)(ok); }
    ClientStream* stream;
    void (ClientStream::*handler)(bool);
  };

  // The queue casts each tag back to ClientCallQueue::Tag*: it must travel as exactly that.
  static void* Tag(OpTag& tag) { return static_cast<ClientCallQueue::Tag*>(&tag); }

  ClientStream(Callbacks callbacks, const ClientStreamNames& names)
      : callbacks_(std::move(callbacks)),
        names_(names),
        writes_([this](Pending& p) { return Seal(p); }) {}

  // gRPC's async stream sends the start through the same operation set as a write, so no
  // write (nor WritesDone) may begin before the start's tag is back: what came meanwhile
  // begins here. A failed start fails the read, which ends the call.
  void OnStarted(bool /*ok*/) {
    {
      std::lock_guard lock(mu_);
      started_ = true;
      if (deferred_write_ != nullptr) rpc_->Write(*deferred_write_, Tag(write_tag_));
      if (deferred_writes_done_) rpc_->WritesDone(Tag(writes_done_tag_));
      deferred_write_ = nullptr;
      deferred_writes_done_ = false;
    }
    OpEnded();
  }
  void OnReadDone(bool ok) {
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
      {
        std::lock_guard lock(mu_);
        ++pending_;
        rpc_->Read(&in_, Tag(read_tag_));  // completes (not ok) after a cancel
      }
      return OpEnded();
    }
    Calls calls;
    {
      std::lock_guard lock(mu_);
      // What is queued is still written; the call is finished once no write is in flight.
      read_closed_ = true;
      ApplyLocked(writes_.Check(), false, calls);
    }
    Run(calls);
    OpEnded();
  }
  void OnWriteDone(bool ok) {
    Calls calls;
    {
      std::lock_guard lock(mu_);
      // A failed write means the stream is broken: nothing queued behind it can be written.
      if (!ok) closed_ = true;
      ApplyLocked(writes_.WriteDone(ok), ok, calls);
    }
    Run(calls);
    OpEnded();
  }
  void OnWritesDoneDone(bool /*ok*/) { OpEnded(); }
  void OnFinished(bool /*ok*/) {
    {
      std::lock_guard lock(mu_);
      finished_ = true;
    }
    OpEnded();
  }
  // Last in every handler: once the status is in and no operation is outstanding, the call is
  // over (no handler of it runs any more) and on_done runs, here.
  void OpEnded() {
    {
      std::lock_guard lock(mu_);
      if (--pending_ > 0 || !finished_ || done_) return;
      done_ = true;
      closed_ = true;
    }
    Calls calls;
    {
      std::lock_guard lock(mu_);
      for (auto& d : writes_.Close().dropped)
        calls.emplace_back(std::move(d.done), false);
    }
    Run(calls);
    if (callbacks_.on_done) callbacks_.on_done(status_);
    // Last: may destroy this object when the owner already let go of it.
    auto self = std::move(self_);
  }

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
  // message, with `ok`, and of the dropped ones), sends WritesDone once finishing and idle,
  // and asks for the status once the read side is over and no write is in flight.
  void ApplyLocked(typename Queue::Step step, bool ok, Calls& calls) {
    if (step.write != nullptr) {
      ++pending_;
      if (started_) {
        rpc_->Write(step.write->msg, Tag(write_tag_));
      } else {
        deferred_write_ = &step.write->msg;  // stays in the queue until its write is done
      }
    }
    if (step.completed) calls.emplace_back(std::move(step.completed->done), ok);
    for (auto& d : step.dropped)
      calls.emplace_back(std::move(d.done), false);
    if (step.idle && finishing_ && !writes_done_sent_ && !closed_ && !read_closed_) {
      writes_done_sent_ = true;
      ++pending_;
      if (started_) {
        rpc_->WritesDone(Tag(writes_done_tag_));
      } else {
        deferred_writes_done_ = true;
      }
    }
    if (read_closed_ && !writes_.writing() && !finish_started_) {
      finish_started_ = true;
      ++pending_;
      rpc_->Finish(&status_, Tag(finish_tag_));
    }
  }
  // Outside the lock: runs the write callbacks.
  static void Run(Calls& calls) {
    for (auto& [cb, ok] : calls)
      if (cb) cb(ok);
  }

  Callbacks callbacks_;
  const ClientStreamNames names_;
  grpc::ClientContext context_;
  std::unique_ptr<Rpc> rpc_;  // after context_: destroyed before it
  Resp in_;
  grpc::Status status_;  // set by Finish's completion
  OpTag start_tag_{this, &ClientStream::OnStarted};
  OpTag read_tag_{this, &ClientStream::OnReadDone};
  OpTag write_tag_{this, &ClientStream::OnWriteDone};
  OpTag writes_done_tag_{this, &ClientStream::OnWritesDoneDone};
  OpTag finish_tag_{this, &ClientStream::OnFinished};
  mutable std::mutex mu_;  // guards the flags below; every writes_ and rpc_ call is made under it
  Queue writes_;
  int pending_ = 0;                      // operations started whose tag has not come back
  bool started_ = false;                 // StartCall's tag is back
  const Req* deferred_write_ = nullptr;  // the write that waits for it
  bool deferred_writes_done_ = false;
  bool finishing_ = false;
  bool writes_done_sent_ = false;
  bool read_closed_ = false;
  bool closed_ = false;
  bool finish_started_ = false;
  bool finished_ = false;
  bool done_ = false;
  std::shared_ptr<ClientStream> self_;  // keeps the call alive until on_done has run
};

}  // namespace edge
