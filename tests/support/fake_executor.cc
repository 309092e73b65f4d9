#include "tests/support/fake_executor.h"

#include <stdexcept>

#include <algorithm>
#include <utility>

namespace edge::testing {

using sandbox::InvokeRequest;
using sandbox::InvokeResult;

void FakeExecutor::Invoke(InvokeRequest request, sandbox::CancelToken cancel,
                          sandbox::ChunkSink on_chunk, DoneCallback done) {
  std::optional<InvokeResult> answer;
  {
    std::lock_guard lock(mu_);
    if (throw_next_) {
      const std::string what = *throw_next_;
      throw_next_.reset();
      throw std::runtime_error(what);
    }
    requests_.push_back(request);
    const auto stored = stored_.find(request.command_id);
    if (!request.command_id.empty() && stored != stored_.end()) {
      answer = stored->second;
      answer->replayed = true;
    } else if (draining_ || refuse_next_) {
      InvokeResult r;
      r.command_id = request.command_id;
      r.outcome = sandbox::Outcome::kError;
      r.error = draining_ ? Error{ErrorCode::kDraining, "the agent is draining"} : *refuse_next_;
      refuse_next_.reset();
      answer = std::move(r);
    } else {
      pending_.push_back(
          Call{std::move(request), std::move(cancel), std::move(on_chunk), std::move(done)});
      return;
    }
  }
  done(std::move(*answer));
}

Result<std::optional<InvokeResult>> FakeExecutor::StoredResult(
    const std::string& command_id) const {
  std::lock_guard lock(mu_);
  const auto it = stored_.find(command_id);
  if (it == stored_.end()) return std::optional<InvokeResult>{};
  InvokeResult r = it->second;
  r.replayed = true;
  return std::optional<InvokeResult>(std::move(r));
}

bool FakeExecutor::IsRunning(const std::string& command_id) const {
  std::lock_guard lock(mu_);
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const Call& c) { return c.request.command_id == command_id; });
}

bool FakeExecutor::Cancel(const std::string& command_id, const std::string& reason) {
  std::lock_guard lock(mu_);
  const bool found = std::any_of(pending_.begin(), pending_.end(),
                                 [&](const Call& c) { return c.request.command_id == command_id; });
  if (found) cancels_.emplace_back(command_id, reason);
  return found;
}

std::vector<sandbox::InvokeResult> FakeExecutor::TakeInterrupted(const std::string& door) {
  std::lock_guard lock(mu_);
  auto node = interrupted_.extract(door);
  return node.empty() ? std::vector<sandbox::InvokeResult>{} : std::move(node.mapped());
}

edge::Status FakeExecutor::ConfirmInterrupted(const std::string& command_id) {
  std::lock_guard lock(mu_);
  confirmed_.push_back(command_id);
  return OkStatus();
}

std::vector<std::string> FakeExecutor::confirmed() const {
  std::lock_guard lock(mu_);
  return confirmed_;
}

void FakeExecutor::AddInterrupted(const std::string& door, sandbox::InvokeResult result) {
  std::lock_guard lock(mu_);
  interrupted_[door].push_back(std::move(result));
}

void FakeExecutor::Drain() {
  std::lock_guard lock(mu_);
  draining_ = true;
}

bool FakeExecutor::draining() const {
  std::lock_guard lock(mu_);
  return draining_;
}

void FakeExecutor::DrainSpawns() {
  std::lock_guard lock(mu_);
  spawns_draining_ = true;
}

bool FakeExecutor::spawns_draining() const {
  std::lock_guard lock(mu_);
  return draining_ || spawns_draining_;
}

void FakeExecutor::Shutdown(std::chrono::milliseconds /*grace*/, std::function<void()> done) {
  std::vector<Call> left;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    left.swap(pending_);
  }
  for (auto& c : left) {
    InvokeResult r;
    r.command_id = c.request.command_id;
    r.outcome = sandbox::Outcome::kCancelled;
    r.error = Error{ErrorCode::kCancelled, "agent shutdown"};
    r.reason = "agent shutdown";
    c.done(std::move(r));
  }
  done();
}

std::vector<std::string> FakeExecutor::Tools() const {
  return tools_;
}

size_t FakeExecutor::running(const std::string& door) const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(pending_.begin(), pending_.end(), [&](const Call& c) {
    return c.request.door_limit && c.request.door_limit->door == door;
  }));
}

edge::Status FakeExecutor::Reconfigure(
    const std::map<std::string, sandbox::ToolConfig>& /*tools*/,
    const std::map<std::string, sandbox::SecurityContextConfig>& /*security_contexts*/) {
  std::lock_guard lock(mu_);
  ++reconfigures_;
  return OkStatus();
}

Result<sandbox::SandboxInfo> FakeExecutor::Spawn(const sandbox::SpawnRequest& request,
                                                 const sandbox::Lease* lease) {
  std::lock_guard lock(mu_);
  spawns_.push_back(request);
  if (lease != nullptr) leases_.push_back(*lease);
  if (draining_ || spawns_draining_) {
    return MakeError(ErrorCode::kDraining, "the agent is draining");
  }
  sandbox::SandboxInfo info;
  info.id = request.id;
  info.provider = request.provider.empty() ? "process" : request.provider;
  info.runtime_id = info.provider + "-" + request.id;
  info.owner = request.owner;
  info.ttl = request.ttl;
  info.metadata = request.metadata;
  sandboxes_[request.id] = info;
  return info;
}

void FakeExecutor::Destroy(std::string_view sandbox_id, const sandbox::Lease* lease,
                           DestroyCallback done) {
  // Answered at once, outside the lock (as the executor's refusals are).
  done([&]() -> Result<sandbox::SandboxInfo> {
    std::lock_guard lock(mu_);
    if (lease != nullptr) leases_.push_back(*lease);
    const auto it = sandboxes_.find(std::string(sandbox_id));
    if (it == sandboxes_.end()) {
      return MakeError(ErrorCode::kNotFound, "sandbox '" + std::string(sandbox_id) + "' not found");
    }
    sandbox::SandboxInfo info = it->second;
    info.state = sandbox::SandboxState::kDestroyed;
    sandboxes_.erase(it);
    return info;
  }());
}

Result<sandbox::SandboxInfo> FakeExecutor::Status(std::string_view sandbox_id) const {
  std::lock_guard lock(mu_);
  const auto it = sandboxes_.find(std::string(sandbox_id));
  if (it == sandboxes_.end()) {
    return MakeError(ErrorCode::kNotFound, "sandbox '" + std::string(sandbox_id) + "' not found");
  }
  return it->second;
}

Result<std::vector<sandbox::SandboxInfo>> FakeExecutor::List() const {
  std::lock_guard lock(mu_);
  std::vector<sandbox::SandboxInfo> out;
  for (const auto& [id, info] : sandboxes_)
    out.push_back(info);
  return out;
}

Result<sandbox::Lease> FakeExecutor::RenewLease(const sandbox::Lease& renewed) {
  std::lock_guard lock(mu_);
  leases_.push_back(renewed);
  return renewed;
}

Result<std::vector<std::string>> FakeExecutor::Logs(std::string_view sandbox_id, size_t n) {
  std::lock_guard lock(mu_);
  if (!sandboxes_.contains(std::string(sandbox_id))) {
    return MakeError(ErrorCode::kNotFound, "sandbox '" + std::string(sandbox_id) + "' not found");
  }
  const size_t from = logs_.size() > n ? logs_.size() - n : 0;
  return std::vector<std::string>(logs_.begin() + static_cast<std::ptrdiff_t>(from), logs_.end());
}

void FakeExecutor::RefuseNext(Error error) {
  std::lock_guard lock(mu_);
  refuse_next_ = std::move(error);
}

void FakeExecutor::SetStored(InvokeResult result) {
  std::lock_guard lock(mu_);
  stored_[result.command_id] = std::move(result);
}

bool FakeExecutor::Chunk(const std::string& command_id, sandbox::OutputChunk chunk,
                         std::function<void()> ack) {
  sandbox::ChunkSink sink;
  {
    std::lock_guard lock(mu_);
    for (const auto& c : pending_) {
      if (c.request.command_id == command_id) sink = c.on_chunk;
    }
  }
  if (!sink) return false;
  sink(std::move(chunk), std::move(ack));
  return true;
}

std::optional<FakeExecutor::Call> FakeExecutor::Take(const std::string& command_id) {
  std::lock_guard lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->request.command_id != command_id) continue;
    Call c = std::move(*it);
    pending_.erase(it);
    return c;
  }
  return std::nullopt;
}

bool FakeExecutor::Finish(const std::string& command_id, InvokeResult result) {
  auto call = Take(command_id);
  if (!call) return false;
  result.command_id = command_id;
  call->done(std::move(result));
  return true;
}

std::vector<InvokeRequest> FakeExecutor::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t FakeExecutor::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

std::vector<std::pair<std::string, std::string>> FakeExecutor::cancels() const {
  std::lock_guard lock(mu_);
  return cancels_;
}

size_t FakeExecutor::reconfigures() const {
  std::lock_guard lock(mu_);
  return reconfigures_;
}

std::vector<sandbox::SpawnRequest> FakeExecutor::spawns() const {
  std::lock_guard lock(mu_);
  return spawns_;
}

std::vector<sandbox::Lease> FakeExecutor::leases() const {
  std::lock_guard lock(mu_);
  return leases_;
}

}  // namespace edge::testing
