// edge-controller: the bundled minimal controller (serve) and its operator CLI, whose
// subcommands are thin clients of the admin API on data_dir/admin.sock.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include <nlohmann/json.hpp>

#include "admin.grpc.pb.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/signals.h"
#include "config/controller_config.h"
#include "config/duration.h"
#include "tests/controller/admin_server.h"
#include "tests/controller/controller.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.0.0-dev"
#endif

namespace {

using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;

// Loads the config or prints every problem; nullopt means exit 2.
std::optional<edge::config::ControllerConfig> LoadConfig(const edge::cli::GlobalOptions& opts) {
  return edge::cli::LoadConfigOrReport(opts, edge::config::LoadControllerConfig);
}

int Serve(const edge::cli::GlobalOptions& opts) {
  edge::BlockTerminationSignals();
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto log = edge::log::Get("controller");
  edge::controller::Controller controller(*cfg, EDGE_VERSION, edge::SystemClock::Instance());
  if (auto st = controller.Start(); !st) {
    log->error("cannot start: {}", st.error().ToString());
    return kExitFailure;
  }
  log->info("edge-controller {} serving (pid {})", EDGE_VERSION, ::getpid());
  int sig = *edge::WaitForTerminationSignal();
  log->info("signal {} received: stopping", sig);
  controller.Stop();
  log->info("stopped");
  return kExitOk;
}

int Status(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  auto stub =
      edge::admin::v1::AdminService::NewStub(edge::controller::AdminChannel(cfg->admin.socket));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  edge::admin::v1::StatusResponse resp;
  auto st = stub->Status(&ctx, {}, &resp);
  if (!st.ok()) {
    std::fprintf(stderr, "error: controller not reachable on %s: %s\n", cfg->admin.socket.c_str(),
                 st.error_message().c_str());
    return kExitFailure;
  }
  if (format == "json") {
    nlohmann::json j = {{"status", "ok"},
                        {"version", resp.version()},
                        {"advertise", resp.advertise()},
                        {"ca_pin", resp.ca_pin()},
                        {"nodes", resp.nodes()},
                        {"active_join_tokens", resp.active_join_tokens()},
                        {"started_at_epoch_ms", resp.started_at_epoch_ms()},
                        {"grpc_listen", resp.grpc_listen()},
                        {"data_dir", resp.data_dir()}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "status:      ok\n"
              << "version:     " << resp.version() << "\n"
              << "grpc listen: " << resp.grpc_listen() << "\n"
              << "advertise:   " << resp.advertise() << "\n"
              << "CA pin:      " << resp.ca_pin() << "\n"
              << "nodes:       " << resp.nodes() << "\n"
              << "join tokens: " << resp.active_join_tokens() << " active\n"
              << "data dir:    " << resp.data_dir() << "\n";
  }
  return kExitOk;
}

// A stub for the admin API of the controller named by the config; nullptr after printing
// why when the config is bad.
std::unique_ptr<edge::admin::v1::AdminService::Stub> AdminStub(
    const edge::config::ControllerConfig& cfg) {
  return edge::admin::v1::AdminService::NewStub(edge::controller::AdminChannel(cfg.admin.socket));
}

int RpcFailed(const edge::config::ControllerConfig& cfg, const grpc::Status& st) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    std::fprintf(stderr, "error: controller not reachable on %s: %s\n", cfg.admin.socket.c_str(),
                 st.error_message().c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "error: %s\n", st.error_message().c_str());
  return st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? kExitUsage : kExitFailure;
}

std::string IsoTime(int64_t ms) {
  if (ms == 0) return "-";
  std::time_t t = ms / 1000;
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

int TokenCreate(const edge::cli::GlobalOptions& opts, const std::string& node,
                const std::string& tenant, const std::string& ttl, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::CreateJoinTokenRequest req;
  req.set_node_id(node);
  req.set_tenant_id(tenant);
  if (!ttl.empty()) {
    auto d = edge::config::ParseDuration(ttl);
    if (!d || d->count() < 1000) {
      std::fprintf(stderr,
                   "error: --ttl \"%s\" must be a duration of at least 1s, such as 30m or 1h\n",
                   ttl.c_str());
      return kExitUsage;
    }
    req.set_ttl_seconds(d->count() / 1000);
  }
  edge::admin::v1::CreateJoinTokenResponse resp;
  auto st = AdminStub(*cfg)->CreateJoinToken(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  if (format == "json") {
    nlohmann::json j = {{"token_id", resp.token_id()},
                        {"join_token", resp.join_token()},
                        {"expires_at", IsoTime(resp.expires_at_epoch_ms())}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "token id:   " << resp.token_id() << "\n"
              << "expires at: " << IsoTime(resp.expires_at_epoch_ms()) << "\n"
              << "join token: " << resp.join_token() << "\n";
  }
  return kExitOk;
}

int TokenList(const edge::cli::GlobalOptions& opts, bool all, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::ListJoinTokensRequest req;
  req.set_include_inactive(all);
  edge::admin::v1::ListJoinTokensResponse resp;
  auto st = AdminStub(*cfg)->ListJoinTokens(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  auto state = [](const edge::admin::v1::JoinTokenInfo& t) -> std::string {
    if (t.revoked_at_epoch_ms()) return "revoked";
    if (t.consumed_at_epoch_ms()) return "used by " + t.consumed_by_node_id();
    if (t.expires_at_epoch_ms() <= edge::ToEpochMillis(edge::SystemClock::Instance().Now()))
      return "expired";
    return "active";
  };
  if (format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& t : resp.tokens()) {
      arr.push_back({{"token_id", t.token_id()},
                     {"node_id", t.node_id()},
                     {"tenant_id", t.tenant_id()},
                     {"created_at", IsoTime(t.created_at_epoch_ms())},
                     {"expires_at", IsoTime(t.expires_at_epoch_ms())},
                     {"state", state(t)}});
    }
    std::cout << arr.dump() << "\n";
  } else {
    std::printf("%-24s %-16s %-10s %-21s %s\n", "TOKEN ID", "NODE", "TENANT", "EXPIRES", "STATE");
    for (const auto& t : resp.tokens()) {
      std::printf("%-24s %-16s %-10s %-21s %s\n", t.token_id().c_str(),
                  t.node_id().empty() ? "*" : t.node_id().c_str(), t.tenant_id().c_str(),
                  IsoTime(t.expires_at_epoch_ms()).c_str(), state(t).c_str());
    }
  }
  return kExitOk;
}

int TokenRevoke(const edge::cli::GlobalOptions& opts, const std::string& id) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::RevokeJoinTokenRequest req;
  req.set_token_id(id);
  edge::admin::v1::RevokeJoinTokenResponse resp;
  auto st = AdminStub(*cfg)->RevokeJoinToken(Ctx().get(), req, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  std::cout << "revoked " << id << "\n";
  return kExitOk;
}

int Nodes(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  edge::admin::v1::ListNodesResponse resp;
  auto st = AdminStub(*cfg)->ListNodes(Ctx().get(), {}, &resp);
  if (!st.ok()) return RpcFailed(*cfg, st);
  if (format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& n : resp.nodes()) {
      arr.push_back({{"node_id", n.node_id()},
                     {"tenant_id", n.tenant_id()},
                     {"state", n.state()},
                     {"enrolled_at", IsoTime(n.enrolled_at_epoch_ms())},
                     {"last_seen", IsoTime(n.last_seen_epoch_ms())}});
    }
    std::cout << arr.dump() << "\n";
  } else {
    std::printf("%-20s %-10s %-10s %s\n", "NODE", "TENANT", "STATE", "ENROLLED");
    for (const auto& n : resp.nodes()) {
      std::printf("%-20s %-10s %-10s %s\n", n.node_id().c_str(), n.tenant_id().c_str(),
                  n.state().c_str(), IsoTime(n.enrolled_at_epoch_ms()).c_str());
    }
  }
  return kExitOk;
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
  CLI::App app{"edge-controller: the bundled minimal controller for edge-agent", "edge-controller"};
  app.set_version_flag("-V,--version", EDGE_VERSION);
  app.require_subcommand(1);
  edge::cli::GlobalOptions opts;
  edge::cli::AddGlobalOptions(app, opts, "/etc/edge-controller/controller.yaml");

  auto* serve = app.add_subcommand("serve", "run the controller (gRPC + admin socket)");
  std::string status_format;
  auto* status = app.add_subcommand("status", "ask the running controller for its status");
  edge::cli::AddFormatOption(status, status_format);
  auto* config = app.add_subcommand("config", "configuration commands");
  config->require_subcommand(1);
  auto* check = config->add_subcommand(
      "check",
      "validate the config; print it with secrets redacted (exit 0) or the errors (exit 2)");
  auto* token = app.add_subcommand("token", "join tokens for enrolling agents");
  token->require_subcommand(1);
  std::string tok_node, tok_tenant, tok_ttl, tok_format, tok_id;
  bool tok_all = false;
  auto* tok_create = token->add_subcommand("create", "create a single-use join token");
  tok_create->add_option("--node", tok_node, "bind the token to this node id");
  tok_create->add_option("--tenant", tok_tenant, "tenant of the node (default: default)");
  tok_create->add_option("--ttl", tok_ttl,
                         "lifetime, e.g. 30m or 1h (default: tokens.default_ttl)");
  edge::cli::AddFormatOption(tok_create, tok_format);
  auto* tok_list = token->add_subcommand("list", "list join tokens (active ones unless --all)");
  tok_list->add_flag("--all", tok_all, "include used, revoked and expired tokens");
  edge::cli::AddFormatOption(tok_list, tok_format);
  auto* tok_revoke = token->add_subcommand("revoke", "revoke a join token by id");
  tok_revoke->add_option("token_id", tok_id, "the token id")->required();
  std::string nodes_format;
  auto* nodes = app.add_subcommand("nodes", "list enrolled nodes");
  edge::cli::AddFormatOption(nodes, nodes_format);
  auto* version = app.add_subcommand("version", "print the version");

  if (int rc = edge::cli::Parse(app, argc, argv); rc >= 0) return rc;
  if (*version) {
    std::cout << "edge-controller " << EDGE_VERSION << "\n";
    return kExitOk;
  }
  // Commands other than `serve` log only warnings by default: their output is the answer.
  if (!*serve && !edge::cli::InitLogging(opts, "warn")) return kExitUsage;
  if (*serve) return Serve(opts);
  if (*status) return Status(opts, status_format);
  if (*check) return ConfigCheck(opts);
  if (*tok_create) return TokenCreate(opts, tok_node, tok_tenant, tok_ttl, tok_format);
  if (*tok_list) return TokenList(opts, tok_all, tok_format);
  if (*tok_revoke) return TokenRevoke(opts, tok_id);
  if (*nodes) return Nodes(opts, nodes_format);
  return kExitUsage;
}
