#include "agent/edge/capabilities.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace edge::agentedge {

aegis::cluster::v1::EdgeCapabilities BuildCapabilities(const config::AgentConfig& config,
                                                       const std::vector<std::string>& tools,
                                                       const std::string& agent_version,
                                                       bool draining) {
  aegis::cluster::v1::EdgeCapabilities caps;
  struct utsname u {};
  if (::uname(&u) == 0) {
    std::string os = u.sysname;
    std::transform(os.begin(), os.end(), os.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    caps.set_os(os);
    caps.set_arch(u.machine);
  }
  std::vector<std::string> sorted_tools = tools;
  std::sort(sorted_tools.begin(), sorted_tools.end());
  for (const auto& t : sorted_tools)
    caps.add_local_tools(t);
  std::set<std::string> mounts;
  for (const auto& [name, ctx] : config.security_contexts) {
    mounts.insert(ctx.mount_points.begin(), ctx.mount_points.end());
  }
  for (const auto& m : mounts)
    caps.add_mount_points(m);
  auto& labels = *caps.mutable_custom_labels();
  // The agent.* labels are the agent's to state: a config label of that name is not advertised.
  for (const auto& [k, v] : config.labels) {
    if (k == kAgentVersionLabel || k == kAgentStateLabel || k == kAgentMaxMessageLabel ||
        k == kAgentInteractiveToolsLabel) {
      continue;
    }
    labels[k] = v;
  }
  labels[kAgentVersionLabel] = agent_version;
  labels[kAgentMaxMessageLabel] = std::to_string(config.edge.max_message_bytes);
  // std::map: already sorted by name.
  std::string interactive;
  for (const auto& [name, tool] : config.tools) {
    if (!tool.interactive) continue;
    if (!interactive.empty()) interactive += ",";
    interactive += name;
  }
  if (!interactive.empty()) labels[kAgentInteractiveToolsLabel] = interactive;
  if (draining) labels[kAgentStateLabel] = "draining";
  return caps;
}

}  // namespace edge::agentedge
