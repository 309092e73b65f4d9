// `edge-controller user …` (issue 12): `user token create` mints a bearer token for an
// operator user of the northbound API (wire.md §5.1) through AdminService.CreateUserToken on
// the admin socket. Exit codes: 0 ok, 1 failure, 2 usage.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

edge::cli::CommandRunner AddUserCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
