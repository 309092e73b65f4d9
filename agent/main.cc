// edge-agent: the node daemon and its command line (design.md §5a).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/bootstrap/join_token_redeemer.h"
#include "agent/daemon/agent_daemon.h"
#include "agent/daemon/status_file.h"
#include "agent/identity/keystore_files.h"
#include "common/backoff.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/signals.h"
#include "config/agent_config.h"

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

// Redeems `token` (from the command line when `config_path` is empty, else from that file).
int DoEnroll(const edge::config::AgentConfig& cfg, const std::string& token,
             const std::string& node_id, const std::string& config_path) {
  edge::DefaultRandom random;
  edge::FullJitterBackoff backoff(std::chrono::seconds(1), std::chrono::seconds(30), random);
  edge::bootstrap::JoinTokenRedeemer redeemer(
      backoff, [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); });
  auto r = redeemer.Enroll({.join_token = token,
                            .node_id = node_id,
                            .data_dir = cfg.data_dir,
                            .controller_address = cfg.controller.address,
                            .ca_pin = cfg.controller.ca_pin,
                            .config_path = config_path});
  if (!r) {
    edge::log::Get("enroll")->error("enrollment failed: {}", r.error().message);
    return r.error().code == edge::ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  return kExitOk;
}

int Enroll(const edge::cli::GlobalOptions& opts, const std::string& token,
           const std::string& node_id) {
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
  return DoEnroll(*cfg, from_cli ? token : cfg->controller.join_token,
                  node_id.empty() ? cfg->node_id : node_id, inline_token ? opts.config_path : "");
}

int Run(const edge::cli::GlobalOptions& opts) {
  edge::BlockTerminationSignals();
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  if (!edge::identity::KeystoreFiles::Exists(cfg->data_dir)) {
    if (!cfg->controller.join_token.empty()) {
      if (int rc = DoEnroll(*cfg, cfg->controller.join_token, cfg->node_id,
                            cfg->controller.join_token_file.empty() ? opts.config_path : "");
          rc != kExitOk) {
        return rc;
      }
    } else {
      edge::log::Get("daemon")->warn(
          "not enrolled: no keystore in {}/certs and no join token configured; running without "
          "a controller link",
          cfg->data_dir);
    }
  }
  edge::daemon::AgentDaemon daemon(*cfg, {.version = EDGE_VERSION}, edge::SystemClock::Instance());
  return daemon.Run();
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
                          {"error", s.error}});
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
    }
  }
  return healthy ? kExitOk : kExitFailure;
}

int ConfigCheck(const edge::cli::GlobalOptions& opts) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  std::cout << edge::config::DumpRedacted(*cfg);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  edge::IgnoreFatalIoSignals();
  CLI::App app{
      "edge-agent: enrolls with a controller, keeps its streams alive and runs work "
      "through one local executor",
      "edge-agent"};
  app.set_version_flag("-V,--version", EDGE_VERSION);
  app.require_subcommand(1);
  edge::cli::GlobalOptions opts;
  edge::cli::AddGlobalOptions(app, opts, "/etc/edge-agent/agent.yaml");

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
  std::string enroll_token, enroll_node;
  auto* enroll = app.add_subcommand(
      "enroll", "redeem a join token for this node's keystore (certs/ under data_dir)");
  enroll->add_option("--token", enroll_token,
                     "join token (default: controller.join_token; a token given here is never "
                     "written anywhere)");
  enroll->add_option("--node-id", enroll_node, "node id to enroll as (default: node_id)");
  auto* version = app.add_subcommand("version", "print the version");

  if (int rc = edge::cli::Parse(app, argc, argv); rc >= 0) return rc;
  if (*version) {
    std::cout << "edge-agent " << EDGE_VERSION << "\n";
    return kExitOk;
  }
  if (!*run && !*enroll && !edge::cli::InitLogging(opts, "warn")) return kExitUsage;
  if (*run) return Run(opts);
  if (*status) return StatusCmd(opts, status_format);
  if (*check) return ConfigCheck(opts);
  if (*enroll) return Enroll(opts, enroll_token, enroll_node);
  return kExitUsage;
}
