// Interactive sessions on the edge stream (wire.md §5.5, issue 12) through the real binaries:
// an agent configured with an interactive tool advertises it; the controller starts it with
// an ordinary InvokeTool session.start (a long-running command whose output streams back),
// feeds it lines with session.input, signals it with session.signal, and cancelling the
// session.start command kills the session's processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "tests/integration/edge_fixture.h"

namespace edge::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class SessionIntegrationTest : public EdgeFixture {
 protected:
  // The marker names this test's session processes in /proc.
  const std::string marker_ = "edge-it-session-" + std::to_string(::getpid());

  std::string AgentYaml() const {
    return "tools:\n"
           "  echoer:\n"
           "    command: [\"sh\", \"-c\", \"while read l; do echo \\\"got:$l\\\"; done # " +
           marker_ +
           "\"]\n"
           "    interactive: true\n";
  }
  CommandResult Invoke(const std::string& tool, std::vector<std::string> args) {
    std::vector<std::string> argv = {"invoke", "--node", "edge-01", "--tool", tool};
    for (auto& a : args) {
      argv.push_back("--arg");
      argv.push_back(std::move(a));
    }
    return Ctl(argv);
  }
};

TEST_F(SessionIntegrationTest, StartInputOutputSignalAndCancelThroughTheController) {
  EnrollAndStart("edge-01", AgentYaml());

  // The node says which of its tools can be a session's agent_name.
  json node = Node("edge-01");
  EXPECT_EQ(node["capabilities"]["labels"].value("agent.interactive_tools", ""), "echoer")
      << node.dump();
  const json tools = node["capabilities"]["tools"];
  for (const char* t :
       {"echoer", "session.start", "session.input", "session.signal", "file.search"}) {
    EXPECT_NE(std::find(tools.begin(), tools.end(), t), tools.end()) << t << " " << tools.dump();
  }
  // An interactive tool is never run by its own name.
  auto direct = Invoke("echoer", {});
  EXPECT_NE(direct.exit_code, 0);
  EXPECT_NE((direct.out + direct.err).find("INVALID_ARGUMENT"), std::string::npos)
      << direct.out << direct.err;
  EXPECT_NE((direct.out + direct.err).find("interactive"), std::string::npos) << direct.err;

  // session.start: a long-running command; the CLI streams its output as it comes.
  ChildProcess session(
      {ControllerBin(), "--config", ctl_->config_path(), "invoke", "--node", "edge-01", "--tool",
       "session.start", "--arg", "session_id=it-session-a", "--arg", "agent_name=echoer"},
      dir_.path());
  ASSERT_TRUE(WaitUntil([&] { return ProcessWithMarker(marker_); }, 30s))
      << "the session's process never started: " << session.Stderr();

  auto in = Invoke("session.input", {"session_id=it-session-a", "line=hello from the controller"});
  ASSERT_EQ(in.exit_code, 0) << in.out << in.err;
  EXPECT_TRUE(WaitUntil(
      [&] { return session.Stdout().find("got:hello from the controller\n") != std::string::npos; },
      30s))
      << "streamed so far: " << session.Stdout() << session.Stderr();
  ASSERT_EQ(Invoke("session.input", {"session_id=it-session-a", "line=second line"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil(
      [&] { return session.Stdout().find("got:second line\n") != std::string::npos; }, 30s))
      << session.Stdout();

  // A second start with the same id is refused; an unknown session is NOT_FOUND.
  auto dup = Invoke("session.start", {"session_id=it-session-a", "agent_name=echoer"});
  EXPECT_NE((dup.out + dup.err).find("ALREADY_EXISTS"), std::string::npos) << dup.out << dup.err;
  auto unknown = Invoke("session.input", {"session_id=no-such-session", "line=x"});
  EXPECT_NE((unknown.out + unknown.err).find("NOT_FOUND"), std::string::npos)
      << unknown.out << unknown.err;

  // TERM ends the session: the session.start command gets its one terminal result.
  auto sig = Invoke("session.signal", {"session_id=it-session-a", "signal=TERM"});
  ASSERT_EQ(sig.exit_code, 0) << sig.out << sig.err;
  ASSERT_TRUE(session.Wait(30s).has_value()) << "the session.start invoke did not end";
  // The one that ran (the duplicate start was refused).
  auto list = json::parse(Ctl({"commands", "--node", "edge-01", "--format", "json"}).out);
  json ran;
  for (const auto& c : list) {
    if (c.value("tool", "") == "session.start" && c.contains("result") &&
        c["result"].value("outcome", "") == "ok") {
      ran = c;
    }
  }
  ASSERT_TRUE(ran.is_object()) << list.dump();
  EXPECT_EQ(ran["result"]["payload"].value("signal", 0), SIGTERM) << ran.dump();
  EXPECT_EQ(ran["result"]["payload"].value("session_id", ""), "it-session-a") << ran.dump();
  EXPECT_NE(ran["result"]["payload"].value("stdout", "").find("got:second line"), std::string::npos)
      << ran.dump();
  EXPECT_TRUE(WaitUntil([&] { return !ProcessWithMarker(marker_); }, 20s));
  auto late = Invoke("session.input", {"session_id=it-session-a", "line=too late"});
  EXPECT_NE((late.out + late.err).find("NOT_FOUND"), std::string::npos) << late.out << late.err;

  // Cancelling a session.start command ends its session and kills its processes.
  auto detached = Ctl({"invoke", "--node", "edge-01", "--tool", "session.start", "--arg",
                       "session_id=it-session-b", "--arg", "agent_name=echoer", "--detach"});
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  std::string id = detached.out;
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())))
    id.pop_back();
  ASSERT_TRUE(WaitUntil([&] { return ProcessWithMarker(marker_); }, 30s));
  auto c = Ctl({"cancel", "--command", id, "--reason", "operator closed the session"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  json ended = WaitResult(id, 30s);
  ASSERT_TRUE(ended.is_object()) << "no result after cancel";
  EXPECT_EQ(ended["result"].value("outcome", ""), "cancelled") << ended.dump();
  EXPECT_TRUE(WaitUntil([&] { return !ProcessWithMarker(marker_); }, 20s))
      << "the session's process outlived its cancel";
}

}  // namespace
}  // namespace edge::testing
