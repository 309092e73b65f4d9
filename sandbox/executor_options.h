// ExecutorOptions: everything the Executor is configured with. Plain structs; the daemon
// translates edge::config (sandbox.*, tools, security_contexts, node/worker id) into these,
// so the sandbox library knows nothing of the config library.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sandbox/idempotency_store.h"
#include "sandbox/security_context.h"
#include "sandbox/state_db.h"
#include "sandbox/tool_registry.h"

namespace edge::sandbox {

struct ExecutorOptions {
  std::string data_dir;       // state/agent.db and state/process-groups live here
  StateDb::Options state_db;  // how state/agent.db is opened (tests count its syncs)
  std::string sandbox_root;   // "" = <data_dir>/sandboxes; the default workspace is _default/root
  std::string provider = "local";  // "local" | "bwrap"
  std::string bwrap_path = "/usr/bin/bwrap";
  bool bwrap_network = false;  // bwrap: keep the host network
  size_t max_sandboxes = 10;
  size_t max_concurrent = 64;  // invocations running at once, all contexts together
  size_t max_sessions = 8;     // live sessions (session.start) at once; each is an invocation too
  std::chrono::milliseconds default_timeout{std::chrono::seconds(60)};
  uint64_t max_output_bytes = 64ull << 20;
  std::chrono::milliseconds kill_grace{std::chrono::seconds(10)};
  // How long an explicit Destroy waits for the sandbox's cancelled commands to end before it
  // answers UNAVAILABLE (unset: kill_grace + 5 s, time for SIGKILL and the pipes' drain).
  std::optional<std::chrono::milliseconds> destroy_wait;
  std::string own_id;                  // node / worker id: the lease holder this agent accepts
  std::string agent_version;           // reported by sysinfo
  std::vector<std::string> env_allow;  // agent variables passed to every command
  std::map<std::string, ToolConfig> tools;
  std::map<std::string, SecurityContextConfig> security_contexts;
  std::string pids_cgroup_root = "/sys/fs/cgroup/pids";  // "" = never use cgroup v1
  std::string cgroup2_root = "auto";  // ProcessRunner::Options::cgroup2_root; "" = never v2
  IdempotencyStore::Options idempotency;
  // Doors that keep each interrupted result (TakeInterrupted) durably themselves and then
  // call ConfirmInterrupted: their journal rows stay until that call, so an agent that dies
  // again before the door stored a result finds the row, and delivers the same stored result,
  // at its next start. Other doors' rows go at Open, once the result is recorded for
  // idempotency (a repeat of the command_id answers with it). The daemon names the edge door
  // (its outbox).
  std::set<std::string> confirming_doors;
};

}  // namespace edge::sandbox
