// Sysinfo: the `sysinfo` built-in tool's facts about the host, read from uname(2),
// sysinfo(2) and sysconf(3): os, arch, kernel, hostname, cpu_count, memory_total_bytes,
// memory_available_bytes, uptime_secs, agent_version. A pure read; owns nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace edge::sandbox {

nlohmann::json CollectSysinfo(std::string_view agent_version);

}  // namespace edge::sandbox
