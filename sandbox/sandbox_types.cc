#include "sandbox/sandbox_types.h"

namespace edge::sandbox {

std::string_view SandboxStateName(SandboxState state) {
  switch (state) {
    case SandboxState::kRunning:
      return "running";
    case SandboxState::kStopped:
      return "stopped";
    case SandboxState::kDestroyed:
      return "destroyed";
    case SandboxState::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

Result<SandboxState> ParseSandboxState(std::string_view name) {
  for (auto s : {SandboxState::kRunning, SandboxState::kStopped, SandboxState::kDestroyed,
                 SandboxState::kUnhealthy}) {
    if (SandboxStateName(s) == name) return s;
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "state \"" + std::string(name) +
                       "\" is not a sandbox state (running, stopped, destroyed, unhealthy)");
}

}  // namespace edge::sandbox
