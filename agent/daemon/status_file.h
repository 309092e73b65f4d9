// The running agent's health, as a small JSON file (data_dir/state/status.json) that the
// daemon rewrites atomically and `edge-agent status` reads: pid, version, start time, the
// last update, and each service's state and details (e.g. the edge stream's state, stream
// id, config version). No secrets are ever written to it.
#pragma once

#include <string>
#include <vector>

#include "agent/daemon/service_registry.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::daemon {

struct AgentStatus {
  int pid = 0;
  std::string version;
  std::string node_id;
  int64_t started_at_ms = 0;
  int64_t updated_at_ms = 0;
  int64_t update_interval_ms = 0;  // the longest the daemon leaves the file unrewritten
  std::string state;               // "starting" | "running" | "draining" | "stopping"
  std::vector<ServiceStatus> services;
};

std::string StatusFilePath(const std::string& data_dir);
Status WriteStatusFile(const std::string& data_dir, const AgentStatus& status);
Result<AgentStatus> ReadStatusFile(const std::string& data_dir);

// Healthy = the process is alive, the file was refreshed within 3 of its update_interval_ms
// (the daemon's liveness interval: it rewrites the file on every change and at least that
// often, agent_daemon.h), state is "running" and no service failed. `why` says what is wrong
// when it is not.
bool IsHealthy(const AgentStatus& status, Clock::WallTime now, std::string* why);

}  // namespace edge::daemon
