// Value types shared by the executor's parts and the doors that call it: a lease as it
// arrives from the wire, a file's description, and a sandbox's record and state. Plain
// values; nothing here owns a resource.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"

namespace edge::sandbox {

// A fencing lease (wire.md §4: {resource_id, holder_id, generation, expires_at}).
struct Lease {
  std::string resource_id;
  std::string holder_id;
  int64_t generation = 0;
  Clock::WallTime expires_at{};

  bool operator==(const Lease&) const = default;
};

// One file or directory beneath a sandbox root.
struct FileInfo {
  std::string path;  // relative to the root, "/"-separated
  uint64_t size = 0;
  std::string mode;  // permission bits as 4 octal digits, e.g. "0644"
  bool is_dir = false;
  Clock::WallTime mod_time;
};

// The lifecycle state of a sandbox; spelled on the wire as "running", "stopped",
// "destroyed", "unhealthy".
enum class SandboxState { kRunning, kStopped, kDestroyed, kUnhealthy };
using State = SandboxState;

std::string_view SandboxStateName(SandboxState state);
// INVALID_ARGUMENT naming the value and the accepted spellings.
Result<SandboxState> ParseSandboxState(std::string_view name);

// A sandbox's record in the registry.
struct SandboxInfo {
  std::string id;  // [A-Za-z0-9._-]{1,64}
  std::string provider;
  std::string runtime_id;
  SandboxState state = SandboxState::kRunning;
  std::string owner;
  std::chrono::seconds ttl{0};                // 0 = no expiry
  std::optional<Clock::WallTime> expires_at;  // created_at + ttl when ttl > 0
  std::map<std::string, std::string> metadata;
  Clock::WallTime created_at{};
  std::string root_dir;  // absolute path of sandboxes/<id>/root
};

}  // namespace edge::sandbox
