// `edge-controller compute …` (issue 11): token create, members, dispatch — thin clients of
// the ComputeAdmin service on the admin socket (proto/compute_admin.proto).
//
// Exit codes of `compute dispatch`: 0 the member answered success:true; 1 it answered
// success:false; 2 usage or config error; 3 NO_COMPUTE_MEMBER_FOR_TAG;
// 4 COMPUTE_MEMBER_DISCONNECTED; 5 DISPATCH_TIMEOUT; 6 the controller could not be asked.
// The other commands: 0 ok, 1 failure, 2 usage.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

inline constexpr int kExitDispatchNoMember = 3;
inline constexpr int kExitDispatchDisconnected = 4;
inline constexpr int kExitDispatchTimeout = 5;
inline constexpr int kExitDispatchUnreachable = 6;

edge::cli::CommandRunner AddComputeCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
