#include <sys/stat.h>

// edge-agent: the node daemon and its command line (design.md §5a).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/bootstrap/node_enrollment.h"
#include "agent/daemon/agent_daemon.h"
#include "agent/daemon/compute_service.h"
#include "agent/daemon/edge_service.h"
#include "agent/daemon/executor_host.h"
#include "agent/daemon/memory_trim.h"
#include "agent/daemon/status_file.h"
#include "agent/daemon/worker_rpc_service.h"
#include "agent/edge/key_rotation.h"
#include "agent/identity/keystore_files.h"
#include "agent/worker_rpc/token_commands.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/grpc_lifetime.h"
#include "common/malloc_tuning.h"
#include "common/random.h"
#include "common/signals.h"
#include "common/stop.h"
#include "config/agent_config.h"
#include "config/join_token_remover.h"
#include "config/production_check.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.0.0-dev"
#endif

namespace {

using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;

std::optional<edge::config::AgentConfig> LoadConfig(const edge::cli::GlobalOptions& opts) {
  return edge::cli::LoadConfigOrReport(opts, edge::config::LoadAgentConfig);
}

// Enrolls the node (agent/bootstrap/node_enrollment.h). The termination signals must be
// blocked already: one arriving now ends the enrollment's waits at once. Logs a failure and
// returns the exit code; `*stopped` says whether a signal came.
int EnrollNode(const edge::config::AgentConfig& cfg,
               const edge::bootstrap::NodeEnrollmentRequest& request, std::string* stopped) {
  edge::StopSource stop;
  auto calls = edge::bootstrap::ControllerEnrollmentCalls();
  edge::DefaultRandom random;
  edge::bootstrap::EnrollmentResult r;
  {
    edge::TerminationSignalStop watcher(stop);
    edge::bootstrap::NodeEnrollment enrollment(cfg, *calls, edge::SystemClock::Instance(), random,
                                               stop);
    r = enrollment.Run(request);
  }
  *stopped = stop.StopReason();
  if (r) return kExitOk;
  edge::log::Get("enroll")->error("{}", r.error().error.message);
  return r.error().usage ? kExitUsage : kExitFailure;
}

int Enroll(const edge::cli::GlobalOptions& opts, const std::string& token,
           const std::string& node_id) {
  // Before any thread starts: SIGINT/SIGTERM then end the enrollment's waits (EnrollNode).
  edge::BlockTerminationSignals();
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  const bool from_cli = !token.empty();
  if (!from_cli && cfg->controller.join_token.empty()) {
    edge::log::Get("enroll")->error(
        "no join token: pass --token or set controller.join_token in {}", opts.config_path);
    return kExitUsage;
  }
  // A token from a *_file is not removed from the config (the file is the operator's).
  const bool inline_token = !from_cli && cfg->controller.join_token_file.empty();
  std::string stopped;
  return EnrollNode(*cfg,
                    {.token = from_cli ? token : cfg->controller.join_token,
                     .node_id = node_id.empty() ? cfg->node_id : node_id,
                     .config_path = inline_token ? opts.config_path : "",
                     .from_cli = from_cli,
                     .attest = true},
                    &stopped);
}

// `listen`: the worker RPC address from `--listen` (else worker.listen_addr; none = no door).
int Run(const edge::cli::GlobalOptions& opts, const std::string& listen) {
  edge::daemon::LimitMallocArenas();  // before any thread (agent/daemon/memory_trim.h)
  edge::KeepMessageBuffersMapped();   // (common/malloc_tuning.h)
  edge::BlockTerminationSignals();
  // No CallbackQueuePin (common/grpc_lifetime.h): the agent makes no callback-API call (its
  // streams run on ClientCallQueues, its unary calls are blocking), so gRPC's callback queue and
  // its two polling `nexting_thread`s never exist in it. A callback-API call added to the agent
  // must bring the pin back, before any gRPC object.
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto log = edge::log::Get("daemon");
  if (!edge::identity::KeystoreFiles::Exists(cfg->data_dir)) {
    if (!cfg->controller.join_token.empty()) {
      // The first edge attestation is the edge session's first step.
      std::string stopped;
      int rc = EnrollNode(
          *cfg,
          {.token = cfg->controller.join_token,
           .node_id = cfg->node_id,
           .config_path = cfg->controller.join_token_file.empty() ? opts.config_path : "",
           .from_cli = false,
           .attest = false},
          &stopped);
      if (!stopped.empty()) {
        log->info("stopping: {} during enrollment", stopped);
        return kExitOk;
      }
      if (rc != kExitOk) return rc;
    } else {
      log->warn(
          "not enrolled: no keystore in {}/certs and no join token configured; running without "
          "a controller link",
          cfg->data_dir);
    }
  } else if (!cfg->controller.join_token.empty() && cfg->controller.join_token_file.empty()) {
    // Enrolled, and yet the config holds a token: an agent killed after it stored its
    // keystore and before it removed the token, or one written there since. Either is of no
    // use to an enrolled node (the first is spent), and a token does not stay on disk.
    auto removed = edge::config::JoinTokenRemover::RemoveJoinToken(opts.config_path,
                                                                   cfg->controller.join_token);
    if (!removed) {
      log->warn("already enrolled, but the join token left in {} could not be removed: {}",
                opts.config_path, removed.error().message);
    } else if (*removed) {
      log->warn(
          "already enrolled (keystore in {}/certs): removed the join token left in {}; it is "
          "not used (to enroll again, remove {}/certs first)",
          cfg->data_dir, opts.config_path, cfg->data_dir);
    }
  }
  for (const auto& f : edge::config::ProductionFindings(*cfg)) {
    log->warn("INSECURE: {}: {}", f.key, f.message);
  }
  edge::Clock& clock = edge::SystemClock::Instance();
  edge::daemon::DaemonOptions daemon_options{.version = EDGE_VERSION};
  // SIGHUP (systemctl reload): the same file and environment again.
  daemon_options.load_config = [&opts]() -> edge::Result<edge::config::AgentConfig> {
    auto c = edge::config::LoadAgentConfig(opts.config_path, edge::cli::GetEnv);
    if (!c) return edge::MakeError(edge::ErrorCode::kInvalidArgument, c.error().ToString());
    return std::move(*c);
  };
  daemon_options.apply_log = [&opts](const edge::config::LogConfig& l) -> edge::Status {
    if (!edge::cli::InitLogging(opts, l.level, l.format)) {
      return edge::MakeError(edge::ErrorCode::kInvalidArgument, "bad log.level or log.format");
    }
    return edge::OkStatus();
  };
  edge::daemon::AgentDaemon daemon(*cfg, std::move(daemon_options), clock);
  auto host = std::make_unique<edge::daemon::ExecutorHost>(
      *cfg, EDGE_VERSION, clock,
      edge::daemon::ExecutorHost::Options{.threads = static_cast<size_t>(cfg->sandbox.io_threads)});
  edge::daemon::ExecutorHost& executor = *host;
  daemon.services().Add(std::move(host));
  if (!cfg->edge.enabled) {
    log->info("edge stream disabled (edge.enabled: false)");
  } else if (edge::identity::KeystoreFiles::Exists(cfg->data_dir)) {
    daemon.services().Add(std::make_unique<edge::daemon::EdgeService>(
        *cfg, EDGE_VERSION, executor, clock,
        [&daemon](const std::string& reason) { daemon.RequestExit(reason); }));
  }
  if (cfg->compute.enabled) {
    daemon.services().Add(std::make_unique<edge::daemon::ComputeService>(*cfg, executor, clock));
  }
  // The worker RPC door needs no enrollment: it runs with or without the controller link.
  const std::string listen_addr = listen.empty() ? cfg->worker.listen_addr : listen;
  if (!listen_addr.empty()) {
    daemon.services().Add(
        std::make_unique<edge::daemon::WorkerRpcService>(*cfg, listen_addr, executor, clock));
  }
  return daemon.Run();
}

// `edge-agent rotate-key` (agent/edge/key_rotation.h).
int RotateKey(const edge::cli::GlobalOptions& opts) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto rotated = edge::agentedge::KeyRotation(*cfg, edge::SystemClock::Instance()).Run();
  if (!rotated) {
    std::fprintf(stderr, "error: rotate-key: %s\n", rotated.error().message.c_str());
    return kExitFailure;
  }
  std::printf("rotated the node key of %s: new public key %s; old key archived as %s\n",
              cfg->node_id.c_str(), rotated->public_key_hex.c_str(), rotated->archive_path.c_str());
  edge::log::Get("edge")->info(
      "node key rotated (old key in {}); a running agent switches at its next heartbeat",
      rotated->archive_path);
  return kExitOk;
}

int StatusCmd(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  auto status = edge::daemon::ReadStatusFile(cfg->data_dir);
  if (!status) {
    std::fprintf(stderr, "error: the agent is not running (%s)\n", status.error().message.c_str());
    return kExitFailure;
  }
  std::string why;
  bool healthy = edge::daemon::IsHealthy(*status, edge::SystemClock::Instance().Now(), &why);
  if (format == "json") {
    nlohmann::json services = nlohmann::json::array();
    for (const auto& s : status->services) {
      services.push_back({{"name", s.name},
                          {"state", std::string(edge::daemon::ServiceStateName(s.state))},
                          {"error", s.error},
                          {"details", s.details}});
    }
    nlohmann::json j = {{"healthy", healthy},         {"reason", why},
                        {"pid", status->pid},         {"version", status->version},
                        {"node_id", status->node_id}, {"state", status->state},
                        {"services", services}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "status:   " << (healthy ? "healthy" : "unhealthy: " + why) << "\n"
              << "node id:  " << status->node_id << "\n"
              << "pid:      " << status->pid << "\n"
              << "version:  " << status->version << "\n"
              << "state:    " << status->state << "\n";
    for (const auto& s : status->services) {
      std::cout << "service:  " << s.name << " " << edge::daemon::ServiceStateName(s.state)
                << (s.error.empty() ? "" : " (" + s.error + ")") << "\n";
      for (const auto& [k, v] : s.details) {
        if (!v.empty()) std::cout << "  " << s.name << "." << k << ": " << v << "\n";
      }
    }
  }
  return healthy ? kExitOk : kExitFailure;
}

int ConfigCheck(const edge::cli::GlobalOptions& opts, bool production) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  std::cout << edge::config::DumpRedacted(*cfg);
  if (!production) return kExitOk;
  const auto findings = edge::config::ProductionFindings(*cfg);
  for (const auto& f : findings)
    std::cerr << "config check --production: " << f.key << ": " << f.message << "\n";
  return findings.empty() ? kExitOk : kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Destroyed last: gRPC has finished shutting down before the process exits.
  edge::GrpcShutdownAtExit grpc_shutdown_at_exit;
  // Never inherit the caller's umask (a 000 made workspaces world-writable): files the agent
  // or its tools create get no world access unless a mode says so explicitly.
  ::umask(027);
  edge::IgnoreFatalIoSignals();
  CLI::App app{
      "edge-agent: enrolls with a controller, keeps its streams alive and runs work "
      "through one local executor",
      "edge-agent"};
  app.set_version_flag("-V,--version", EDGE_VERSION);
  app.require_subcommand(0, 1);
  edge::cli::GlobalOptions opts;
  edge::cli::AddGlobalOptions(app, opts, "/etc/edge-agent/agent.yaml");
  std::string listen;
  app.add_option("--listen", listen,
                 "serve worker RPC (POST /rpc, GET /health) on host:port; without a command "
                 "this runs the daemon (`run` plus this address; overrides worker.listen_addr)");

  auto* run = app.add_subcommand("run", "run the daemon");
  std::string status_format;
  auto* status =
      app.add_subcommand("status", "report whether the local agent is running and healthy");
  edge::cli::AddFormatOption(status, status_format);
  auto* config = app.add_subcommand("config", "configuration commands");
  config->require_subcommand(1);
  auto* check = config->add_subcommand(
      "check",
      "validate the config; print it with secrets redacted (exit 0) or the errors (exit 2)");
  bool production = false;
  check->add_flag("--production", production,
                  "also fail (exit 2) on settings unsafe on a fleet host: no security contexts "
                  "(implicit allow-all), no user token issuers (commands' user tokens unverified)");
  std::string enroll_token, enroll_node;
  auto* enroll = app.add_subcommand(
      "enroll", "redeem a join token for this node's keystore (certs/ under data_dir)");
  enroll->add_option("--token", enroll_token,
                     "join token (default: controller.join_token; a token given here is never "
                     "written anywhere)");
  enroll->add_option("--node-id", enroll_node, "node id to enroll as (default: node_id)");
  auto* rotate = app.add_subcommand(
      "rotate-key",
      "replace the node's Ed25519 key (RotateEdgeKey with old and new signatures); the old key "
      "is archived under keys/archive/ and a running agent switches at its next heartbeat");
  auto* version = app.add_subcommand("version", "print the version");
  // Command groups in files of their own (common/cli.h CommandRunner).
  std::vector<edge::cli::CommandRunner> groups;
  groups.push_back(edge::workerrpc::AddTokenCommands(app, opts));

  if (int rc = edge::cli::Parse(app, argc, argv); rc >= 0) return rc;
  if (*version) {
    std::cout << "edge-agent " << EDGE_VERSION << "\n";
    return kExitOk;
  }
  if (!*run && !*enroll && !*rotate && !edge::cli::InitLogging(opts, "warn")) return kExitUsage;
  if (!listen.empty() && !edge::config::IsHostPort(listen, true)) {
    std::fprintf(stderr, "error: --listen %s: must be host:port (e.g. 127.0.0.1:7430)\n",
                 listen.c_str());
    return kExitUsage;
  }
  if (*run) return Run(opts, listen);
  if (app.get_subcommands().empty()) {
    if (!listen.empty()) return Run(opts, listen);
    std::fprintf(stderr, "error: a command is required\nRun 'edge-agent --help' for usage.\n");
    return kExitUsage;
  }
  if (*status) return StatusCmd(opts, status_format);
  if (*check) return ConfigCheck(opts, production);
  if (*enroll) return Enroll(opts, enroll_token, enroll_node);
  if (*rotate) return RotateKey(opts);
  for (const auto& group : groups) {
    if (auto rc = group()) return *rc;
  }
  return kExitUsage;
}
