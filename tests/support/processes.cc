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

int ThreadsNamed(const std::string& name) {
  int n = 0;
  std::error_code ec;  // a thread that ends while this reads is simply not counted
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string s;
    std::getline(comm, s);
    if (s == name) ++n;
  }
  return n;
}

}  // namespace edge::testing
