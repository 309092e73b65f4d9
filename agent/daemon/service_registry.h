// Owns the daemon's services: starts them in registration order, stops them in reverse.
// A service whose Start fails is logged and marked failed; the others keep running, and the
// failed one is started again by RetryFailed with exponential backoff (1 s doubling to 5 min,
// on the injected clock), its attempts and next retry shown in `edge-agent status`.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/daemon/service.h"
#include "common/clock.h"

namespace edge::daemon {

enum class ServiceState { kRegistered, kRunning, kFailed, kStopped };
std::string_view ServiceStateName(ServiceState s);

struct ServiceStatus {
  std::string name;
  ServiceState state = ServiceState::kRegistered;
  std::string error;                           // why it failed, when it did
  int failed_attempts = 0;                     // consecutive failed starts
  std::chrono::milliseconds retry_in{0};       // when failed: until the next attempt
  std::map<std::string, std::string> details;  // Service::Details() while it runs
};

class ServiceRegistry {
 public:
  explicit ServiceRegistry(Clock& clock) : clock_(clock) {}
  ServiceRegistry(const ServiceRegistry&) = delete;
  ServiceRegistry& operator=(const ServiceRegistry&) = delete;
  ~ServiceRegistry();

  // Every service added from now on gets `listener` (Service::SetStatusListener); the daemon
  // sets it before adding any.
  void SetStatusListener(std::function<void()> listener);
  void Add(std::unique_ptr<Service> service);
  // Starts every registered service; returns how many failed to start.
  size_t StartAll();
  // Starts again each failed service whose backoff has passed; returns how many are still
  // failed. The daemon calls it when NextRetry() is due.
  size_t RetryFailed();
  // When the earliest failed service is due to be started again; nullopt when none failed.
  std::optional<Clock::MonoTime> NextRetry() const;

  static constexpr std::chrono::milliseconds kFirstRetry{1000};
  static constexpr std::chrono::milliseconds kMaxRetry{300000};
  // Stops running services in reverse order. Idempotent.
  void StopAll();
  // Service::ReleaseMemory of every running service; the bytes they gave back.
  size_t ReleaseMemoryAll();
  // Service::Reload of every running service (SIGHUP).
  void ReloadAll();
  // Service::Reconfigure of every running service; the errors, each "<service>: <message>".
  std::vector<std::string> ReconfigureAll(const config::AgentConfig& config);
  // "<service>: <why>" for the first running service that is stuck, nullopt when none is.
  std::optional<std::string> FirstStuck(int64_t now_ms) const;
  std::vector<ServiceStatus> Snapshot() const;

 private:
  struct Entry {
    std::unique_ptr<Service> service;
    ServiceStatus status;
    Clock::MonoTime next_retry{};
  };
  // Starts `e` (mu_ held): running, or failed with its next retry scheduled.
  bool StartLocked(Entry& e);

  Clock& clock_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::function<void()> status_listener_;
};

}  // namespace edge::daemon
