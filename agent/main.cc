#include <sys/stat.h>

// edge-agent: the node daemon and its command line (design.md §5a).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/bootstrap/join_token_redeemer.h"
#include "agent/daemon/agent_daemon.h"
#include "agent/daemon/edge_service.h"
#include "agent/daemon/executor_host.h"
#include "agent/daemon/status_file.h"
#include "agent/edge/enrollment_files.h"
#include "agent/edge/node_attestor.h"
#include "agent/edge/node_key_store.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/encoding.h"
#include "agent/identity/keystore_files.h"
#include "common/backoff.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/signals.h"
#include "config/agent_config.h"
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

// The first edge attestation of a freshly enrolled node (brief B): AttestNode → ChallengeNode
// with the join token as bootstrap proof, so that `enroll` completes the edge enrollment.
// `cli_token` is a token given with --token (never stored); otherwise the proof comes from
// certs/join_token.pending. Transient failures are retried a few times; if the controller
// stays unreachable, a pending file is left for `run` to finish (exit 0), while a --token
// enrollment cannot be finished later (exit 1). Other failures are reported (exit 1).
int FirstAttestation(const edge::config::AgentConfig& cfg, const std::string& address,
                     const std::string& cli_token) {
  auto log = edge::log::Get("enroll");
  auto identity = edge::identity::KeystoreFiles::Load(cfg.data_dir);
  if (!identity) {
    log->error("edge enrollment: cannot load the keystore: {}", identity.error().message);
    return kExitFailure;
  }
  edge::agentedge::NodeKeyStore keys(cfg.data_dir);
  auto key = keys.LoadOrCreate();
  if (!key) {
    log->error("edge enrollment: node key {}: {}", keys.KeyPath(), key.error().message);
    return kExitFailure;
  }
  edge::agentedge::NodeAttestor attestor(edge::identity::ChannelFactory(*identity).Mtls(address),
                                         cfg.node_id, cfg.data_dir, edge::SystemClock::Instance());
  edge::DefaultRandom random;
  edge::FullJitterBackoff backoff(std::chrono::seconds(1), std::chrono::seconds(10), random);
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto token = attestor.Attest(*key, cli_token);
    if (token) {
      log->info("edge enrollment complete: node {} attested with {} (tenant {})", cfg.node_id,
                address, token->tenant_id);
      return kExitOk;
    }
    if (token.error().code != edge::ErrorCode::kUnavailable) {
      log->error("edge enrollment failed: {}", token.error().message);
      return kExitFailure;
    }
    if (attempt < kAttempts) {
      auto delay = backoff.Next();
      log->warn("edge enrollment: {}; retrying in {} ms", token.error().message, delay.count());
      std::this_thread::sleep_for(delay);
      continue;
    }
    if (!cli_token.empty()) {
      log->error(
          "edge enrollment failed: {} — the keystore is stored, but a token given with --token "
          "is never written, so the first attestation cannot be finished later; ask the "
          "operator for a new token",
          token.error().message);
      return kExitFailure;
    }
    log->warn(
        "edge enrollment not finished: {}; the join token stays in {} and `edge-agent run` "
        "finishes the enrollment",
        token.error().message, edge::agentedge::EnrollmentFiles::PendingTokenPath(cfg.data_dir));
    return kExitOk;
  }
}

// Redeems `token` (from the command line when `from_cli`, else from the config; `config_path`
// is the file to remove it from, empty when it must stay). With edge.enabled the token is
// first kept in certs/join_token.pending (not for a --token token), and with `attest` the
// first edge attestation runs here too.
int DoEnroll(const edge::config::AgentConfig& cfg, const std::string& token,
             const std::string& node_id, const std::string& config_path, bool from_cli,
             bool attest) {
  auto log = edge::log::Get("enroll");
  const std::string& data_dir = cfg.data_dir;
  // Written BEFORE the redeemer removes the token line from the config: the first
  // ChallengeNode needs it as proof. Only for a node that is not enrolled yet.
  bool wrote_pending = false;
  if (cfg.edge.enabled && !from_cli && !edge::identity::KeystoreFiles::Exists(data_dir)) {
    // The same local check the redeemer makes, first: nothing is written to a data_dir
    // that cannot take the keystore.
    if (auto st = edge::identity::KeystoreFiles::CheckWritable(data_dir); !st) {
      log->error("enrollment failed: data_dir is not writable: {}", st.error().message);
      return kExitFailure;
    }
    if (auto st = edge::agentedge::EnrollmentFiles::WritePendingToken(data_dir, token); !st) {
      log->error("enrollment failed: {}", st.error().message);
      return kExitFailure;
    }
    wrote_pending = true;
  }
  edge::DefaultRandom random;
  edge::FullJitterBackoff backoff(std::chrono::seconds(1), std::chrono::seconds(30), random);
  edge::bootstrap::JoinTokenRedeemer redeemer(
      backoff, [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); });
  auto r = redeemer.Enroll({.join_token = token,
                            .node_id = node_id,
                            .data_dir = data_dir,
                            .controller_address = cfg.controller.address,
                            .ca_pin = cfg.controller.ca_pin,
                            .config_path = config_path});
  if (!r) {
    if (wrote_pending) (void)edge::agentedge::EnrollmentFiles::RemovePendingToken(data_dir);
    log->error("enrollment failed: {}", r.error().message);
    return r.error().code == edge::ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  if (auto st =
          edge::agentedge::EnrollmentFiles::WriteControllerAddress(data_dir, r->controller_address);
      !st) {
    log->warn("enrolled, but the controller address could not be recorded: {}", st.error().message);
  }
  if (!cfg.edge.enabled) return kExitOk;
  // The node key is created at enrollment.
  edge::agentedge::NodeKeyStore keys(data_dir);
  bool created = false;
  if (auto key = keys.LoadOrCreate(&created); !key) {
    log->error("enrolled, but the node key {} could not be created: {}", keys.KeyPath(),
               key.error().message);
    return kExitFailure;
  }
  if (created) log->info("created the node key {}", keys.KeyPath());
  if (!attest) return kExitOk;
  edge::config::AgentConfig enrolled = cfg;
  enrolled.node_id = node_id;
  return FirstAttestation(enrolled, r->controller_address, from_cli ? token : "");
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
                  node_id.empty() ? cfg->node_id : node_id, inline_token ? opts.config_path : "",
                  from_cli, /*attest=*/true);
}

int Run(const edge::cli::GlobalOptions& opts) {
  edge::BlockTerminationSignals();
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto log = edge::log::Get("daemon");
  if (!edge::identity::KeystoreFiles::Exists(cfg->data_dir)) {
    if (!cfg->controller.join_token.empty()) {
      // The first edge attestation is the edge session's first step.
      if (int rc = DoEnroll(*cfg, cfg->controller.join_token, cfg->node_id,
                            cfg->controller.join_token_file.empty() ? opts.config_path : "",
                            /*from_cli=*/false, /*attest=*/false);
          rc != kExitOk) {
        return rc;
      }
    } else {
      log->warn(
          "not enrolled: no keystore in {}/certs and no join token configured; running without "
          "a controller link",
          cfg->data_dir);
    }
  }
  for (const auto& f : edge::config::ProductionFindings(*cfg)) {
    log->warn("INSECURE: {}: {}", f.key, f.message);
  }
  edge::Clock& clock = edge::SystemClock::Instance();
  edge::daemon::AgentDaemon daemon(*cfg, {.version = EDGE_VERSION}, clock);
  auto host = std::make_unique<edge::daemon::ExecutorHost>(*cfg, EDGE_VERSION, clock);
  edge::daemon::ExecutorHost& executor = *host;
  daemon.services().Add(std::move(host));
  if (!cfg->edge.enabled) {
    log->info("edge stream disabled (edge.enabled: false)");
  } else if (edge::identity::KeystoreFiles::Exists(cfg->data_dir)) {
    daemon.services().Add(std::make_unique<edge::daemon::EdgeService>(
        *cfg, EDGE_VERSION, executor, clock,
        [&daemon](const std::string& reason) { daemon.RequestExit(reason); }));
  }
  return daemon.Run();
}

// `edge-agent rotate-key`: a new node key, RotateEdgeKey with the dual signature (old key
// proves authority, new key proves possession); on success the new key replaces
// keys/node.ed25519 and the old one moves to keys/archive/node.ed25519.<unix-time>. A running
// daemon picks the new key up at its next heartbeat (or reconnect) and re-attests with it.
int RotateKey(const edge::cli::GlobalOptions& opts) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "error: rotate-key: %s\n", what.c_str());
    return kExitFailure;
  };
  auto identity = edge::identity::KeystoreFiles::Load(cfg->data_dir);
  if (!identity) {
    return fail("not enrolled (" + identity.error().message + "): run `edge-agent enroll` first");
  }
  auto address = edge::agentedge::EnrollmentFiles::ResolveControllerAddress(*cfg);
  if (!address) return fail(address.error().message);
  edge::agentedge::NodeKeyStore keys(cfg->data_dir);
  auto old_key = keys.Load();
  if (!old_key) {
    return fail("no node key to rotate at " + keys.KeyPath() + " (" + old_key.error().message +
                "): the key is created at enrollment");
  }
  edge::Clock& clock = edge::SystemClock::Instance();
  edge::agentedge::NodeAttestor attestor(edge::identity::ChannelFactory(*identity).Mtls(*address),
                                         cfg->node_id, cfg->data_dir, clock);
  // A token proves the old key's authority in the request's outer envelope.
  auto token = attestor.Attest(*old_key);
  if (!token) return fail("attestation with the current key failed: " + token.error().message);
  auto new_key = edge::identity::NodeKey::Generate();
  if (!new_key) return fail(new_key.error().message);
  // Staged first: if this process dies after the controller accepted it, the key survives.
  if (auto st = keys.Stage(*new_key); !st) return fail(st.error().message);
  auto rotated = attestor.Rotate(*old_key, *new_key, *token);
  if (!rotated) {
    keys.DiscardStaged();
    return fail("the controller refused the rotation: " + rotated.error().message +
                "; the current key stays in use");
  }
  auto archive = keys.Install(*new_key, clock.Now());
  if (!archive) {
    return fail("the controller accepted the new key but it could not be installed (" +
                archive.error().message + "); it is in " + keys.StagedPath() + ": move it to " +
                keys.KeyPath());
  }
  std::printf("rotated the node key of %s: new public key %s; old key archived as %s\n",
              cfg->node_id.c_str(), edge::identity::HexEncode(new_key->public_key()).c_str(),
              archive->c_str());
  edge::log::Get("edge")->info(
      "node key rotated (old key in {}); a running agent switches at its next heartbeat", *archive);
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
  // Never inherit the caller's umask (a 000 made workspaces world-writable): files the agent
  // or its tools create get no world access unless a mode says so explicitly.
  ::umask(027);
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

  if (int rc = edge::cli::Parse(app, argc, argv); rc >= 0) return rc;
  if (*version) {
    std::cout << "edge-agent " << EDGE_VERSION << "\n";
    return kExitOk;
  }
  if (!*run && !*enroll && !*rotate && !edge::cli::InitLogging(opts, "warn")) return kExitUsage;
  if (*run) return Run(opts);
  if (*status) return StatusCmd(opts, status_format);
  if (*check) return ConfigCheck(opts, production);
  if (*enroll) return Enroll(opts, enroll_token, enroll_node);
  if (*rotate) return RotateKey(opts);
  return kExitUsage;
}
