// The edge-agent process: wires the services (design.md §2) from the config, runs them
// until SIGTERM/SIGINT, reports health (status file, sd_notify READY/WATCHDOG/STOPPING)
// and stops every service in reverse order. Owns the ServiceRegistry.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "agent/daemon/service_registry.h"
#include "common/clock.h"
#include "config/agent_config.h"

namespace edge::daemon {

struct DaemonOptions {
  std::string version;
  // How often the status file is refreshed (and the watchdog fed).
  std::chrono::milliseconds status_interval{5000};
};

class AgentDaemon {
 public:
  AgentDaemon(config::AgentConfig config, DaemonOptions options, Clock& clock);
  ~AgentDaemon();

  ServiceRegistry& services() { return services_; }
  // Starts the services and blocks until a termination signal arrives (the caller must
  // have called BlockTerminationSignals() before starting any thread). Returns the exit code.
  int Run();

 private:
  void WriteStatus(const std::string& state);

  config::AgentConfig config_;
  DaemonOptions options_;
  Clock& clock_;
  ServiceRegistry services_;
  int64_t started_at_ms_ = 0;
};

}  // namespace edge::daemon
