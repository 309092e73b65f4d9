#include "agent/edge/edge_stream.h"

#include "common/log.h"

namespace edge::agentedge {

namespace pb = aegis::cluster::v1;

std::shared_ptr<EdgeStream> EdgeStream::Start(pb::NodeClusterService::Stub& stub,
                                              const std::string& bearer_token,
                                              Callbacks callbacks) {
  std::shared_ptr<EdgeStream> s(new EdgeStream(std::move(callbacks)));
  s->self_ = s;
  s->context_.AddMetadata("authorization", "Bearer " + bearer_token);
  stub.async()->ConnectEdge(&s->context_, s.get());
  // The hold lets Send start writes from outside reactions until the read side has ended.
  s->AddHold();
  s->StartRead(&s->in_);
  s->StartCall();
  return s;
}

EdgeStream::EdgeStream(Callbacks callbacks)
    : callbacks_(std::move(callbacks)), writes_([this](Pending& p) { return Seal(p); }) {}

bool EdgeStream::Seal(Pending& pending) {
  if (!callbacks_.seal) return true;
  if (auto st = callbacks_.seal(pending.event); !st) {
    log::Get("edge")->warn("edge event not sent: sealing failed: {}", st.error().ToString());
    return false;
  }
  return true;
}

bool EdgeStream::Send(pb::EdgeEvent event, WriteCallback done) {
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

bool EdgeStream::ApplyLocked(Queue::Step step, bool ok, Calls& calls) {
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

void EdgeStream::Complete(bool release, Calls& calls) {
  if (release) RemoveHold();
  for (auto& [cb, ok] : calls)
    if (cb) cb(ok);
}

void EdgeStream::OnWriteDone(bool ok) {
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

void EdgeStream::OnReadDone(bool ok) {
  if (ok) {
    pb::EdgeCommand cmd = std::move(in_);
    in_.Clear();
    bool handled = true;
    try {
      if (callbacks_.on_command) handled = callbacks_.on_command(std::move(cmd));
    } catch (const std::exception& e) {
      log::Get("edge")->error("edge command handler failed: {}", log::Escape(e.what()));
      handled = false;
    } catch (...) {
      handled = false;
    }
    if (!handled) {
      log::Get("edge")->error(
          "edge stream cancelled: a command could not be handled; the agent reconnects");
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

void EdgeStream::OnDone(const grpc::Status& status) {
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

void EdgeStream::Finish() {
  Calls calls;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    finishing_ = true;
    release = ApplyLocked(writes_.Check(), false, calls);
  }
  Complete(release, calls);
}

void EdgeStream::Cancel() {
  context_.TryCancel();
}

bool EdgeStream::closed() const {
  std::lock_guard lock(mu_);
  return closed_ || read_closed_;
}

size_t EdgeStream::queued() const {
  return writes_.size();
}

}  // namespace edge::agentedge
