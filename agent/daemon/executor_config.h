// The ONE place where the agent's config meets the Executor (design.md §2, §7): translates
// config::AgentConfig (data_dir, node_id / worker.worker_id, sandbox.*, tools,
// security_contexts) into sandbox::ExecutorOptions, so the
// sandbox library knows nothing of the config library. Pure functions.
#pragma once

#include <string>

#include "common/error.h"
#include "config/agent_config.h"
#include "sandbox/executor.h"
#include "sandbox/executor_options.h"

namespace edge::daemon {

// Every ExecutorOptions field the config decides:
//   data_dir ← data_dir; own_id ← worker.worker_id, else node_id; agent_version ← `version`;
//   sandbox_root, provider, bwrap_network, max_sandboxes, default_timeout, max_output_bytes,
//   kill_grace, max_concurrent, max_sessions ← sandbox.* (the executor-wide cap over every
//   door; each door's own cap, e.g. edge.max_concurrent_commands, travels in its requests);
//   tools.<n> ← {command, timeout, security_context, interactive};
//   security_contexts.<n> ← {allowed_tools, run_as, mount_points, require_roles,
//   limits{timeout → timeout_cap, max_output_bytes, max_concurrent, max_processes}}.
sandbox::ExecutorOptions ExecutorOptionsFromConfig(const config::AgentConfig& config,
                                                   const std::string& version);

// A pushed config's tools and security contexts into a running executor (Reconfigure).
Status ApplyToolConfig(sandbox::Executor& executor, const config::AgentConfig& config);

}  // namespace edge::daemon
