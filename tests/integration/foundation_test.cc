// The foundation through the real binaries: --help/--version, exit codes, config check,
// the controller's admin socket, the agent daemon's health and clean stops, log redaction.
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/integration/harness.h"
#include "tests/support/processes.h"

namespace edge::testing {
namespace {

using namespace std::chrono_literals;

std::string ControllerYaml(const TempDir& dir) {
  return "data_dir: " + dir.path() +
         "/ctl\n"
         "grpc:\n  listen: 127.0.0.1:0\n"
         "admin:\n  socket: " +
         dir.path() + "/ctl/admin.sock\n";
}

std::string AgentYaml(const TempDir& dir, const std::string& extra = "") {
  return "node_id: it-node-1\n"
         "data_dir: " +
         dir.path() + "/agent\n" + extra;
}

TEST(Cli, HelpListsTheSubcommandsOfBothBinaries) {
  auto a = RunCommand({AgentBin(), "--help"});
  EXPECT_EQ(a.exit_code, 0) << a.err;
  for (const char* cmd : {"run", "status", "config", "version", "--log-format", "--config"}) {
    EXPECT_NE(a.out.find(cmd), std::string::npos) << cmd << " missing from\n" << a.out;
  }
  auto c = RunCommand({ControllerBin(), "--help"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  for (const char* cmd : {"serve", "status", "config"}) {
    EXPECT_NE(c.out.find(cmd), std::string::npos) << cmd;
  }
  auto sub = RunCommand({AgentBin(), "config", "check", "--help"});
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_NE(sub.out.find("redacted"), std::string::npos) << sub.out;
}

TEST(Cli, VersionFlagAndSubcommandAgree) {
  auto flag = RunCommand({AgentBin(), "--version"});
  auto sub = RunCommand({AgentBin(), "version"});
  EXPECT_EQ(flag.exit_code, 0);
  EXPECT_EQ(sub.exit_code, 0);
  ASSERT_FALSE(flag.out.empty());
  EXPECT_NE(sub.out.find(flag.out.substr(0, flag.out.size() - 1)), std::string::npos);
  EXPECT_EQ(RunCommand({ControllerBin(), "--version"}).exit_code, 0);
}

TEST(Cli, UsageErrorsExitTwo) {
  auto none = RunCommand({AgentBin()});
  EXPECT_EQ(none.exit_code, 2);
  auto bogus = RunCommand({AgentBin(), "frobnicate"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("frobnicate"), std::string::npos) << bogus.err;
  auto bad_fmt = RunCommand({ControllerBin(), "status", "--format", "xml"});
  EXPECT_EQ(bad_fmt.exit_code, 2);
  auto bad_level = RunCommand({AgentBin(), "--log-level", "loud", "status"});
  EXPECT_EQ(bad_level.exit_code, 2);
}

TEST(ConfigCheck, ExampleFilesValidate) {
  auto a =
      RunCommand({AgentBin(), "config", "check", "--config", SourceDir() + "/config/agent.yaml"});
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("data_dir"), std::string::npos);
  auto c = RunCommand(
      {ControllerBin(), "config", "check", "--config", SourceDir() + "/config/controller.yaml"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
}

TEST(ConfigCheck, BadConfigExitsTwoNamingFileKeyAndValue) {
  TempDir dir;
  WriteText(dir / "agent.yaml", "node_id: it-node-1\nsandbox:\n  max_sandboxs: 3\n");
  auto r = RunCommand({AgentBin(), "config", "check", "--config", dir / "agent.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("agent.yaml:3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_sandboxs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_sandboxes"), std::string::npos) << "did you mean: " << r.err;
  auto missing = RunCommand({AgentBin(), "config", "check", "--config", dir / "nope.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.yaml"), std::string::npos) << missing.err;
}

TEST(ConfigCheck, SecretsAreRedactedInOutputAndLogs) {
  TempDir dir;
  const std::string secret = "eyJhbGciOiJFUzI1NiJ9.eyJqdGkiOiJzZWNyZXQtdG9rZW4tMTIzNDUifQ.c2ln";
  WriteText(
      dir / "agent.yaml",
      AgentYaml(dir, "controller:\n  address: 127.0.0.1:1\n  join_token: \"" + secret + "\"\n"));
  auto r = RunCommand(
      {AgentBin(), "--log-level", "trace", "config", "check", "--config", dir / "agent.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(secret), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find(secret), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[REDACTED]"), std::string::npos) << r.out;
}

class ControllerProcess {
 public:
  explicit ControllerProcess(const TempDir& dir) : dir_(dir) {
    WriteText(dir / "controller.yaml", ControllerYaml(dir));
    proc_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{ControllerBin(), "--config", dir / "controller.yaml", "serve"},
        dir.path());
  }
  CommandResult Status() {
    return RunCommand(
        {ControllerBin(), "--config", dir_ / "controller.yaml", "status", "--format", "json"}, {},
        10s);
  }
  ChildProcess& proc() { return *proc_; }

 private:
  const TempDir& dir_;
  std::unique_ptr<ChildProcess> proc_;
};

TEST(Controller, ServesStatusOnAnOwnerOnlySocketAndStopsCleanly) {
  TempDir dir;
  ControllerProcess ctl(dir);
  ASSERT_TRUE(WaitUntil([&] { return ctl.Status().exit_code == 0; }, 20s)) << ctl.proc().Stderr();
  auto status = nlohmann::json::parse(ctl.Status().out);
  EXPECT_EQ(status["status"], "ok");
  EXPECT_EQ(status["data_dir"], dir.path() + "/ctl");

  struct stat st {};
  ASSERT_EQ(::lstat((dir.path() + "/ctl/admin.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the admin socket must be owner-only";

  ctl.proc().Signal(SIGTERM);
  auto rc = ctl.proc().Wait(10s);
  ASSERT_TRUE(rc.has_value()) << "controller did not stop within 10 s of SIGTERM";
  EXPECT_EQ(*rc, 0) << ctl.proc().Stderr();
  EXPECT_NE(::lstat((dir.path() + "/ctl/admin.sock").c_str(), &st), 0) << "socket left behind";
}

TEST(Controller, StatusWithoutAControllerFailsWithExitOne) {
  TempDir dir;
  WriteText(dir / "controller.yaml", ControllerYaml(dir));
  auto r = RunCommand({ControllerBin(), "--config", dir / "controller.yaml", "status"}, {}, 20s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("admin.sock"), std::string::npos) << r.err;
}

TEST(Controller, RefusesToReplaceANonSocketFile) {
  TempDir dir;
  ::mkdir((dir.path() + "/ctl").c_str(), 0700);
  WriteText(dir / "ctl/admin.sock", "not a socket");
  WriteText(dir / "controller.yaml", ControllerYaml(dir));
  auto r = RunCommand({ControllerBin(), "--config", dir / "controller.yaml", "serve"}, {}, 20s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a socket"), std::string::npos) << r.err;
  EXPECT_EQ(ReadText(dir / "ctl/admin.sock"), "not a socket");
}

TEST(Agent, RunsHealthyAndStopsOnSigterm) {
  TempDir dir;
  WriteText(dir / "agent.yaml", AgentYaml(dir));
  ChildProcess agent({AgentBin(), "--config", dir / "agent.yaml", "--log-format", "json", "run"},
                     dir.path());
  auto status = [&] {
    return RunCommand({AgentBin(), "--config", dir / "agent.yaml", "status", "--format", "json"});
  };
  ASSERT_TRUE(WaitUntil([&] { return status().exit_code == 0; }, 20s)) << agent.Stderr();
  auto j = nlohmann::json::parse(status().out);
  EXPECT_EQ(j["healthy"], true);
  EXPECT_EQ(j["node_id"], "it-node-1");
  EXPECT_EQ(j["pid"], agent.pid());

  agent.Signal(SIGTERM);
  auto rc = agent.Wait(10s);
  ASSERT_TRUE(rc.has_value()) << "agent did not stop within 10 s of SIGTERM";
  EXPECT_EQ(*rc, 0);
  // Every log line is one JSON object.
  std::istringstream lines(agent.Stderr());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
    ++n;
  }
  EXPECT_GT(n, 0);
  auto after = status();
  EXPECT_EQ(after.exit_code, 1) << "a stopped agent must not report healthy";
}

// sandbox.io_threads (issue 14): the executor's event loop runs on that many threads, named
// edge-io, one when the file says nothing.
TEST(Agent, RunsItsEventLoopOnTheConfiguredNumberOfThreads) {
  for (const auto& [extra, want] :
       std::vector<std::pair<std::string, int>>{{"", 1}, {"sandbox:\n  io_threads: 3\n", 3}}) {
    TempDir dir;
    WriteText(dir / "agent.yaml", AgentYaml(dir, extra));
    ChildProcess agent({AgentBin(), "--config", dir / "agent.yaml", "run"}, dir.path());
    ASSERT_TRUE(WaitUntil(
        [&] {
          return RunCommand({AgentBin(), "--config", dir / "agent.yaml", "status"}).exit_code == 0;
        },
        20s))
        << agent.Stderr();
    EXPECT_EQ(ThreadsNamed("edge-io", agent.pid()), want) << extra;
    EXPECT_NE(agent.Stderr().find(std::to_string(want) + " I/O threads"), std::string::npos)
        << agent.Stderr();
    agent.Signal(SIGTERM);
    ASSERT_TRUE(agent.Wait(10s).has_value());
  }
}

}  // namespace
}  // namespace edge::testing
