#include "tests/support/processes.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace edge::testing {

bool ProcessGone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return true;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  return close == std::string::npos || text.substr(close + 2, 1) == "Z";
}

std::vector<pid_t> GroupMembers(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != "Z") out.push_back(std::stoi(name));
  }
  return out;
}

int ThreadsNamed(const std::string& name, pid_t pid) {
  int n = 0;
  std::error_code ec;  // a thread that ends while this reads is simply not counted
  const std::string tasks =
      "/proc/" + (pid == 0 ? std::string("self") : std::to_string(pid)) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string s;
    std::getline(comm, s);
    if (s == name) ++n;
  }
  return n;
}

std::vector<std::string> CommandCgroupsNamedAfter(pid_t pid) {
  std::vector<std::string> bases = {"/sys/fs/cgroup/pids/edge-agent"};
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (!line.starts_with("0::")) continue;
    bases.push_back("/sys/fs/cgroup/unified" + line.substr(3) + "/edge-agent");
    bases.push_back("/sys/fs/cgroup" + line.substr(3) + "/edge-agent");
  }
  const std::string prefix = std::to_string(pid) + "-";
  std::vector<std::string> found;
  for (const auto& base : bases) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(base, ec)) {
      if (e.path().filename().string().starts_with(prefix) && e.is_directory(ec)) {
        found.push_back(e.path());
      }
    }
  }
  return found;
}

}  // namespace edge::testing
