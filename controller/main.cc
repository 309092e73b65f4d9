// edge-controller: the bundled minimal controller (serve) and its operator CLI, whose
// subcommands are thin clients of the admin API on data_dir/admin.sock. Each command group
// lives in controller/cli/ (common/cli.h CommandRunner); this file only assembles them.
#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

#include "common/cli.h"
#include "common/grpc_lifetime.h"
#include "common/malloc_tuning.h"
#include "common/signals.h"
#include "controller/cli/compute_commands.h"
#include "controller/cli/fleet_commands.h"
#include "controller/cli/invoke_commands.h"
#include "controller/cli/node_commands.h"
#include "controller/cli/server_commands.h"
#include "controller/cli/token_commands.h"
#include "controller/cli/user_commands.h"
#include "controller/cli/worker_commands.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.0.0-dev"
#endif

int main(int argc, char** argv) {
  edge::KeepMessageBuffersMapped();  // before any thread (common/malloc_tuning.h)
  // Destroyed last: gRPC has finished shutting down before the process exits.
  edge::GrpcShutdownAtExit grpc_shutdown_at_exit;
  edge::IgnoreFatalIoSignals();
  CLI::App app{"edge-controller: the bundled minimal controller for edge-agent", "edge-controller"};
  app.set_version_flag("-V,--version", EDGE_VERSION);
  app.require_subcommand(1);
  edge::cli::GlobalOptions opts;
  edge::cli::AddGlobalOptions(app, opts, "/etc/edge-controller/controller.yaml");

  namespace cli = edge::controller::cli;
  std::vector<edge::cli::CommandRunner> groups;
  groups.push_back(cli::AddServerCommands(app, opts));
  groups.push_back(cli::AddTokenCommands(app, opts));
  groups.push_back(cli::AddNodeCommands(app, opts));
  groups.push_back(cli::AddInvokeCommands(app, opts));
  groups.push_back(cli::AddFleetCommands(app, opts));
  groups.push_back(cli::AddComputeCommands(app, opts));
  groups.push_back(cli::AddWorkerCommands(app, opts));
  groups.push_back(cli::AddUserCommands(app, opts));

  if (int rc = edge::cli::Parse(app, argc, argv); rc >= 0) return rc;
  // Commands other than `serve` log only warnings by default: their output is the answer
  // (`serve` initialises logging from its config).
  if (!app.got_subcommand("serve") && !edge::cli::InitLogging(opts, "warn")) {
    return edge::cli::kExitUsage;
  }
  for (const auto& group : groups) {
    if (auto rc = group()) return *rc;
  }
  return edge::cli::kExitUsage;
}
