// Faults through the real binaries (issue 16): whatever dies — the agent mid-command, the
// node's stream under a waiting `invoke`, the controller before the node read a command —
// every command ends with exactly one terminal result, and the operator is told what
// happened with an exit code of its own.
#include <signal.h>

#include "tests/integration/edge_fixture.h"

namespace edge::testing {
namespace {

using json = nlohmann::json;

class FaultTest : public EdgeFixture {
 protected:
  // `edge-controller invoke` left running in the background (its output in files).
  std::unique_ptr<ChildProcess> InvokeInBackground(const std::string& node,
                                                   const std::string& command,
                                                   const std::string& wait) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{ControllerBin(), "--config", ctl_->config_path(), "invoke",
                                 "--node", node, "--tool", "exec", "--arg", "command=" + command,
                                 "--wait", wait},
        dir_.path());
  }
  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1))
      ++n;
    return n;
  }
};

// kill -9 of the agent while a command runs; the agent starts again: the leftover process
// group is killed and the command ends once with AGENT_RESTARTED naming it.
TEST_F(FaultTest, AnAgentKilledMidCommandEndsItWithAgentRestarted) {
  auto& agent = EnrollAndStart();
  const std::string started = dir_ / "started.log";
  const std::string id =
      Detach("edge-01", "echo started >> " + started + "; sleep 271 & sleep 271");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitUntil([] { return ProcessWithMarker("sleep 271"); })) << agent.Stderr();
  agent.Signal(SIGKILL);
  ASSERT_TRUE(agent.Wait(10s).has_value());
  ASSERT_TRUE(WaitConnected("edge-01", false));
  EXPECT_EQ(Command(id).value("state", ""), "dispatched");

  auto& again = StartAgent();
  json cmd = WaitResult(id);
  ASSERT_TRUE(cmd.is_object()) << again.Stderr();
  const json& r = cmd["result"];
  EXPECT_EQ(r.value("outcome", ""), "error") << cmd.dump();
  EXPECT_EQ(r.value("code", ""), "AGENT_RESTARTED") << cmd.dump();
  const std::string message = r.value("message", "");
  EXPECT_NE(message.find("command " + id + " (tool exec, admitted at "), std::string::npos)
      << message;
  EXPECT_NE(message.find("process group"), std::string::npos) << message;
  EXPECT_FALSE(ProcessWithMarker("sleep 271")) << "no survivor of the killed agent";
  // Exactly one result: the controller's resend on the reconnect was answered from the
  // stored result, not run again.
  EXPECT_EQ(ReadText(started), "started\n");
  EXPECT_TRUE(WaitUntil([&] {
    return Count(again.Stderr(), "command " + id + " already ran") == 1;
  })) << again.Stderr();
  EXPECT_EQ(json::parse(Ctl({"commands", "--format", "json"}).out).size(), 1u);
}

// `invoke` on a node that drops: it says so and, when the node is not back within --wait,
// exits 75 (result unknown) — not 124, nothing timed out. When it comes back in time, the
// invoke ends with the command's one result.
TEST_F(FaultTest, InvokeOnANodeThatDropsSaysSoAndWaitsAsLongAsItIsTold) {
  auto& agent = EnrollAndStart();
  auto short_wait = InvokeInBackground("edge-01", "sleep 272", "2s");
  ASSERT_TRUE(WaitUntil([] { return ProcessWithMarker("sleep 272"); })) << short_wait->Stderr();
  agent.Signal(SIGKILL);
  ASSERT_TRUE(agent.Wait(10s).has_value());
  auto code = short_wait->Wait(30s);
  ASSERT_TRUE(code.has_value()) << "invoke did not leave";
  EXPECT_EQ(*code, 75) << short_wait->Stderr();
  EXPECT_NE(short_wait->Stderr().find("disconnected"), std::string::npos) << short_wait->Stderr();
  EXPECT_NE(short_wait->Stderr().find("did not come back within 2s (--wait)"), std::string::npos)
      << short_wait->Stderr();

  // The node comes back within --wait: the invoke ends with AGENT_RESTARTED, exit 1.
  auto& second = StartAgent();
  ASSERT_TRUE(WaitConnected("edge-01", true)) << second.Stderr();
  auto long_wait = InvokeInBackground("edge-01", "sleep 273", "60s");
  ASSERT_TRUE(WaitUntil([] { return ProcessWithMarker("sleep 273"); })) << long_wait->Stderr();
  second.Signal(SIGKILL);
  ASSERT_TRUE(second.Wait(10s).has_value());
  ASSERT_TRUE(
      WaitUntil([&] { return long_wait->Stderr().find("disconnected") != std::string::npos; }));
  auto& third = StartAgent();
  code = long_wait->Wait(60s);
  ASSERT_TRUE(code.has_value()) << third.Stderr();
  EXPECT_EQ(*code, 1) << long_wait->Stderr();
  EXPECT_NE(long_wait->Stderr().find("AGENT_RESTARTED"), std::string::npos) << long_wait->Stderr();
  EXPECT_NE(long_wait->Stderr().find("reconnected"), std::string::npos) << long_wait->Stderr();
}

// The controller persisted and sent a command the node never read (it was stopped), then
// both died. After both restart, the controller sends it again and it runs exactly once.
TEST_F(FaultTest, ACommandNeverReadIsSentAgainAfterTheControllerRestarts) {
  auto& agent = EnrollAndStart();
  const std::string ran = dir_ / "ran.log";
  agent.Signal(SIGSTOP);
  const std::string id = Detach("edge-01", "echo ran-once >> " + ran + "; echo out-once");
  ASSERT_FALSE(id.empty());
  ctl_->Kill();
  agent.Signal(SIGKILL);
  ASSERT_TRUE(agent.Wait(10s).has_value());
  ctl_->Restart();
  EXPECT_EQ(Command(id).value("state", ""), "dispatched");

  auto& again = StartAgent();
  json cmd = WaitResult(id);
  ASSERT_TRUE(cmd.is_object()) << again.Stderr();
  EXPECT_EQ(cmd["result"].value("outcome", ""), "ok") << cmd.dump();
  EXPECT_NE(cmd.dump().find("out-once"), std::string::npos) << cmd.dump();
  EXPECT_EQ(ReadText(ran), "ran-once\n");
}

}  // namespace
}  // namespace edge::testing
