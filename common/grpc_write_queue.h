// WriteQueue<Msg>: the "one write in flight" rule of a gRPC callback-API stream reactor, as a
// small state machine every reactor shares (the agent's edge stream, the controller's edge
// stream and admin invoke stream, the test fakes).
//
// gRPC allows one StartWrite at a time per stream; messages sent meanwhile wait here. Each
// call returns a Step saying what the reactor must do next — start a write, run the
// completion of a written message, fail the dropped ones, finish the call — and the reactor
// does it after the call returns (no callback is ever run under the queue's lock). The
// message being written stays owned by the queue until WriteDone, so `Step::write` may be
// handed to StartWrite as is.
//
// Thread-safe. Header-only; needs gRPC only for grpc::Status.
#pragma once

#include <grpcpp/support/status.h>

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace edge {

template <typename Msg>
class WriteQueue {
 public:
  // Runs under the queue's lock when a message becomes the next to write (to seal or
  // stamp it); false drops it instead (it comes back in Step::dropped).
  using Prepare = std::function<bool(Msg&)>;

  struct Step {
    Msg* write = nullptr;                // StartWrite(write) now
    std::optional<Msg> completed;        // WriteDone: the message whose write just ended
    std::vector<Msg> dropped;            // will never be written (fail their callbacks)
    std::optional<grpc::Status> finish;  // Finish(*finish) now
    bool idle = false;                   // no write in flight and nothing queued
  };

  // What becomes of queued messages when the call is to finish.
  enum class Then { kWriteQueued, kDropQueued };

  explicit WriteQueue(Prepare prepare = {}) : prepare_(std::move(prepare)) {}

  // Queues `msg`, or drops it when the queue is closed or finishing (Step::dropped).
  Step Push(Msg msg) {
    std::lock_guard lock(mu_);
    Step step;
    if (closed_ || finish_) {
      step.dropped.push_back(std::move(msg));
      return Done(step);
    }
    queue_.push_back(std::move(msg));
    Pump(step);
    return Done(step);
  }

  // The write in flight ended. Not ok: the stream is broken, nothing more can be written —
  // everything queued is dropped and the queue closes (a finish that was waiting is due).
  Step WriteDone(bool ok) {
    std::lock_guard lock(mu_);
    Step step;
    if (writing_) {
      writing_ = false;
      step.completed = std::move(current_);
      current_.reset();
    }
    if (!ok) CloseLocked(step);
    Pump(step);
    return Done(step);
  }

  // Finishes the call with `status` once nothing is in flight: after the write in flight
  // and, with kWriteQueued, everything queued. The first finish wins; later ones are no-ops.
  Step FinishAfter(grpc::Status status, Then then) {
    std::lock_guard lock(mu_);
    Step step;
    if (finish_ || finished_) return Done(step);
    finish_ = std::move(status);
    if (then == Then::kDropQueued) DropQueued(step);
    Pump(step);
    return Done(step);
  }

  // Nothing more will be written (the call ended or its read side closed): what is queued is
  // dropped; the write in flight completes through WriteDone.
  Step Close() {
    std::lock_guard lock(mu_);
    Step step;
    CloseLocked(step);
    Pump(step);
    return Done(step);
  }

  // Changes nothing: says whether the queue is idle (and finishes, should a finish be due).
  Step Check() {
    std::lock_guard lock(mu_);
    Step step;
    Pump(step);
    return Done(step);
  }

  // False once closed or finishing: a Push would be dropped.
  bool accepting() const {
    std::lock_guard lock(mu_);
    return !closed_ && !finish_ && !finished_;
  }
  bool writing() const {
    std::lock_guard lock(mu_);
    return writing_;
  }
  // Messages waiting, the one in flight included.
  size_t size() const {
    std::lock_guard lock(mu_);
    return queue_.size() + (writing_ ? 1 : 0);
  }

 private:
  void DropQueued(Step& step) {
    for (auto& m : queue_)
      step.dropped.push_back(std::move(m));
    queue_.clear();
  }
  void CloseLocked(Step& step) {
    closed_ = true;
    DropQueued(step);
  }
  // Starts the next write when none is in flight; finishes when all that was due is written.
  void Pump(Step& step) {
    while (!writing_ && !queue_.empty() && !closed_) {
      Msg next = std::move(queue_.front());
      queue_.pop_front();
      if (prepare_ && !prepare_(next)) {
        step.dropped.push_back(std::move(next));
        continue;
      }
      current_ = std::move(next);
      writing_ = true;
      step.write = &*current_;
    }
    if (!writing_ && finish_ && (queue_.empty() || closed_) && !finished_) {
      finished_ = true;
      step.finish = std::move(finish_);
      finish_ = grpc::Status::OK;  // stays set: the queue keeps refusing
    }
  }
  Step Done(Step& step) {
    step.idle = !writing_ && queue_.empty();
    return std::move(step);
  }

  Prepare prepare_;
  mutable std::mutex mu_;
  std::deque<Msg> queue_;
  std::optional<Msg> current_;  // the message in flight
  bool writing_ = false;
  bool closed_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> finish_;
};

}  // namespace edge
