#include "agent/compute/compute_stream.h"

#include "common/log.h"

namespace edge::compute {

namespace ce = io::cloudevents::v1;

std::shared_ptr<ComputeStream> ComputeStream::Start(
    org::cyoda::cloud::api::grpc::CloudEventsService::Stub& stub, const std::string& bearer_token,
    Callbacks callbacks) {
  std::shared_ptr<ComputeStream> s(new ComputeStream(std::move(callbacks)));
  s->self_ = s;
  s->context_.AddMetadata("authorization", "Bearer " + bearer_token);
  stub.async()->startStreaming(&s->context_, s.get());
  // The hold lets Send start writes from outside reactions until the read side has ended.
  s->AddHold();
  s->StartRead(&s->in_);
  s->StartCall();
  return s;
}

bool ComputeStream::Send(ce::CloudEvent event, WriteCallback done) {
  Calls calls;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    if (closed_ || read_closed_ || finishing_ || hold_released_) return false;
    release = ApplyLocked(writes_.Push(Pending{std::move(event), std::move(done)}), false, calls);
  }
  Complete(release, calls);
  return true;
}

bool ComputeStream::ApplyLocked(Queue::Step step, bool ok, Calls& calls) {
  if (step.write != nullptr) StartWrite(&step.write->event);
  if (step.completed) calls.emplace_back(std::move(step.completed->done), ok);
  for (auto& d : step.dropped)
    calls.emplace_back(std::move(d.done), false);
  if (step.idle && finishing_ && !writes_done_sent_ && !closed_ && !read_closed_) {
    writes_done_sent_ = true;
    StartWritesDone();
  }
  if (read_closed_ && !writes_.writing() && !hold_released_) {
    hold_released_ = true;
    return true;
  }
  return false;
}

void ComputeStream::Complete(bool release, Calls& calls) {
  if (release) RemoveHold();
  for (auto& [cb, ok] : calls)
    if (cb) cb(ok);
}

void ComputeStream::OnWriteDone(bool ok) {
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

void ComputeStream::OnReadDone(bool ok) {
  if (ok) {
    ce::CloudEvent ev = std::move(in_);
    in_.Clear();
    bool handled = true;
    try {
      if (callbacks_.on_event) handled = callbacks_.on_event(std::move(ev));
    } catch (const std::exception& e) {
      log::Get("compute")->error("compute event handler failed: {}", log::Escape(e.what()));
      handled = false;
    } catch (...) {
      handled = false;
    }
    if (!handled) {
      log::Get("compute")->error(
          "compute stream cancelled: an event could not be handled; the member reconnects");
      context_.TryCancel();
    }
    StartRead(&in_);  // completes (not ok) after a cancel, which closes the read side
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

void ComputeStream::OnDone(const grpc::Status& status) {
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

void ComputeStream::Finish() {
  Calls calls;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    finishing_ = true;
    release = ApplyLocked(writes_.Check(), false, calls);
  }
  Complete(release, calls);
}

void ComputeStream::Cancel() {
  context_.TryCancel();
}

bool ComputeStream::closed() const {
  std::lock_guard lock(mu_);
  return closed_ || read_closed_;
}

size_t ComputeStream::queued() const {
  return writes_.size();
}

}  // namespace edge::compute
