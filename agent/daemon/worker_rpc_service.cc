#include "agent/daemon/worker_rpc_service.h"

#include <unistd.h>

#include <thread>

#include "agent/worker_rpc/control_plane_client.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace edge::daemon {

WorkerRpcService::WorkerRpcService(config::AgentConfig config, std::string listen_addr,
                                   ExecutorHost& host, Clock& clock)
    : config_(std::move(config)),
      listen_addr_(std::move(listen_addr)),
      host_(host),
      clock_(clock) {}

WorkerRpcService::~WorkerRpcService() {
  Stop();
}

Status WorkerRpcService::Start() {
  std::lock_guard lock(mu_);
  if (server_) return MakeError(ErrorCode::kAlreadyExists, "worker RPC server already running");
  sandbox::Executor* executor = host_.executor();
  boost::asio::io_context* io = host_.io_context();
  if (executor == nullptr || io == nullptr) {
    return MakeError(ErrorCode::kFailedPrecondition, "the executor is not running");
  }
  const auto& w = config_.worker;
  auto auth = std::make_unique<identity::WorkerAuthenticator>(w.worker_id, w.auth, clock_);
  if (!auth->configured()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "worker RPC on " + listen_addr_ +
                         " needs a credential: set worker.auth.worker_token(_file), "
                         "worker.auth.worker_tokens." +
                         w.worker_id + " or worker.auth.worker_signing_key(_file)");
  }
  workerrpc::WorkerRpcOptions options;
  options.worker_id = w.worker_id;
  options.max_result_bytes = w.max_body_bytes;
  options.max_concurrent = static_cast<size_t>(w.max_concurrent);
  std::shared_ptr<workerrpc::ControlPlaneClient> cp;
  if (!w.control_plane_url.empty()) {
    auto url = http::ParseUrl(w.control_plane_url, "worker.control_plane_url");
    if (!url) return std::unexpected(url.error());
    cp = std::make_shared<workerrpc::ControlPlaneClient>(
        *url, w.worker_id, w.auth, clock_, std::chrono::seconds(10), w.control_plane_tls);
    options.renew_upstream = [cp](const sandbox::Lease& presented, std::string_view ttl) {
      return cp->RenewLease(presented, ttl);
    };
  }
  auto handler = std::make_unique<workerrpc::WorkerRpcHandler>(*executor, *auth, options);
  http::ServerOptions so;
  so.max_body_bytes = w.max_body_bytes;
  so.name = "worker_rpc";
  if (w.rpc_tls.enabled) {
    so.tls = http::TlsFiles{w.rpc_tls.server_cert_file, w.rpc_tls.server_key_file,
                            w.rpc_tls.client_ca_file};
  }
  auto server = std::make_unique<http::Server>(*io, so, *handler);
  if (auto st = server->Listen(listen_addr_); !st) return std::unexpected(st.error());
  log::Get("worker_rpc")
      ->info("worker RPC listening on {} (port {}, worker id {}, {}{})", listen_addr_,
             server->port(), w.worker_id, w.rpc_tls.enabled ? "TLS" : "plaintext",
             w.rpc_tls.enabled && !w.rpc_tls.client_ca_file.empty() ? ", client certificates "
                                                                      "required"
                                                                    : "");
  auth_ = std::move(auth);
  handler_ = std::move(handler);
  server_ = std::move(server);
  if (cp) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    workerrpc::HeartbeatFacts facts;
    facts.hostname = host;
    facts.providers = {config_.sandbox.provider};
    facts.capabilities = executor->Tools();
    facts.max_sandboxes = config_.sandbox.max_sandboxes;
    facts.rpc_url =
        workerrpc::RpcUrl(listen_addr_, server_->port(), w.rpc_tls.enabled, facts.hostname);
    backoff_ = std::make_unique<FullJitterBackoff>(std::chrono::seconds(1),
                                                   std::chrono::seconds(60), random_);
    heartbeat_stop_ = std::make_unique<StopSource>();
    heartbeat_ = std::make_unique<workerrpc::HeartbeatLoop>(
        [cp](const nlohmann::json& body) { return cp->Heartbeat(body); },
        [facts, executor] {
          workerrpc::HeartbeatFacts f = facts;
          f.draining = executor->spawns_draining();
          return f;
        },
        *heartbeat_stop_, *backoff_, w.heartbeat_interval);
    heartbeat_thread_ = std::thread([hb = heartbeat_.get()] {
      NameThisThread("worker-hb");
      hb->Run();
    });
    log::Get("worker_rpc")
        ->info("heartbeats to {} every {} ms (rpc_url {})", w.control_plane_url,
               w.heartbeat_interval.count(), facts.rpc_url);
  }
  return OkStatus();
}

void WorkerRpcService::Stop() {
  std::unique_ptr<http::Server> server;
  std::unique_ptr<workerrpc::WorkerRpcHandler> handler;
  std::unique_ptr<identity::WorkerAuthenticator> auth;
  {
    std::lock_guard lock(mu_);
    server = std::move(server_);
    handler = std::move(handler_);
    auth = std::move(auth_);
  }
  if (heartbeat_stop_) {  // set and reset only by Start/Stop, which never overlap
    heartbeat_stop_->Stop("stopping");
    if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
    std::lock_guard lock(mu_);
    heartbeat_.reset();
    heartbeat_stop_.reset();
    backoff_.reset();
  }
  if (!server) return;
  server->Stop();
  handler->CancelAll("the agent is stopping");
  // The executor answers every command (cancelled ones within the kill grace).
  const auto deadline =
      std::chrono::steady_clock::now() + config_.sandbox.kill_grace + std::chrono::seconds(5);
  while (handler->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (handler->in_flight() > 0) {
    // Their callbacks still refer to the handler: keep it (the process is ending).
    log::Get("worker_rpc")
        ->error("{} worker RPC call(s) still unanswered at stop", handler->in_flight());
    (void)handler.release();
    (void)auth.release();
  }
  server.reset();
}

std::map<std::string, std::string> WorkerRpcService::Details() const {
  std::lock_guard lock(mu_);
  if (!server_) return {{"listen", listen_addr_}};
  std::map<std::string, std::string> d = {{"listen", listen_addr_},
                                          {"port", std::to_string(server_->port())},
                                          {"worker_id", config_.worker.worker_id},
                                          {"connections", std::to_string(server_->connections())},
                                          {"in_flight", std::to_string(handler_->in_flight())}};
  if (heartbeat_) {
    d["heartbeats_sent"] = std::to_string(heartbeat_->sent());
    d["heartbeats_failed"] = std::to_string(heartbeat_->failed());
    d["heartbeat_error"] = heartbeat_->last_error();
  }
  return d;
}

uint16_t WorkerRpcService::port() const {
  std::lock_guard lock(mu_);
  return server_ ? server_->port() : 0;
}

void WorkerRpcService::Reload() {
  if (!config_.worker.rpc_tls.enabled) return;
  if (auto st = ReloadTls(); !st) {
    log::Get("worker_rpc")
        ->error("TLS certificates not reloaded (the previous ones stay): {}", st.error().message);
  } else {
    log::Get("worker_rpc")->info("TLS certificates reloaded for new connections");
  }
}

Status WorkerRpcService::ReloadTls() {
  std::lock_guard lock(mu_);
  if (!server_) return OkStatus();
  return server_->ReloadTls();
}

}  // namespace edge::daemon
