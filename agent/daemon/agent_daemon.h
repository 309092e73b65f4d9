// The edge-agent process: wires the services (design.md §2) from the config, runs them
// until SIGTERM/SIGINT, reloads on SIGHUP, reports health (status file, sd_notify
// READY/WATCHDOG/STOPPING) and stops every service in reverse order. Owns the
// ServiceRegistry.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "agent/daemon/service_registry.h"
#include "common/clock.h"
#include "config/agent_config.h"

namespace edge::daemon {

struct DaemonOptions {
  std::string version;
  // How often the status file is refreshed (and the watchdog fed).
  std::chrono::milliseconds status_interval{5000};
  // SIGHUP re-reads the config through this (the same file and environment as at start);
  // unset = SIGHUP reloads certificates only.
  std::function<Result<config::AgentConfig>()> load_config;
  // Applies a reloaded log level and format (unset = unchanged).
  std::function<Status(const config::LogConfig&)> apply_log;
};

class AgentDaemon {
 public:
  AgentDaemon(config::AgentConfig config, DaemonOptions options, Clock& clock);
  ~AgentDaemon();

  ServiceRegistry& services() { return services_; }
  // Starts the services and blocks until a termination signal arrives or RequestExit is
  // called (the caller must have called BlockTerminationSignals() before starting any
  // thread). Stops every service, then returns the exit code (0).
  int Run();

  // Asks Run to stop the services and return (e.g. after the controller's Shutdown command).
  // Non-blocking, callable from any thread: it raises SIGTERM for the process, which Run's
  // signal wait receives, and remembers `reason` for the log.
  void RequestExit(const std::string& reason);

 private:
  void WriteStatus(const std::string& state);
  // SIGHUP: the config file again (tools, security contexts, log level and format apply at
  // once; other changes are named as needing a restart), then the certificates.
  void Reload();

  config::AgentConfig config_;
  DaemonOptions options_;
  Clock& clock_;
  ServiceRegistry services_{clock_};
  int64_t started_at_ms_ = 0;
  std::mutex exit_mu_;
  std::string exit_reason_;  // set by RequestExit
};

}  // namespace edge::daemon
