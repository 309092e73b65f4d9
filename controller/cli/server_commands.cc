#include "controller/cli/server_commands.h"

#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "admin.grpc.pb.h"
#include "common/clock.h"
#include "common/grpc_lifetime.h"
#include "common/log.h"
#include "common/signals.h"
#include "controller/cli/admin_cli.h"
#include "controller/controller.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.0.0-dev"
#endif

namespace edge::controller::cli {
namespace {

using edge::cli::kExitFailure;
using edge::cli::kExitOk;
using edge::cli::kExitUsage;

// How long `serve` may take to stop after SIGTERM/SIGINT before it exits regardless.
constexpr std::chrono::seconds kStopLimit{10};

int Serve(const edge::cli::GlobalOptions& opts) {
  BlockTerminationSignals();
  // gRPC's callback queue outlives every channel and server (common/grpc_lifetime.h).
  const CallbackQueuePin callback_queue_pin;
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  if (!edge::cli::InitLogging(opts, cfg->log.level, cfg->log.format)) return kExitUsage;
  auto log = log::Get("controller");
  Controller controller(*cfg, EDGE_VERSION, SystemClock::Instance());
  if (auto st = controller.Start(); !st) {
    log->error("cannot start: {}", st.error().ToString());
    return kExitFailure;
  }
  log->info("edge-controller {} serving (pid {})", EDGE_VERSION, ::getpid());
  int sig = *WaitForTerminationSignal();
  while (sig == SIGHUP) {
    // systemctl reload: certificates of the HTTP server, without a restart.
    log->info("SIGHUP received: reloading");
    controller.Reload();
    sig = *WaitForTerminationSignal();
  }
  log->info("signal {} received: stopping", sig);
  // Stopping is bounded: if something (a peer that never reads, a stuck call) keeps it
  // longer than kStopLimit, the process leaves anyway rather than hang.
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopped = false;
  std::thread watchdog([&] {
    std::unique_lock lock(stop_mu);
    if (!stop_cv.wait_for(lock, kStopLimit, [&] { return stopped; })) {
      log->error("stopping took longer than {} s: exiting without a clean stop",
                 kStopLimit.count());
      std::_Exit(kExitFailure);
    }
  });
  controller.Stop();
  {
    std::lock_guard lock(stop_mu);
    stopped = true;
  }
  stop_cv.notify_all();
  watchdog.join();
  log->info("stopped");
  return kExitOk;
}

int Status(const edge::cli::GlobalOptions& opts, const std::string& format) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  auto stub = admin::v1::AdminService::NewStub(AdminChannel(cfg->admin.socket));
  admin::v1::StatusResponse resp;
  auto st = stub->Status(CallContext(std::chrono::seconds(5)).get(), {}, &resp);
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
    std::cout << Dump(j) << "\n";
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

int ConfigCheck(const edge::cli::GlobalOptions& opts) {
  auto cfg = LoadConfig(opts);
  if (!cfg) return kExitUsage;
  std::cout << config::DumpRedacted(*cfg);
  return kExitOk;
}

}  // namespace

edge::cli::CommandRunner AddServerCommands(CLI::App& app, const edge::cli::GlobalOptions& opts) {
  auto* serve = app.add_subcommand("serve", "run the controller (gRPC + admin socket)");
  auto status_format = std::make_shared<std::string>();
  auto* status = app.add_subcommand("status", "ask the running controller for its status");
  edge::cli::AddFormatOption(status, *status_format);
  auto* config = app.add_subcommand("config", "configuration commands");
  config->require_subcommand(1);
  auto* check = config->add_subcommand(
      "check",
      "validate the config; print it with secrets redacted (exit 0) or the errors (exit 2)");
  auto* version = app.add_subcommand("version", "print the version");

  return [&opts, serve, status, status_format, check, version]() -> std::optional<int> {
    if (*version) {
      std::cout << "edge-controller " << EDGE_VERSION << "\n";
      return kExitOk;
    }
    if (*serve) return Serve(opts);
    if (*status) return Status(opts, *status_format);
    if (*check) return ConfigCheck(opts);
    return std::nullopt;
  };
}

}  // namespace edge::controller::cli
