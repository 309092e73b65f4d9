// The bundled minimal controller: the server side of every contract the agent speaks.
// Owns its parts — CA, token key, Store, node tokens, edge attestation, the Dispatcher, the
// node health monitor, the TLS gRPC server (bootstrap, node cluster, health, reflection) and
// the admin API on a Unix socket — and starts/stops them in order.
#pragma once

#include <grpcpp/grpcpp.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/timer_queue.h"
#include "config/controller_config.h"
#include "controller/admin_server.h"
#include "controller/admin_service.h"
#include "controller/bootstrap_service.h"
#include "controller/call_limits.h"
#include "controller/compute_admin.h"
#include "controller/compute_hub.h"
#include "controller/compute_service.h"
#include "controller/compute_tokens.h"
#include "controller/dispatcher.h"
#include "controller/edge_attestation.h"
#include "controller/fleet_admin.h"
#include "controller/fleet_api.h"
#include "controller/fleet_commands.h"
#include "controller/join_token_issuer.h"
#include "controller/node_cluster_service.h"
#include "controller/node_monitor.h"
#include "controller/node_tokens.h"
#include "controller/operator_api.h"
#include "controller/session_manager.h"
#include "controller/store.h"
#include "controller/user_tokens.h"
#include "controller/worker_admin.h"
#include "controller/worker_control_plane_api.h"
#include "controller/worker_fleet.h"
#include "http/router.h"
#include "http/server.h"

namespace edge::controller {

// The largest TLS record the controller's gRPC server emits (see Controller::StartGrpc);
// tests/bench/grpc_floor measures a bare gRPC server configured the same way.
inline constexpr int kControllerTlsFrameBytes = 4096;

class Controller {
 public:
  Controller(config::ControllerConfig config, std::string version, Clock& clock);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  Status Start();
  // Stops promptly: in-flight RPCs get a short grace, then are cancelled.
  void Stop();
  // SIGHUP: loads the HTTP server's certificate files again for new connections (errors are
  // logged; the old ones stay). The gRPC server's certificate is reissued only at start.
  void Reload();
  int grpc_port() const { return grpc_port_; }
  // The bound HTTP port (http.listen), 0 when HTTP is off.
  int http_port() const { return http_port_; }
  // Parts, for in-process tests (valid between Start and destruction).
  Store& store() { return *store_; }
  Dispatcher& dispatcher() { return *dispatcher_; }
  ComputeHub& compute_hub() { return *compute_hub_; }
  ComputeTokens& compute_tokens() { return *compute_tokens_; }
  const std::string& ca_pem() const { return ca_->cert_pem(); }

 private:
  Status StartGrpc();
  // The HTTP server on http.listen (the worker control-plane endpoints and the operator
  // API), on an io_context of its own with two threads.
  Status StartHttp();
  void StopHttp();

  config::ControllerConfig config_;
  Clock& clock_;
  ControllerInfo info_;
  std::unique_ptr<Store> store_;
  std::optional<identity::CertificateAuthority> ca_;
  std::optional<identity::EcSigningKey> token_key_;
  std::unique_ptr<JoinTokenIssuer> tokens_;
  std::unique_ptr<NodeTokenAuthority> node_tokens_;
  std::unique_ptr<EdgeAttestation> attestation_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<NodeMonitor> monitor_;
  // The compute-member service (CloudEventsService.startStreaming) and its admin API.
  DefaultRandom compute_random_;
  std::unique_ptr<ComputeTokens> compute_tokens_;
  std::unique_ptr<ComputeHub> compute_hub_;
  std::unique_ptr<ComputeServiceImpl> compute_service_;
  std::unique_ptr<ComputeAdminImpl> compute_admin_;
  std::unique_ptr<BootstrapServiceImpl> bootstrap_;
  // The edge streams' timers (how long one waits for a slow operator client), before the
  // service so that it outlives every stream.
  std::unique_ptr<TimerQueue> stream_timers_;
  std::unique_ptr<NodeClusterServiceImpl> node_cluster_;
  std::unique_ptr<RefusalLog> refusals_;  // refused streams and over-limit calls
  std::unique_ptr<UnauthenticatedCalls> unauthenticated_;
  std::unique_ptr<EdgeFleet> edge_fleet_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  // Fleet commands (one command per matching node) and operator tags: the domain, its admin
  // service and its REST extension.
  std::unique_ptr<FleetCommands> fleet_commands_;
  std::unique_ptr<FleetAdminImpl> fleet_admin_;
  std::unique_ptr<FleetApi> fleet_api_;
  // Operator sessions (wire.md §5.5) and the timers of their windows.
  std::unique_ptr<TimerQueue> session_timers_;
  std::unique_ptr<SessionManager> sessions_;
  // The operator ("northbound") API: its user tokens (minted on the admin socket) and routes.
  std::unique_ptr<UserTokens> user_tokens_;
  std::unique_ptr<OperatorApi> operator_api_;
  AdminServer admin_server_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int grpc_port_ = 0;
  // Workers: their control plane (HTTP) and the operator's WorkerAdmin.
  std::unique_ptr<identity::WorkerAuthenticator> worker_auth_;
  std::unique_ptr<WorkerFleet> worker_fleet_;
  std::unique_ptr<WorkerControlPlaneApi> worker_api_;
  std::unique_ptr<WorkerAdminImpl> worker_admin_;
  boost::asio::io_context http_io_;
  std::vector<std::thread> http_threads_;
  http::Router router_;
  std::unique_ptr<http::Server> http_server_;
  int http_port_ = 0;
};

}  // namespace edge::controller
