#include "agent/daemon/status_file.h"

#include <signal.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"

namespace edge::daemon {

std::string StatusFilePath(const std::string& data_dir) {
  return data_dir + "/state/status.json";
}

Status WriteStatusFile(const std::string& data_dir, const AgentStatus& s) {
  nlohmann::json services = nlohmann::json::array();
  for (const auto& svc : s.services) {
    services.push_back({{"name", svc.name},
                        {"state", std::string(ServiceStateName(svc.state))},
                        {"error", svc.error},
                        {"failed_attempts", svc.failed_attempts},
                        {"retry_in_ms", svc.retry_in.count()},
                        {"details", svc.details}});
  }
  nlohmann::json j = {{"pid", s.pid},
                      {"version", s.version},
                      {"node_id", s.node_id},
                      {"started_at_ms", s.started_at_ms},
                      {"updated_at_ms", s.updated_at_ms},
                      {"update_interval_ms", s.update_interval_ms},
                      {"state", s.state},
                      {"services", services}};
  return WriteFileAtomic(StatusFilePath(data_dir), j.dump(2) + "\n",
                         {.mode = 0644, .create_parents_mode = 0700});
}

Result<AgentStatus> ReadStatusFile(const std::string& data_dir) {
  const std::string path = StatusFilePath(data_dir);
  auto text = ReadFile(path, 1 << 20);
  if (!text) return std::unexpected(text.error());
  try {
    auto j = nlohmann::json::parse(*text);
    AgentStatus s;
    s.pid = j.at("pid").get<int>();
    s.version = j.at("version").get<std::string>();
    s.node_id = j.value("node_id", "");
    s.started_at_ms = j.at("started_at_ms").get<int64_t>();
    s.updated_at_ms = j.at("updated_at_ms").get<int64_t>();
    s.update_interval_ms = j.at("update_interval_ms").get<int64_t>();
    s.state = j.at("state").get<std::string>();
    for (const auto& svc : j.at("services")) {
      ServiceStatus st;
      st.name = svc.at("name").get<std::string>();
      auto state = svc.at("state").get<std::string>();
      st.state = state == "running"   ? ServiceState::kRunning
                 : state == "failed"  ? ServiceState::kFailed
                 : state == "stopped" ? ServiceState::kStopped
                                      : ServiceState::kRegistered;
      st.error = svc.value("error", "");
      if (auto a = svc.find("failed_attempts"); a != svc.end() && a->is_number_integer()) {
        st.failed_attempts = a->get<int>();
      }
      if (auto r = svc.find("retry_in_ms"); r != svc.end() && r->is_number_integer()) {
        st.retry_in = std::chrono::milliseconds(r->get<int64_t>());
      }
      if (auto d = svc.find("details"); d != svc.end() && d->is_object()) {
        for (const auto& [k, v] : d->items())
          if (v.is_string()) st.details[k] = v.get<std::string>();
      }
      s.services.push_back(std::move(st));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     path + " is not a valid status file: " + e.what());
  }
}

bool IsHealthy(const AgentStatus& s, Clock::WallTime now, std::string* why) {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (s.pid <= 0 || (::kill(s.pid, 0) != 0 && errno == ESRCH)) {
    return fail("the agent (pid " + std::to_string(s.pid) + ") is not running");
  }
  const int64_t age = ToEpochMillis(now) - s.updated_at_ms;
  if (s.update_interval_ms > 0 && age > 3 * s.update_interval_ms) {
    return fail("status not refreshed for " + std::to_string(age / 1000) + " s");
  }
  if (s.state != "running") return fail("state is " + s.state);
  for (const auto& svc : s.services) {
    if (svc.state == ServiceState::kFailed)
      return fail("service " + svc.name + " failed: " + svc.error + " (" +
                  std::to_string(svc.failed_attempts) + " attempt(s); next in " +
                  std::to_string(svc.retry_in.count() / 1000) + " s)");
  }
  return true;
}

}  // namespace edge::daemon
