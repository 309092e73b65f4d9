// EdgeService: the edge stream as a daemon Service (design.md §2, §9). Start() resolves the
// controller address (controller.address, else the one recorded at enrollment), loads the
// keystore for mTLS, and starts an agentedge::EdgeSession over the ExecutorHost's executor
// with the production Clock, Random and FullJitterBackoff (base 1 s, cap 60 s); Stop() ends
// it promptly. Details() puts the session's state in the status file. Registered only when
// edge.enabled and the node is enrolled. Owns the session; borrows the ExecutorHost.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/daemon/executor_host.h"
#include "agent/daemon/service.h"
#include "agent/edge/edge_session.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/random.h"
#include "config/agent_config.h"

namespace edge::daemon {

class EdgeService final : public Service {
 public:
  EdgeService(config::AgentConfig config, std::string version, ExecutorHost& host, Clock& clock,
              std::function<void(const std::string& reason)> request_exit);
  ~EdgeService() override;

  std::string Name() const override { return "edge"; }
  Status Start() override;
  void Stop() override;
  std::map<std::string, std::string> Details() const override;
  std::optional<std::string> Stuck(int64_t now_ms) const override;
  // The session's outbox database caches (OutboxStore::ReleaseMemory).
  size_t ReleaseMemory() override;

 private:
  config::AgentConfig config_;
  std::string version_;
  ExecutorHost& host_;
  Clock& clock_;
  std::function<void(const std::string&)> request_exit_;
  DefaultRandom random_;
  FullJitterBackoff backoff_;
  std::unique_ptr<agentedge::EdgeSession> session_;
};

}  // namespace edge::daemon
