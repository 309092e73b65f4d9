// The edge-controller operator CLI (the binary, run as a child process) against an
// in-process controller and a hand-driven node: invoke streams output and exits with the
// tool's exit code (timed out 124, cancelled 130, error 1, node not connected 69, output
// cut by the node's cap 74), --arg values are typed as documented, --detach prints only the
// id, --format json, and the command listings.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <google/protobuf/util/json_util.h>

#include <future>

#include <nlohmann/json.hpp>

#include "tests/support/build_paths.h"
#include "tests/unit/controller/edge_test_support.h"

extern char** environ;

namespace edge::controller::testing {
namespace {

const std::string kSid = "6f1c1c1e-0000-4000-8000-0000000000c1";
using json = nlohmann::json;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

class EdgeCliTest : public ControllerHarness {
 protected:
  void SetUp() override {
    ControllerHarness::SetUp();
    config_ = dir_ + "/controller.yaml";
    ASSERT_TRUE(WriteFileAtomic(
        config_, "data_dir: " + dir_ + "/data\nadmin:\n  socket: " + dir_ + "/admin.sock\n",
        {.mode = 0600}));
  }
  void Connect() {
    node_ = EnrolledNode("edge-01");
    stream_ = node_->Open(node_->token);
    ASSERT_TRUE(stream_->Write(node_->Hello(kSid)));
    ASSERT_TRUE(WaitConnected("edge-01"));
  }
  // Runs `edge-controller --config <ours> args…`, capturing stdout and stderr.
  CliResult Cli(std::vector<std::string> args) {
    const std::string out = dir_ + "/cli.out", err = dir_ + "/cli.err";
    std::vector<std::string> argv = {edge::testing::BinDir() + "/edge-controller", "--config",
                                     config_};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv)
      cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    CliResult r;
    if (rc != 0) return r;
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadFile(out, 1 << 20).value_or("");
    r.err = ReadFile(err, 1 << 20).value_or("");
    return r;
  }
  // Runs the CLI while the node answers the InvokeTool it receives with `answer`.
  CliResult InvokeAnswered(std::vector<std::string> args,
                           const std::function<void(const pb::InvokeTool&)>& answer) {
    auto cli = std::async(std::launch::async, [&] { return Cli(args); });
    auto cmd = stream_->Next(20s);
    EXPECT_TRUE(cmd && cmd->has_invoke_tool());
    if (cmd && cmd->has_invoke_tool()) answer(cmd->invoke_tool());
    return cli.get();
  }
  void SendResult(const std::string& id, const pb::EdgeResult& result) {
    pb::EdgeEvent e;
    e.mutable_command_result()->set_command_id(id);
    *e.mutable_command_result()->mutable_result() = result;
    ASSERT_TRUE(stream_->Write(node_->Sealed(e, kSid)));
  }
  void SendChunk(const std::string& id, const std::string& text, bool to_stderr) {
    pb::EdgeEvent e;
    e.mutable_command_progress()->set_command_id(id);
    auto* chunk = e.mutable_command_progress()->mutable_chunk();
    to_stderr ? chunk->set_stderr(text) : chunk->set_stdout(text);
    ASSERT_TRUE(stream_->Write(node_->Sealed(e, kSid)));
  }
  static pb::EdgeResult Ok(int exit_code, const std::string& payload_json = "") {
    pb::EdgeResult r;
    r.mutable_ok()->set_exit_code(exit_code);
    if (!payload_json.empty()) {
      google::protobuf::Struct st;
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(payload_json, &st).ok());
      r.mutable_ok()->mutable_payload()->PackFrom(st);
    }
    return r;
  }

  std::string config_;
  std::unique_ptr<TestNode> node_;
  std::unique_ptr<TestStream> stream_;
};

TEST_F(EdgeCliTest, InvokeStreamsOutputTypesArgsAndExitsWithTheToolsCode) {
  Connect();
  pb::InvokeTool seen;
  auto r =
      InvokeAnswered({"invoke",
                      "--node",
                      "edge-01",
                      "--tool",
                      "exec",
                      "--arg",
                      "command=echo hi",
                      "--arg",
                      "n=3",
                      "--arg",
                      "flag=true",
                      "--arg",
                      "list=[1,\"a\"]",
                      "--arg",
                      R"(obj={"k":1})",
                      "--arg",
                      R"(quoted="42")",
                      "--arg",
                      "nul=null",
                      "--arg",
                      "eq=a=b",
                      "--context",
                      "ops",
                      "--deadline",
                      "1m30s"},
                     [&](const pb::InvokeTool& inv) {
                       seen = inv;
                       SendChunk(inv.command_id(), "hel", false);
                       SendChunk(inv.command_id(), "careful\n", true);
                       SendChunk(inv.command_id(), "lo\n", false);
                       SendResult(inv.command_id(), Ok(3, R"({"exit_code":3,"stdout":"hello\n"})"));
                     });
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(r.out, "hello\n") << "streamed output only; the payload's copy is not repeated";
  EXPECT_EQ(r.err, "careful\n");
  const auto& f = seen.args().fields();
  EXPECT_EQ(f.at("command").string_value(), "echo hi");
  EXPECT_EQ(f.at("n").number_value(), 3);
  EXPECT_TRUE(f.at("flag").bool_value());
  EXPECT_EQ(f.at("list").list_value().values(1).string_value(), "a");
  EXPECT_EQ(f.at("obj").struct_value().fields().at("k").number_value(), 1);
  EXPECT_EQ(f.at("quoted").string_value(), "42");
  EXPECT_EQ(f.at("nul").string_value(), "null");
  EXPECT_EQ(f.at("eq").string_value(), "a=b");
  EXPECT_EQ(seen.security_context_name(), "ops");
  EXPECT_EQ(seen.deadline().seconds(), 90);
}

TEST_F(EdgeCliTest, OutcomesMapToDocumentedExitCodes) {
  Connect();
  auto timed_out = InvokeAnswered({"invoke", "--node", "edge-01", "--tool", "exec", "--arg",
                                   "command=sleep 9", "--deadline", "1s"},
                                  [&](const pb::InvokeTool& inv) {
                                    pb::EdgeResult r;
                                    r.mutable_timed_out()->mutable_deadline()->set_seconds(1);
                                    SendResult(inv.command_id(), r);
                                  });
  EXPECT_EQ(timed_out.exit_code, 124) << timed_out.err;
  EXPECT_NE(timed_out.err.find("timed out after 1s"), std::string::npos) << timed_out.err;

  auto cancelled = InvokeAnswered({"invoke", "--node", "edge-01", "--tool", "exec"},
                                  [&](const pb::InvokeTool& inv) {
                                    pb::EdgeResult r;
                                    r.mutable_cancelled()->set_reason("operator said so");
                                    SendResult(inv.command_id(), r);
                                  });
  EXPECT_EQ(cancelled.exit_code, 130);
  EXPECT_NE(cancelled.err.find("operator said so"), std::string::npos) << cancelled.err;

  auto error = InvokeAnswered({"invoke", "--node", "edge-01", "--tool", "exec"},
                              [&](const pb::InvokeTool& inv) {
                                pb::EdgeResult r;
                                r.mutable_err()->set_code("DRAINING");
                                r.mutable_err()->set_message("the agent is draining");
                                SendResult(inv.command_id(), r);
                              });
  EXPECT_EQ(error.exit_code, 1);
  EXPECT_NE(error.err.find("error: DRAINING: the agent is draining"), std::string::npos)
      << error.err;

  // A tool whose payload is the answer: printed as JSON.
  auto sysinfo = InvokeAnswered(
      {"invoke", "--node", "edge-01", "--tool", "sysinfo"},
      [&](const pb::InvokeTool& inv) { SendResult(inv.command_id(), Ok(0, R"({"os":"linux"})")); });
  EXPECT_EQ(sysinfo.exit_code, 0);
  EXPECT_EQ(json::parse(sysinfo.out), json({{"os", "linux"}})) << sysinfo.out;

  // --format json: one object at the end.
  auto as_json =
      InvokeAnswered({"invoke", "--node", "edge-01", "--tool", "exec", "--format", "json"},
                     [&](const pb::InvokeTool& inv) {
                       SendChunk(inv.command_id(), "out", false);
                       SendResult(inv.command_id(), Ok(0, R"({"stdout":"out"})"));
                     });
  EXPECT_EQ(as_json.exit_code, 0) << as_json.err;
  auto j = json::parse(as_json.out);
  EXPECT_EQ(j["stdout"], "out");
  EXPECT_EQ(j["output_complete"], true) << "nothing was dropped for this client";
  EXPECT_EQ(j["result"]["outcome"], "ok");
  EXPECT_EQ(j["result"]["payload"]["stdout"], "out");
  EXPECT_EQ(j["command_id"].get<std::string>().size(), 36u);
}

TEST_F(EdgeCliTest, OnlyTheNodesOutputCapMakesAStreamedExecIncomplete) {
  Connect();
  // The 64 KiB tail cut of a streamed exec's result (output_truncated alone) loses nothing:
  // every byte went out as chunks.
  auto tail_cut = InvokeAnswered(
      {"invoke", "--node", "edge-01", "--tool", "exec"}, [&](const pb::InvokeTool& inv) {
        SendChunk(inv.command_id(), "all of it\n", false);
        SendResult(inv.command_id(),
                   Ok(0, R"({"exit_code":0,"stdout":"it\n","output_truncated":true})"));
      });
  EXPECT_EQ(tail_cut.exit_code, 0) << tail_cut.err;
  EXPECT_EQ(tail_cut.out, "all of it\n");
  EXPECT_EQ(tail_cut.err, "");
  // The node's cap dropped the rest: the note, the loss, exit 74.
  const std::string capped =
      R"({"exit_code":0,"stdout":"x","output_truncated":true,"output_capped":true,)"
      R"("output_cap_bytes":2097152,"output_cap_key":"sandbox.max_output_bytes"})";
  auto r = InvokeAnswered({"invoke", "--node", "edge-01", "--tool", "exec"},
                          [&](const pb::InvokeTool& inv) {
                            SendChunk(inv.command_id(), "x", false);
                            SendResult(inv.command_id(), Ok(0, capped));
                          });
  EXPECT_EQ(r.exit_code, 74) << r.err;
  EXPECT_EQ(r.out, "x");
  EXPECT_NE(r.err.find("note: node edge-01 reached its output cap of 2MiB "
                       "(sandbox.max_output_bytes) and dropped the rest of command "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("the rest is lost"), std::string::npos) << r.err;
  auto j = InvokeAnswered(
      {"invoke", "--node", "edge-01", "--tool", "exec", "--format", "json"},
      [&](const pb::InvokeTool& inv) { SendResult(inv.command_id(), Ok(0, capped)); });
  EXPECT_EQ(j.exit_code, 74) << j.err;
  EXPECT_EQ(json::parse(j.out)["output_complete"], false) << j.out;
}

TEST_F(EdgeCliTest, NodeProblemsAndBadArguments) {
  auto unknown = Cli({"invoke", "--node", "nope", "--tool", "exec"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("NOT_FOUND: node nope not found"), std::string::npos) << unknown.err;

  node_ = EnrolledNode("edge-01");  // enrolled, not connected
  auto offline = Cli({"invoke", "--node", "edge-01", "--tool", "exec"});
  EXPECT_EQ(offline.exit_code, 69);
  EXPECT_NE(offline.err.find("node edge-01 is not connected"), std::string::npos) << offline.err;
  auto drain = Cli({"drain", "--node", "edge-01"});
  EXPECT_EQ(drain.exit_code, 69) << drain.err;

  EXPECT_EQ(Cli({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "novalue"}).exit_code,
            2);
  EXPECT_EQ(Cli({"invoke", "--node", "edge-01", "--tool", "exec", "--args-json", "[1]"}).exit_code,
            2);
  EXPECT_EQ(Cli({"invoke", "--node", "edge-01", "--tool", "exec", "--deadline", "soon"}).exit_code,
            2);

  // No controller behind the socket.
  controller_.reset();
  auto down = Cli({"invoke", "--node", "edge-01", "--tool", "exec"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.err.find("controller not reachable"), std::string::npos) << down.err;
}

TEST_F(EdgeCliTest, DetachCommandsAndCommandGet) {
  Connect();
  auto detach = Cli(
      {"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo done", "--detach"});
  ASSERT_EQ(detach.exit_code, 0) << detach.err;
  ASSERT_EQ(detach.out.size(), 37u) << "only the id and a newline: " << detach.out;
  const std::string id = detach.out.substr(0, 36);
  auto cmd = stream_->Next();
  ASSERT_TRUE(cmd);
  EXPECT_EQ(cmd->invoke_tool().command_id(), id);

  auto get = Cli({"command", "get", id, "--format", "json"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  auto j = json::parse(get.out);
  EXPECT_EQ(j["state"], "dispatched");
  EXPECT_FALSE(j.contains("result")) << "no result before it completes";
  EXPECT_EQ(j["args"], json({{"command", "echo done"}}));

  SendResult(id, Ok(0, R"({"stdout":"done\n"})"));
  ASSERT_TRUE(WaitFor([&] {
    auto g = Cli({"command", "get", id, "--format", "json"});
    return g.exit_code == 0 && json::parse(g.out).contains("result");
  }));
  auto list = Cli({"commands", "--node", "edge-01", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto arr = json::parse(list.out);
  ASSERT_EQ(arr.size(), 1u);
  EXPECT_EQ(arr[0]["command_id"], id);
  EXPECT_EQ(arr[0]["result"]["outcome"], "ok");
  EXPECT_EQ(arr[0]["result"]["payload"]["stdout"], "done\n");
  auto text = Cli({"command", "get", id});
  EXPECT_NE(text.out.find("outcome:   ok"), std::string::npos) << text.out;
  EXPECT_EQ(Cli({"command", "get", "nope"}).exit_code, 1);

  auto nodes = Cli({"nodes", "--format", "json"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  auto n = json::parse(nodes.out).at(0);
  EXPECT_EQ(n["node_id"], "edge-01");
  EXPECT_EQ(n["connected"], true);
  EXPECT_EQ(n["state"], "healthy");
  EXPECT_TRUE(n["last_heartbeat"].is_string());
  EXPECT_EQ(n["capabilities"]["os"], "linux");
}

TEST_F(EdgeCliTest, NodeCommandsReachTheNode) {
  Connect();
  auto cancel = Cli({"cancel", "--command", "nope"});
  EXPECT_EQ(cancel.exit_code, 1);
  EXPECT_NE(cancel.err.find("NOT_FOUND"), std::string::npos) << cancel.err;

  ASSERT_EQ(Cli({"drain", "--node", "edge-01"}).exit_code, 0);
  EXPECT_TRUE(stream_->Next()->has_drain());
  ASSERT_EQ(Cli({"shutdown", "--node", "edge-01", "--grace", "3s"}).exit_code, 0);
  auto shut = stream_->Next();
  ASSERT_TRUE(shut && shut->has_shutdown());
  EXPECT_EQ(shut->shutdown().grace().seconds(), 3);

  const std::string delta = dir_ + "/delta.yaml";
  ASSERT_TRUE(WriteFileAtomic(delta, "cluster:\n  heartbeat_interval_secs: 1\n", {.mode = 0600}));
  auto push = Cli({"push-config", "--node", "edge-01", delta, "--version", "v2"});
  ASSERT_EQ(push.exit_code, 0) << push.err;
  auto pc = stream_->Next();
  ASSERT_TRUE(pc && pc->has_push_config());
  EXPECT_EQ(pc->push_config().version(), "v2");
  ASSERT_TRUE(
      WriteFileAtomic(delta, "cluster:\n  heartbeat_interval_secs: zero\n", {.mode = 0600}));
  auto bad = Cli({"push-config", "--node", "edge-01", delta});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("heartbeat_interval_secs"), std::string::npos) << bad.err;
  EXPECT_EQ(Cli({"push-config", "--node", "edge-01", dir_ + "/missing.yaml"}).exit_code, 2);
}

}  // namespace
}  // namespace edge::controller::testing
