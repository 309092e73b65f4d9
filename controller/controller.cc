#include "controller/controller.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <openssl/x509v3.h>

#include <boost/asio/executor_work_guard.hpp>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "controller/peer_identity.h"
#include "controller/sqlite_store.h"
#include "controller/ui_assets.h"

namespace edge::controller {

Controller::Controller(config::ControllerConfig config, std::string version, Clock& clock)
    : config_(std::move(config)), clock_(clock) {
  info_.version = std::move(version);
  info_.data_dir = config_.data_dir;
}

Controller::~Controller() {
  Stop();
}

namespace {

// Server reflection on one server, or not. Linking grpc++_reflection registers its plugin for
// every server of the process (a static initializer), so this option first removes whatever
// reflection plugin the builder has, then adds one back when it is wanted.
class ReflectionOption final : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool enabled) : enabled_(enabled) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    auto reflection = std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>();
    const std::string name = reflection->name();
    std::erase_if(*plugins, [&](const auto& p) { return p != nullptr && p->name() == name; });
    if (enabled_) plugins->push_back(std::move(reflection));
  }

 private:
  bool enabled_;
};

// The token-signing key: data_dir/ca/token.key (0600), created on first start. Its public
// half is (re)written to data_dir/ca/token.pub.pem (0644) on every start: the file an
// operator gives the agents as security.user_token_issuers.<tokens.issuer>, so they verify
// the user token inside every command.
Result<identity::EcSigningKey> LoadOrCreateTokenKey(const std::string& path,
                                                    const std::string& public_path) {
  Result<identity::EcSigningKey> key = MakeError(ErrorCode::kInternal, "no key");
  if (auto pem = ReadFile(path, 1 << 20)) {
    key = identity::EcSigningKey::FromPem(*pem);
  } else {
    key = identity::EcSigningKey::Generate();
    if (!key) return key;
    auto private_pem = key->PrivatePem();
    if (!private_pem) return std::unexpected(private_pem.error());
    if (auto st = WriteFileAtomic(path, *private_pem, {.mode = 0600}); !st)
      return std::unexpected(st.error());
  }
  if (!key) return key;
  auto public_pem = key->PublicPem();
  if (!public_pem) return std::unexpected(public_pem.error());
  if (ReadFile(public_path, 1 << 20).value_or("") != *public_pem) {
    if (auto st = WriteFileAtomic(public_path, *public_pem, {.mode = 0644}); !st)
      return std::unexpected(st.error());
  }
  return key;
}

// The server certificate: data_dir/ca/server.key (0600) + server.crt (0644), reused while it
// is issued by this CA, covers every configured name and has more than 30 days left.
Result<identity::IssuedCert> LoadOrIssueServerCert(const identity::CertificateAuthority& ca,
                                                   const std::string& dir,
                                                   const std::vector<std::string>& names,
                                                   Clock::WallTime now) {
  const std::string key_path = dir + "/server.key", cert_path = dir + "/server.crt";
  auto key_pem = ReadFile(key_path, 1 << 20);
  auto cert_pem = ReadFile(cert_path, 1 << 20);
  if (key_pem && cert_pem) {
    auto cert = identity::CertFromPem(*cert_pem);
    auto ca_cert = identity::CertFromPem(ca.cert_pem());
    auto key = identity::PrivateKeyFromPem(*key_pem);
    bool usable = cert && ca_cert && key && identity::IsIssuedBy(cert->get(), ca_cert->get()) &&
                  X509_check_private_key(cert->get(), key->get()) == 1;
    if (usable) {
      time_t horizon = std::chrono::system_clock::to_time_t(now + std::chrono::hours(24 * 30));
      usable = X509_cmp_time(X509_get0_notAfter(cert->get()), &horizon) > 0;
    }
    std::vector<std::string> wanted = {"localhost", "127.0.0.1"};
    wanted.insert(wanted.end(), names.begin(), names.end());
    for (const auto& n : wanted) {
      if (!usable) break;
      usable = X509_check_host(cert->get(), n.c_str(), n.size(), 0, nullptr) == 1 ||
               X509_check_ip_asc(cert->get(), n.c_str(), 0) == 1;
    }
    ERR_clear_error();
    if (usable) return identity::IssuedCert{*key_pem, *cert_pem, ""};
    log::Get("controller")
        ->info("server certificate in {} is stale or lacks a name: reissuing", dir);
  }
  auto issued = ca.IssueServerCert(names, now);
  if (!issued) return issued;
  if (auto st = WriteFileAtomic(key_path, issued->key_pem, {.mode = 0600}); !st) {
    return std::unexpected(st.error());
  }
  if (auto st = WriteFileAtomic(cert_path, issued->cert_pem, {.mode = 0644}); !st) {
    return std::unexpected(st.error());
  }
  return issued;
}

std::string ReplacePort(const std::string& hostport, int port) {
  return hostport.substr(0, hostport.rfind(':') + 1) + std::to_string(port);
}

}  // namespace

Status Controller::Start() {
  auto log = log::Get("controller");
  info_.started_at = clock_.Now();
  if (auto st = MakeDirs(config_.data_dir, 0700); !st) {
    return MakeError(st.error().code, "data_dir: " + st.error().message);
  }
  auto store = SqliteStore::Open(config_.data_dir + "/controller.db");
  if (!store) return std::unexpected(store.error());
  store_ = std::move(*store);

  auto ca = identity::CertificateAuthority::LoadOrCreate(config_.data_dir + "/ca",
                                                         "edge-controller CA", clock_.Now());
  if (!ca) return MakeError(ca.error().code, "controller CA: " + ca.error().message);
  ca_.emplace(std::move(*ca));
  info_.ca_pin = ca_->Pin();
  auto key = LoadOrCreateTokenKey(config_.data_dir + "/ca/token.key",
                                  config_.data_dir + "/ca/token.pub.pem");
  if (!key) return MakeError(key.error().code, "token signing key: " + key.error().message);
  token_key_.emplace(std::move(*key));

  node_tokens_ = std::make_unique<NodeTokenAuthority>(
      *store_, *token_key_, clock_,
      NodeTokenSettings{
          .issuer = config_.tokens.issuer,
          .ttl = std::chrono::duration_cast<std::chrono::seconds>(config_.tokens.node_token_ttl)});
  attestation_ = std::make_unique<EdgeAttestation>(
      *store_, *node_tokens_, *token_key_, clock_,
      AttestationSettings{
          .attest_per_minute = static_cast<size_t>(config_.limits.attest_per_minute),
          .attest_per_ip_per_minute = static_cast<size_t>(config_.limits.attest_per_ip_per_minute),
          .overlap_window =
              std::chrono::duration_cast<std::chrono::seconds>(config_.cluster.rotation_overlap),
          .join_token_issuer = config_.tokens.issuer});
  dispatcher_ = std::make_unique<Dispatcher>(*store_, *node_tokens_, clock_,
                                             static_cast<size_t>(config_.grpc.max_message_bytes));
  monitor_ = std::make_unique<NodeMonitor>(
      *store_, clock_,
      NodeMonitorSettings{.stale_threshold =
                              std::chrono::seconds(config_.cluster.stale_threshold_secs)});

  compute_tokens_ = std::make_unique<ComputeTokens>(*token_key_, clock_, config_.tokens.issuer);
  auto trusted = LoadTrustedIssuers(config_.http.trusted_issuers, "http.trusted_issuers");
  if (!trusted) return std::unexpected(trusted.error());
  user_tokens_ =
      std::make_unique<UserTokens>(*token_key_, clock_, config_.tokens.issuer, std::move(*trusted));
  compute_hub_ = std::make_unique<ComputeHub>(
      clock_, compute_random_,
      ComputeSettings{.keepalive_interval = config_.compute.keepalive_interval,
                      .keepalive_timeout = config_.compute.keepalive_timeout,
                      .dispatch_timeout = config_.compute.dispatch_timeout,
                      .member_wait = config_.compute.member_wait});

  worker_fleet_ = std::make_unique<WorkerFleet>(
      *store_, clock_,
      WorkerFleetSettings{.heartbeat_interval = config_.worker.heartbeat_interval,
                          .lease_ttl = config_.worker.lease_ttl,
                          .max_lease_ttl = config_.worker.max_lease_ttl,
                          .call_token_ttl = config_.worker.call_token_ttl},
      config_.worker.auth);
  worker_admin_ = std::make_unique<WorkerAdminImpl>(*worker_fleet_);

  if (auto st = StartGrpc(); !st) return st;

  tokens_ = std::make_unique<JoinTokenIssuer>(
      *store_, *token_key_, clock_,
      JoinTokenSettings{.issuer = config_.tokens.issuer,
                        .endpoint = info_.advertise,
                        .ca_pin = info_.ca_pin,
                        .default_ttl = config_.tokens.default_ttl});
  edge_fleet_ = std::make_unique<EdgeFleet>(*store_, *tokens_, *dispatcher_, clock_,
                                            LimitsFromConfig(config_.edge_api));
  session_timers_ = std::make_unique<TimerQueue>(clock_);
  sessions_ = std::make_unique<SessionManager>(
      *store_, *edge_fleet_, clock_, *session_timers_,
      SessionSettings{
          .denied_tools = {config_.http.denied_tools.begin(), config_.http.denied_tools.end()},
          .node_stale = std::chrono::seconds(config_.cluster.stale_threshold_secs)});
  sessions_->Start(*dispatcher_);
  edge_fleet_->SetLimitsListener([this](const std::string& node_id, int64_t version) {
    sessions_->OnLimitsChanged(node_id, version);
  });
  admin_service_ =
      std::make_unique<AdminServiceImpl>(info_, *edge_fleet_, *dispatcher_, *user_tokens_);
  fleet_commands_ = std::make_unique<FleetCommands>(*store_, *edge_fleet_, *dispatcher_, clock_);
  fleet_admin_ = std::make_unique<FleetAdminImpl>(*edge_fleet_, *fleet_commands_, *dispatcher_);
  // The admin API carries a whole InvokeTool's args in, and a whole result out.
  const size_t admin_max = static_cast<size_t>(config_.grpc.max_message_bytes) + (1u << 20);
  compute_admin_ = std::make_unique<ComputeAdminImpl>(*compute_tokens_, *compute_hub_);
  if (auto st = admin_server_.Start(
          config_.admin.socket,
          {admin_service_.get(), compute_admin_.get(), worker_admin_.get(), fleet_admin_.get()},
          admin_max);
      !st) {
    Stop();
    return st;
  }
  if (auto st = StartHttp(); !st) {
    Stop();
    return st;
  }
  monitor_->Start();
  compute_hub_->Start();
  log->info("CA {} ; join tokens point agents at {}", info_.ca_pin, info_.advertise);
  return OkStatus();
}

Status Controller::StartGrpc() {
  auto server_cert = LoadOrIssueServerCert(*ca_, config_.data_dir + "/ca",
                                           config_.grpc.server_names, clock_.Now());
  if (!server_cert) return std::unexpected(server_cert.error());
  const auto& limits = config_.limits;
  refusals_ = std::make_unique<RefusalLog>(
      clock_, static_cast<size_t>(limits.refusal_log_lines_per_minute));
  bootstrap_ = std::make_unique<BootstrapServiceImpl>(
      *store_, *ca_, clock_,
      BootstrapLimits{
          .per_minute = static_cast<double>(limits.exchange_per_minute),
          .burst = static_cast<double>(limits.exchange_burst),
          .log_lines_per_minute = static_cast<size_t>(limits.refusal_log_lines_per_minute)});
  stream_timers_ = std::make_unique<TimerQueue>(clock_);
  node_cluster_ = std::make_unique<NodeClusterServiceImpl>(
      *attestation_, *store_, *node_tokens_, *dispatcher_, clock_, refusals_.get(),
      stream_timers_.get(), config_.cluster.output_stall_limit);
  unauthenticated_ = std::make_unique<UnauthenticatedCalls>(
      CallLimitSettings{.max_calls = static_cast<size_t>(limits.unauthenticated_calls),
                        .max_per_peer = static_cast<size_t>(limits.unauthenticated_calls_per_peer)},
      *refusals_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<ReflectionOption>(config_.grpc.reflection));
  builder.AddListeningPort(
      config_.grpc.listen,
      ControllerServerCredentials(ca_->cert_pem(), server_cert->cert_pem + ca_->cert_pem(),
                                  server_cert->key_pem),
      &grpc_port_);
  // One limit both ways: a node's CommandResult may be as large as an InvokeTool may be.
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.grpc.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config_.grpc.max_message_bytes));
  // TLS records of at most 4 KiB from the controller (issue 14, fleet memory): gRPC 1.51 keeps
  // one output frame buffer of this size per connection (16 KiB by default), and what the
  // controller sends a node is mostly small (commands, config, acks). Measured with
  // fleet_bench at 1 000 nodes: RSS 172.9 -> 164.4 MiB. The cost: bulk traffic from the
  // controller (a large InvokeTool, a fleet's copies of it, compute events relayed to a
  // member) takes 4x the records of 16 KiB ones. The node's direction (its output streams)
  // keeps its own, larger records.
  builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE, kControllerTlsFrameBytes);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<CallLimitInterceptorFactory>(*unauthenticated_));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  builder.RegisterService(bootstrap_.get());
  builder.RegisterService(node_cluster_.get());
  compute_service_ = std::make_unique<ComputeServiceImpl>(
      ComputeStreamDeps{*compute_tokens_, *compute_hub_, refusals_.get()});
  builder.RegisterService(compute_service_.get());
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || grpc_port_ == 0) {
    grpc_server_.reset();
    return MakeError(ErrorCode::kUnavailable,
                     "grpc.listen: cannot listen on \"" + config_.grpc.listen + "\"");
  }
  grpc_server_->GetHealthCheckService()->SetServingStatus(true);
  info_.grpc_listen = ReplacePort(config_.grpc.listen, grpc_port_);
  info_.advertise = config_.grpc.advertise;
  if (info_.advertise.ends_with(":0")) info_.advertise = ReplacePort(info_.advertise, grpc_port_);
  log::Get("controller")->info("gRPC (TLS) listening on {}", info_.grpc_listen);
  return OkStatus();
}

Status Controller::StartHttp() {
  if (config_.http.listen.empty()) return OkStatus();
  auto log = log::Get("controller");
  worker_auth_.reset(new identity::WorkerAuthenticator(
      identity::WorkerAuthenticator::ForControlPlane(config_.worker.auth, clock_)));
  if (!worker_auth_->configured()) {
    log->warn(
        "http.listen is set but worker.auth has no credential: every worker heartbeat "
        "and lease renewal will be refused (401)");
  }
  worker_api_ = std::make_unique<WorkerControlPlaneApi>(*worker_fleet_, *worker_auth_);
  worker_api_->Register(router_);
  operator_api_ = std::make_unique<OperatorApi>(
      *edge_fleet_, *user_tokens_, clock_,
      OperatorApiSettings{
          .stale_threshold = std::chrono::seconds(config_.cluster.stale_threshold_secs),
          .allowed_origins = config_.http.allowed_origins});
  operator_api_->AttachSessions(sessions_.get());
  operator_api_->Register(router_);
  fleet_api_ = std::make_unique<FleetApi>(
      *fleet_commands_, *user_tokens_,
      FleetApiSettings{
          .denied_tools = {config_.http.denied_tools.begin(), config_.http.denied_tools.end()}});
  fleet_api_->Register(router_);
  UiAssets::Register(router_);  // the fleet page at /ui/
  http::ServerOptions o;
  o.name = "controller-http";
  o.max_body_bytes = config_.http.max_body_bytes;
  const auto& tls = config_.http.tls;
  if (tls.enabled) {
    // Without files of its own, the controller's CA-issued server certificate (agents that
    // enrolled trust that CA already).
    o.tls = http::TlsFiles{
        .cert_file = tls.cert_file.empty() ? config_.data_dir + "/ca/server.crt" : tls.cert_file,
        .key_file = tls.key_file.empty() ? config_.data_dir + "/ca/server.key" : tls.key_file,
        .client_ca_file = tls.client_ca_file};
  }
  http_server_ = std::make_unique<http::Server>(http_io_, std::move(o), router_);
  if (auto st = http_server_->Listen(config_.http.listen); !st) {
    http_server_.reset();
    return MakeError(st.error().code, "http.listen: " + st.error().message);
  }
  http_port_ = http_server_->port();
  for (int i = 0; i < 2; ++i) {
    http_threads_.emplace_back([this] {
      NameThisThread("ctl-http");
      auto guard = boost::asio::make_work_guard(http_io_);
      http_io_.run();
    });
  }
  log->info(
      "HTTP on {} (port {}{}): worker control-plane endpoints, operator API ({} trusted "
      "issuer(s) besides {})",
      config_.http.listen, http_port_, tls.enabled ? ", TLS" : "",
      config_.http.trusted_issuers.size(), config_.tokens.issuer);
  return OkStatus();
}

void Controller::Reload() {
  if (!http_server_) return;
  if (auto st = http_server_->ReloadTls(); !st) {
    log::Get("controller")
        ->error("HTTP certificates not reloaded (keeping the old ones): {}", st.error().message);
  } else if (config_.http.tls.enabled) {
    log::Get("controller")->info("HTTP certificates reloaded");
  }
}

void Controller::StopHttp() {
  if (http_server_) http_server_->Stop();
  http_io_.stop();
  for (auto& t : http_threads_)
    if (t.joinable()) t.join();
  http_threads_.clear();
  http_server_.reset();
}

void Controller::Stop() {
  StopHttp();
  if (sessions_) sessions_->Stop();
  if (monitor_) monitor_->Stop();
  if (compute_hub_) {
    // Before the admin socket: a dispatch in flight is answered before its server goes.
    compute_hub_->Stop();
    compute_hub_->CloseAll(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the controller is stopping"));
  }
  admin_server_.Stop();
  if (dispatcher_) {
    dispatcher_->CloseAll(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the controller is stopping"));
  }
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc_server_->Wait();
    grpc_server_.reset();
    log::Get("controller")->info("gRPC server stopped");
  }
  // The commands the admin server queued are stored and sent (or refused), and the results
  // the streams queued are stored and their observers told, while those still exist (they go
  // before the dispatcher).
  if (dispatcher_) dispatcher_->StopQueues();
  if (session_timers_) session_timers_->Stop();
}

}  // namespace edge::controller
