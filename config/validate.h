// Internal to edge_config: value rules shared by the agent and controller configs.
#pragma once

#include <string_view>

namespace edge::config {

// host:port (host may be a name, an IPv4 address or a bracketed IPv6 address). With
// `listen`, an empty host ("":7430) and port 0 (ephemeral) are allowed.
bool IsHostPort(std::string_view s, bool listen);
// `[A-Za-z0-9._-]{1,64}`.
bool IsValidNodeId(std::string_view id);
// "sha256:" followed by 64 hex digits.
bool IsCaPin(std::string_view s);

}  // namespace edge::config
