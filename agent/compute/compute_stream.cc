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
  std::vector<WriteCallback> failed;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    if (closed_ || read_closed_ || finishing_ || hold_released_) return false;
    queue_.push_back(Pending{std::move(event), std::move(done)});
    release = PumpLocked(failed);
  }
  if (release) RemoveHold();
  for (auto& cb : failed)
    if (cb) cb(false);
  return true;
}

bool ComputeStream::PumpLocked(std::vector<WriteCallback>& failed) {
  while (!writing_ && !queue_.empty() && !closed_) {
    out_ = queue_.front().event;
    writing_ = true;
    StartWrite(&out_);
  }
  if (!writing_ && queue_.empty() && finishing_ && !writes_done_sent_ && !closed_ &&
      !read_closed_) {
    writes_done_sent_ = true;
    StartWritesDone();
  }
  if (closed_ || read_closed_) {
    // Nothing more will be written: fail what is queued and let the call finish.
    while (!writing_ && !queue_.empty()) {
      failed.push_back(std::move(queue_.front().done));
      queue_.pop_front();
    }
  }
  if (read_closed_ && !writing_ && !hold_released_) {
    hold_released_ = true;
    return true;
  }
  return false;
}

void ComputeStream::OnWriteDone(bool ok) {
  WriteCallback done;
  std::vector<WriteCallback> failed;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!queue_.empty()) {
      done = std::move(queue_.front().done);
      queue_.pop_front();
    }
    // A failed write means the stream is broken: nothing queued behind it can be written.
    if (!ok) closed_ = true;
    release = PumpLocked(failed);
  }
  if (release) RemoveHold();
  if (done) done(ok);
  for (auto& cb : failed)
    if (cb) cb(false);
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
  std::vector<WriteCallback> failed;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    read_closed_ = true;
    release = PumpLocked(failed);
  }
  if (release) RemoveHold();
  for (auto& cb : failed)
    if (cb) cb(false);
}

void ComputeStream::OnDone(const grpc::Status& status) {
  std::vector<WriteCallback> failed;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (auto& p : queue_)
      failed.push_back(std::move(p.done));
    queue_.clear();
  }
  for (auto& cb : failed)
    if (cb) cb(false);
  if (callbacks_.on_done) callbacks_.on_done(status);
  // Last: may destroy this object when the owner already let go of it.
  auto self = std::move(self_);
}

void ComputeStream::Finish() {
  std::vector<WriteCallback> failed;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    finishing_ = true;
    release = PumpLocked(failed);
  }
  if (release) RemoveHold();
  for (auto& cb : failed)
    if (cb) cb(false);
}

void ComputeStream::Cancel() {
  context_.TryCancel();
}

bool ComputeStream::closed() const {
  std::lock_guard lock(mu_);
  return closed_ || read_closed_;
}

size_t ComputeStream::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace edge::compute
