// Owns the daemon's services: starts them in registration order, stops them in reverse.
// A service whose Start fails is logged and marked failed; the others keep running.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/daemon/service.h"

namespace edge::daemon {

enum class ServiceState { kRegistered, kRunning, kFailed, kStopped };
std::string_view ServiceStateName(ServiceState s);

struct ServiceStatus {
  std::string name;
  ServiceState state = ServiceState::kRegistered;
  std::string error;                           // why it failed, when it did
  std::map<std::string, std::string> details;  // Service::Details() while it runs
};

class ServiceRegistry {
 public:
  ServiceRegistry() = default;
  ServiceRegistry(const ServiceRegistry&) = delete;
  ServiceRegistry& operator=(const ServiceRegistry&) = delete;
  ~ServiceRegistry();

  void Add(std::unique_ptr<Service> service);
  // Starts every registered service; returns how many failed to start.
  size_t StartAll();
  // Stops running services in reverse order. Idempotent.
  void StopAll();
  std::vector<ServiceStatus> Snapshot() const;

 private:
  struct Entry {
    std::unique_ptr<Service> service;
    ServiceStatus status;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace edge::daemon
