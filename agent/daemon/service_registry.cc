#include "agent/daemon/service_registry.h"

#include "common/log.h"

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

void ServiceRegistry::Add(std::unique_ptr<Service> service) {
  std::lock_guard lock(mu_);
  ServiceStatus status{service->Name(), ServiceState::kRegistered, ""};
  entries_.push_back(Entry{std::move(service), std::move(status)});
}

size_t ServiceRegistry::StartAll() {
  auto log = log::Get("daemon");
  size_t failed = 0;
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (e.status.state == ServiceState::kRunning) continue;
    if (auto st = e.service->Start(); st) {
      e.status.state = ServiceState::kRunning;
      e.status.error.clear();
      log->info("service {} started", e.status.name);
    } else {
      e.status.state = ServiceState::kFailed;
      e.status.error = st.error().ToString();
      ++failed;
      log->error("service {} failed to start: {}", e.status.name, e.status.error);
    }
  }
  return failed;
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
