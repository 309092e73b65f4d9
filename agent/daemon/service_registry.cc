#include "agent/daemon/service_registry.h"

#include "common/log.h"

#include <algorithm>

namespace edge::daemon {

std::string_view ServiceStateName(ServiceState s) {
  switch (s) {
    case ServiceState::kRegistered:
      return "registered";
    case ServiceState::kRunning:
      return "running";
    case ServiceState::kFailed:
      return "failed";
    case ServiceState::kStopped:
      return "stopped";
  }
  return "unknown";
}

ServiceRegistry::~ServiceRegistry() {
  StopAll();
}

void ServiceRegistry::SetStatusListener(std::function<void()> listener) {
  std::lock_guard lock(mu_);
  status_listener_ = std::move(listener);
}

void ServiceRegistry::Add(std::unique_ptr<Service> service) {
  std::lock_guard lock(mu_);
  if (status_listener_) service->SetStatusListener(status_listener_);
  ServiceStatus status{service->Name(), ServiceState::kRegistered, ""};
  entries_.push_back(Entry{std::move(service), std::move(status)});
}

bool ServiceRegistry::StartLocked(Entry& e) {
  auto log = log::Get("daemon");
  if (auto st = e.service->Start(); st) {
    if (e.status.failed_attempts > 0) {
      log->info("service {} started after {} failed attempt(s)", e.status.name,
                e.status.failed_attempts);
    } else {
      log->info("service {} started", e.status.name);
    }
    e.status.state = ServiceState::kRunning;
    e.status.error.clear();
    e.status.failed_attempts = 0;
    e.status.retry_in = std::chrono::milliseconds(0);
    return true;
  } else {
    e.status.state = ServiceState::kFailed;
    e.status.error = st.error().ToString();
    const int shift = std::min(e.status.failed_attempts, 20);
    const auto delay = std::min(kMaxRetry, kFirstRetry * (int64_t{1} << shift));
    ++e.status.failed_attempts;
    e.next_retry = clock_.Monotonic() + delay;
    e.status.retry_in = delay;
    log->error("service {} failed to start (attempt {}): {}; retrying in {} s", e.status.name,
               e.status.failed_attempts, e.status.error, delay.count() / 1000);
    return false;
  }
}

size_t ServiceRegistry::StartAll() {
  size_t failed = 0;
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (e.status.state == ServiceState::kRunning) continue;
    if (!StartLocked(e)) ++failed;
  }
  return failed;
}

size_t ServiceRegistry::RetryFailed() {
  size_t failed = 0;
  std::lock_guard lock(mu_);
  const auto now = clock_.Monotonic();
  for (auto& e : entries_) {
    if (e.status.state != ServiceState::kFailed) continue;
    if (now < e.next_retry) {
      e.status.retry_in = std::chrono::duration_cast<std::chrono::milliseconds>(e.next_retry - now);
      ++failed;
      continue;
    }
    if (!StartLocked(e)) ++failed;
  }
  return failed;
}

std::optional<Clock::MonoTime> ServiceRegistry::NextRetry() const {
  std::lock_guard lock(mu_);
  std::optional<Clock::MonoTime> next;
  for (const auto& e : entries_) {
    if (e.status.state != ServiceState::kFailed) continue;
    if (!next || e.next_retry < *next) next = e.next_retry;
  }
  return next;
}

void ServiceRegistry::StopAll() {
  std::lock_guard lock(mu_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->status.state != ServiceState::kRunning) continue;
    it->service->Stop();
    it->status.state = ServiceState::kStopped;
    log::Get("daemon")->info("service {} stopped", it->status.name);
  }
}

size_t ServiceRegistry::ReleaseMemoryAll() {
  std::lock_guard lock(mu_);
  size_t bytes = 0;
  for (auto& e : entries_) {
    if (e.status.state == ServiceState::kRunning) bytes += e.service->ReleaseMemory();
  }
  return bytes;
}

void ServiceRegistry::ReloadAll() {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (e.status.state == ServiceState::kRunning) e.service->Reload();
  }
}

std::vector<std::string> ServiceRegistry::ReconfigureAll(const config::AgentConfig& config) {
  std::lock_guard lock(mu_);
  std::vector<std::string> errors;
  for (auto& e : entries_) {
    if (e.status.state != ServiceState::kRunning) continue;
    if (auto st = e.service->Reconfigure(config); !st) {
      errors.push_back(e.service->Name() + ": " + st.error().message);
    }
  }
  return errors;
}

std::optional<std::string> ServiceRegistry::FirstStuck(int64_t now_ms) const {
  std::lock_guard lock(mu_);
  for (const auto& e : entries_) {
    if (e.status.state != ServiceState::kRunning) continue;
    if (auto why = e.service->Stuck(now_ms)) return e.service->Name() + ": " + *why;
  }
  return std::nullopt;
}

std::vector<ServiceStatus> ServiceRegistry::Snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<ServiceStatus> out;
  for (const auto& e : entries_) {
    out.push_back(e.status);
    if (e.status.state == ServiceState::kRunning) out.back().details = e.service->Details();
  }
  return out;
}

}  // namespace edge::daemon
