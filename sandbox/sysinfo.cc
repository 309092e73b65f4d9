#include "sandbox/sysinfo.h"

#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <string>

namespace edge::sandbox {

nlohmann::json CollectSysinfo(std::string_view agent_version) {
  nlohmann::json out;
  struct utsname u {};
  if (::uname(&u) == 0) {
    out["os"] = std::string(u.sysname) == "Linux" ? "linux" : std::string(u.sysname);
    out["arch"] = u.machine;
    out["kernel"] = u.release;
    out["hostname"] = u.nodename;
  }
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  out["cpu_count"] = cpus > 0 ? cpus : 1;
  struct sysinfo si {};
  if (::sysinfo(&si) == 0) {
    out["memory_total_bytes"] = static_cast<uint64_t>(si.totalram) * si.mem_unit;
    out["memory_available_bytes"] = static_cast<uint64_t>(si.freeram + si.bufferram) * si.mem_unit;
    out["uptime_secs"] = si.uptime;
  }
  out["agent_version"] = std::string(agent_version);
  return out;
}

}  // namespace edge::sandbox
