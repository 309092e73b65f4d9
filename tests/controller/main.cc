// edge-controller: the bundled minimal controller (serve) and its operator CLI, whose
// subcommands are thin clients of the admin API on data_dir/admin.sock.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <nlohmann/json.hpp>

#include "admin.grpc.pb.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/signals.h"
#include "config/controller_config.h"
#include "tests/controller/admin_server.h"
#include "tests/controller/controller.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.0.0-dev"
#endif

namespace {

using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;

std::optional<std::string> GetEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// Loads the config or prints every problem; nullopt means exit 2.
std::optional<edge::config::ControllerConfig> LoadConfig(const edge::cli::GlobalOptions& opts) {
  auto cfg = edge::config::LoadControllerConfig(opts.config_path, GetEnv);
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().ToString().c_str());
    return std::nullopt;
  }
  return *cfg;
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
  auto stub = edge::admin::v1::AdminService::NewStub(
      edge::controller::AdminChannel(cfg->admin.socket));
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
                        {"started_at_epoch_ms", resp.started_at_epoch_ms()},
                        {"grpc_listen", resp.grpc_listen()},
                        {"data_dir", resp.data_dir()}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "status:      ok\n"
              << "version:     " << resp.version() << "\n"
              << "grpc listen: " << resp.grpc_listen() << "\n"
              << "data dir:    " << resp.data_dir() << "\n";
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
      "check", "validate the config; print it with secrets redacted (exit 0) or the errors (exit 2)");
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
  return kExitUsage;
}
