// `edge-controller tag …` (operator tags on a node) and `edge-controller fleet invoke | get |
// list | cancel` (one command per matching node under one fleet command id): thin clients of
// the FleetAdmin service on the admin socket (proto/fleet_admin.proto). Exit codes of
// `fleet invoke` (controller/README.md):
//   0   every part ended ok with exit code 0 (or --detach: the parts were sent)
//   3   some part did not succeed: a non-zero exit code, an error, a timeout, a cancel, or
//       refused at dispatch (the summary table says which)
//   74  every part succeeded, but some output is missing: this client fell behind and some
//       was dropped for it, or a node's output cap (sandbox.max_output_bytes) dropped the rest
//       of that node's output
//   75  left before every part ended: --timeout + 60 s passed, or the controller went away
//       (`fleet get` shows the parts)
//   130 interrupted: the fleet command was cancelled (Ctrl-C / SIGTERM)
//   2   bad flags, a bad selector or another INVALID_ARGUMENT
//   1   refused otherwise (no live node matches, the controller is not reachable, …)
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

inline constexpr int kExitSomePartsFailed = 3;

edge::cli::CommandRunner AddFleetCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
