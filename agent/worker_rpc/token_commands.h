// `edge-agent token issue | inspect | verify | rotation-plan` (wire.md §4.1, the worker
// contract's incident-response runbook): signed worker tokens on the command line. Keys come
// from --signing-key-file or the config's worker.auth (signing key, rotation keys, revoked
// jtis); no secret is ever printed except the issued token itself.
//   issue <worker-id> --ttl 5m [--audience A] [--scopes s,…] [--format json]
//   inspect <token>          decodes the claims and says plainly they are UNVERIFIED
//   verify <token> [--worker-id W] [--audience A]   exit 0 = valid, 1 = refused (the rule)
//   rotation-plan [--new-key-ref R] [--previous-key-ref R] [--ttl 5m]   a no-secret checklist
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::workerrpc {

cli::CommandRunner AddTokenCommands(CLI::App& app, const cli::GlobalOptions& opts);

}  // namespace edge::workerrpc
