// SandboxRegistry: the records of the sandboxes this agent runs (issue 4 "Sandboxes"),
// persisted in StateDb table `sandboxes` so they survive a restart. Spawn creates the
// workspace `<sandboxes_dir>/<id>/root` (0700) and enforces max_sandboxes; Destroy marks
// the record destroyed and removes `<sandboxes_dir>/<id>` (workspace and console log)
// without following any symlink inside it. Starting the sandbox's runtime is the provider's
// job, not this class's. Thread-safe. Borrows the StateDb and the Clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "sandbox/sandbox_types.h"
#include "sandbox/state_db.h"

namespace edge::sandbox {

struct SpawnRequest {
  std::string id;  // [A-Za-z0-9._-]{1,64}, not "." or ".."
  std::string provider;
  std::string runtime_id;
  std::string owner;
  std::chrono::seconds ttl{0};  // 0 = no expiry
  std::map<std::string, std::string> metadata;
};

class SandboxRegistry {
 public:
  struct Options {
    std::string sandboxes_dir;  // usually data_dir/sandboxes; created 0700
    size_t max_sandboxes = 10;  // sandboxes not destroyed
  };

  static Result<std::unique_ptr<SandboxRegistry>> Open(StateDb& db, Clock& clock, Options options);

  // INVALID_ARGUMENT naming the id and the rule.
  static Status ValidateId(std::string_view id);

  // A new record in state running. ALREADY_EXISTS when a sandbox with that id exists and
  // is not destroyed (a destroyed one is replaced); RESOURCE_EXHAUSTED naming the limit.
  Result<SandboxInfo> Spawn(const SpawnRequest& request);
  // Marks the sandbox destroyed and removes its directory. NOT_FOUND for an unknown id;
  // destroying a destroyed sandbox is a no-op that returns its record.
  Result<SandboxInfo> Destroy(std::string_view id);
  // NOT_FOUND for an unknown id.
  Result<SandboxInfo> Get(std::string_view id) const;  // the "status" call
  // Sorted by id; destroyed records only with `include_destroyed`.
  Result<std::vector<SandboxInfo>> List(bool include_destroyed = false) const;
  // running <-> stopped <-> unhealthy; FAILED_PRECONDITION for a destroyed sandbox (use
  // Destroy to destroy).
  Status SetState(std::string_view id, SandboxState state);
  Status SetRuntimeId(std::string_view id, std::string_view runtime_id);
  // Sandboxes not destroyed whose expires_at <= now.
  Result<std::vector<SandboxInfo>> Expired(Clock::WallTime now) const;

  // <sandboxes_dir>/<id> and <sandboxes_dir>/<id>/root (the id is not validated here).
  std::string SandboxDir(std::string_view id) const;
  std::string RootDir(std::string_view id) const;
  size_t max_sandboxes() const { return options_.max_sandboxes; }

 private:
  SandboxRegistry(StateDb& db, Clock& clock, Options options)
      : db_(db), clock_(clock), options_(std::move(options)) {}
  SandboxInfo FromRow(const SqlRow& row) const;

  StateDb& db_;
  Clock& clock_;
  Options options_;
  std::mutex spawn_mu_;  // serializes Spawn/Destroy with their directory work
};

}  // namespace edge::sandbox
