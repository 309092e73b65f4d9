// The edge-stream integration fixture shared by the tests that run a real edge-controller
// and real edge-agents on loopback: configs with fresh join tokens, agents started and waited
// for, the operator CLI wrapped (nodes, invoke --detach, command get), and /proc probes.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cctype>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/controller_fixture.h"

namespace edge::testing {

using namespace std::chrono_literals;

// A controller, and real agents enrolled to it on demand; the operator CLI wrapped.
class EdgeFixture : public ::testing::Test {
 protected:
  void SetUp() override { ctl_ = std::make_unique<ControllerFixture>(dir_); }
  void TearDown() override {
    agents_.clear();
    ctl_.reset();
  }

  std::string DataDir(const std::string& node) { return dir_ / ("agent-" + node); }
  std::string ConfigPath(const std::string& node) { return dir_ / ("agent-" + node + ".yaml"); }

  // Writes the agent's config with a fresh join token bound to `node`.
  void WriteAgentConfig(const std::string& node, const std::string& extra = "",
                        int heartbeat_secs = 30) {
    auto [id, token] = ctl_->CreateToken(node);
    WriteText(ConfigPath(node),
              "node_id: " + node + "\ndata_dir: " + DataDir(node) +
                  "\ncontroller:\n  join_token: \"" + token +
                  "\"\ncluster:\n  heartbeat_interval_secs: " + std::to_string(heartbeat_secs) +
                  "\nsandbox:\n  kill_grace: 1s\nlog:\n  level: debug\n" + extra);
  }
  // Adds `key: value` to the `sandbox:` section of the config WriteAgentConfig wrote (a second
  // `sandbox:` in `extra` would be a duplicate key).
  void AddSandboxSetting(const std::string& node, const std::string& key,
                         const std::string& value) {
    std::string config = ReadText(ConfigPath(node));
    const std::string sandbox = "\nsandbox:\n";
    const size_t at = config.find(sandbox);
    ASSERT_NE(at, std::string::npos) << config;
    config.insert(at + sandbox.size(), "  " + key + ": " + value + "\n");
    WriteText(ConfigPath(node), config);
  }
  // `edge-agent run`: enrolls with the token, attests, connects.
  ChildProcess& StartAgent(const std::string& node = "edge-01") {
    agents_.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{AgentBin(), "--config", ConfigPath(node), "run"}, dir_.path()));
    return *agents_.back();
  }
  ChildProcess& EnrollAndStart(const std::string& node = "edge-01", const std::string& extra = "",
                               int heartbeat_secs = 30) {
    WriteAgentConfig(node, extra, heartbeat_secs);
    auto& agent = StartAgent(node);
    EXPECT_TRUE(WaitConnected(node, true)) << agent.Stderr();
    return agent;
  }

  // The controller's view of one node (`edge-controller nodes --format json`).
  nlohmann::json Node(const std::string& node) {
    auto r = ctl_->Cli({"nodes", "--format", "json"});
    if (r.exit_code != 0) return nlohmann::json();
    for (const auto& n : nlohmann::json::parse(r.out)) {
      if (n.value("node_id", "") == node) return n;
    }
    return nlohmann::json();
  }
  bool WaitConnected(const std::string& node, bool connected, std::chrono::seconds t = 60s) {
    return WaitUntil(
        [&] {
          nlohmann::json n = Node(node);
          return n.is_object() && n.value("connected", false) == connected;
        },
        t);
  }
  CommandResult Ctl(std::vector<std::string> args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return ctl_->Cli(std::move(args), timeout);
  }
  // `invoke --detach`: the command id.
  std::string Detach(const std::string& node, const std::string& command,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "invoke", "--node", node, "--tool", "exec", "--arg", "command=" + command, "--detach"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())))
      id.pop_back();
    return id;
  }
  nlohmann::json Command(const std::string& id) {
    auto r = Ctl({"command", "get", id, "--format", "json"});
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }
  // Waits for the command's result; returns the command (with "result") or null.
  nlohmann::json WaitResult(const std::string& id, std::chrono::seconds t = 60s) {
    nlohmann::json c;
    WaitUntil(
        [&] {
          c = Command(id);
          return c.is_object() && c.contains("result") && c["result"].is_object();
        },
        t);
    return c;
  }
  // The pid of the first live process whose command line (NULs turned into spaces, so it
  // ends with one) satisfies `match`, or 0.
  static pid_t FindProcess(const std::function<bool(const std::string& cmdline)>& match) {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = ReadText(e.path() / "cmdline");
      for (char& ch : cmdline)
        if (ch == '\0') ch = ' ';
      if (match(cmdline)) return static_cast<pid_t>(std::stol(name));
    }
    return 0;
  }
  // True when some live process other than the CLI has `marker` in its command line.
  static bool ProcessWithMarker(const std::string& marker) {
    return FindProcess([&](const std::string& cmdline) {
             return cmdline.find(marker) != std::string::npos &&
                    cmdline.find("edge-controller") == std::string::npos;
           }) != 0;
  }

  TempDir dir_;
  std::unique_ptr<ControllerFixture> ctl_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

}  // namespace edge::testing
