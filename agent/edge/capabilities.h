// EdgeCapabilities the agent advertises in Hello and CapabilityUpdate (seeds/000, brief B §7):
// os and arch from uname(2), local_tools = the executor's Tools(), mount_points = the security
// contexts' mount points (sorted, unique), custom_labels = the config's labels plus
// agent.version, agent.max_message_bytes (edge.max_message_bytes: the largest message this
// agent's end of the stream takes, so the controller refuses a larger InvokeTool instead of
// breaking the stream with it), agent.interactive_tools (the config tools marked
// `interactive: true`, sorted, comma-separated — the names session.start takes as
// agent_name, wire.md §5.5; absent when there is none; they are in local_tools too) and
// agent.state = "draining" once a Drain was received. A pure function.
#pragma once

#include <string>
#include <vector>

#include "config/agent_config.h"
#include "node_cluster.pb.h"

namespace edge::agentedge {

inline constexpr const char* kAgentStateLabel = "agent.state";
inline constexpr const char* kAgentVersionLabel = "agent.version";
inline constexpr const char* kAgentMaxMessageLabel = "agent.max_message_bytes";
inline constexpr const char* kAgentInteractiveToolsLabel = "agent.interactive_tools";

aegis::cluster::v1::EdgeCapabilities BuildCapabilities(const config::AgentConfig& config,
                                                       const std::vector<std::string>& tools,
                                                       const std::string& agent_version,
                                                       bool draining);

}  // namespace edge::agentedge
