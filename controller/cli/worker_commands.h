// `edge-controller workers`, `worker call` and `sandbox spawn|exec|destroy` (issue 10): the
// operator's view of the workers that heartbeat to this controller, and calls to a worker's
// POST /rpc (wire.md §4). The controller (WorkerAdmin on the admin socket) looks the worker
// up, mints a short-lived aud=worker:rpc token and acquires the lease when asked; this
// process then makes the HTTP call itself, so NDJSON chunks are printed as they arrive.
//
// Exit codes of `worker call` and `sandbox …`: 0 the worker answered without an error (for
// `sandbox exec`, the command's own exit code); 1 the worker answered an error (its HTTP
// status and message on stderr) or the controller refused (lease held by another worker,
// unknown worker); 2 usage or config; 69 the worker could not be reached.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

edge::cli::CommandRunner AddWorkerCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
