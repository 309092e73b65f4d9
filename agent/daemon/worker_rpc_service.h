// WorkerRpcService: the worker RPC door (agent/worker_rpc) as a daemon Service. Start()
// builds the WorkerAuthenticator from worker.auth (refusing to start without any credential),
// the WorkerRpcHandler over the ExecutorHost's executor, and an http::Server on the host's
// io_context bound to `listen_addr` (worker.listen_addr or `edge-agent --listen`), with
// worker.max_body_bytes and worker.rpc_tls. Stop() closes the listener and the connections,
// cancels the door's commands and waits (bounded) for their answers. With
// worker.control_plane_url it also runs the heartbeat loop (every worker.heartbeat_interval,
// full-jitter backoff 1 s..60 s after failures) and renews leases through the control plane.
// Registered when a listen address is configured; needs no enrollment. Borrows the
// ExecutorHost.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/daemon/executor_host.h"
#include "agent/daemon/service.h"
#include "agent/identity/worker_authenticator.h"
#include "agent/worker_rpc/heartbeat.h"
#include "agent/worker_rpc/worker_rpc_handler.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/stop.h"
#include "config/agent_config.h"
#include "http/server.h"

namespace edge::daemon {

class WorkerRpcService final : public Service {
 public:
  WorkerRpcService(config::AgentConfig config, std::string listen_addr, ExecutorHost& host,
                   Clock& clock);
  ~WorkerRpcService() override;

  std::string Name() const override { return "worker_rpc"; }
  Status Start() override;
  void Stop() override;
  std::map<std::string, std::string> Details() const override;

  // The bound port while running (0 otherwise).
  uint16_t port() const;
  // Reloads the TLS certificates (SIGHUP).
  Status ReloadTls();
  void Reload() override;

 private:
  config::AgentConfig config_;
  std::string listen_addr_;
  ExecutorHost& host_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::unique_ptr<identity::WorkerAuthenticator> auth_;
  std::unique_ptr<workerrpc::WorkerRpcHandler> handler_;
  std::unique_ptr<http::Server> server_;
  // The heartbeat loop (when worker.control_plane_url is set), on a thread of its own.
  DefaultRandom random_;
  std::unique_ptr<FullJitterBackoff> backoff_;
  std::unique_ptr<StopSource> heartbeat_stop_;
  std::unique_ptr<workerrpc::HeartbeatLoop> heartbeat_;
  std::thread heartbeat_thread_;
};

}  // namespace edge::daemon
