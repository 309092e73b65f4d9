#include "agent/daemon/executor_config.h"

#include <algorithm>

namespace edge::daemon {

sandbox::ExecutorOptions ExecutorOptionsFromConfig(const config::AgentConfig& c,
                                                   const std::string& version) {
  sandbox::ExecutorOptions o;
  o.data_dir = c.data_dir;
  o.own_id = c.worker.worker_id.empty() ? c.node_id : c.worker.worker_id;
  o.agent_version = version;
  o.sandbox_root = c.sandbox.root;
  o.provider = c.sandbox.provider;
  o.bwrap_network = c.sandbox.bwrap_network;
  o.max_sandboxes = static_cast<size_t>(std::max<int64_t>(c.sandbox.max_sandboxes, 0));
  o.default_timeout = c.sandbox.default_timeout;
  o.max_output_bytes = c.sandbox.max_output_bytes;
  o.kill_grace = c.sandbox.kill_grace;
  // The executor-wide cap is its own setting; each door passes its cap with each request.
  o.max_concurrent = static_cast<size_t>(std::max<int64_t>(c.sandbox.max_concurrent, 1));
  o.max_sessions = static_cast<size_t>(std::max<int64_t>(c.sandbox.max_sessions, 1));
  // The edge door keeps every result in its outbox: an interrupted command's journal row
  // stays until the outbox has its result (agentedge::CommandDispatcher::Create).
  o.confirming_doors = {"edge"};
  for (const auto& [name, t] : c.tools) {
    o.tools[name] = sandbox::ToolConfig{t.command, t.timeout, t.security_context, t.interactive};
  }
  for (const auto& [name, s] : c.security_contexts) {
    sandbox::SecurityContextConfig sc;
    sc.allowed_tools = s.allowed_tools;
    sc.run_as = s.run_as;
    sc.mount_points = s.mount_points;
    sc.require_roles = s.require_roles;
    sc.limits.timeout_cap = s.limits.timeout;
    sc.limits.max_output_bytes = s.limits.max_output_bytes;
    sc.limits.max_concurrent = static_cast<int>(s.limits.max_concurrent);
    sc.limits.max_processes = static_cast<int>(s.limits.max_processes);
    o.security_contexts[name] = std::move(sc);
  }
  return o;
}

Status ApplyToolConfig(sandbox::Executor& executor, const config::AgentConfig& config) {
  const sandbox::ExecutorOptions o = ExecutorOptionsFromConfig(config, "");
  return executor.Reconfigure(o.tools, o.security_contexts);
}

}  // namespace edge::daemon
