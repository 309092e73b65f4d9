// Sessions in the executor (wire.md §5.5, issue 12): session.start runs an interactive config
// tool as one process with a persistent stdin; session.input writes lines to it,
// session.signal signals its group; the executor owns the session table and its cap. Also
// file.search through the executor, and ProcessControl's bounded queue on its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "sandbox/executor.h"
#include "sandbox/process_control.h"
#include "tests/support/manual_clock.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

// What a session printed, with a wait for a piece of text (an event: the sink notifies).
class OutputWatch {
 public:
  ChunkSink Sink() {
    return [this](OutputChunk c, std::function<void()> ack) {
      {
        std::lock_guard lock(mu_);
        text_ += c.data;
      }
      cv_.notify_all();
      ack();
    };
  }
  bool WaitFor(const std::string& piece, milliseconds timeout = 30s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return text_.find(piece) != std::string::npos; });
  }
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    io_thread_ = std::thread([this] { io_.run(); });
    options_.data_dir = dir_ + "/data";
    options_.own_id = "node-1";
    options_.kill_grace = 200ms;
    options_.pids_cgroup_root = "";
    options_.max_sessions = 2;
    options_.security_contexts["default"] = SecurityContextConfig{{"*"}, "", {}, {}};
    options_.security_contexts["no-sessions"] =
        SecurityContextConfig{{"echoer", "file.*"}, "", {}, {}};
    // The shape of a session's process: reads lines, answers each.
    options_.tools["echoer"] = Interactive(
        {"sh", "-c", "echo \"pgid:$$ cwd:$(pwd)\"; while read l; do echo \"got:$l\"; done"});
    options_.tools["say"] = ToolConfig{{"/bin/echo", "{msg}"}, 0s, "", false};
  }
  void TearDown() override {
    ex_.reset();
    work_.reset();
    io_.stop();
    io_thread_.join();
  }
  static ToolConfig Interactive(std::vector<std::string> argv) {
    return ToolConfig{std::move(argv), 0s, "", true};
  }
  void Open() {
    auto ex = Executor::Open(io_, clock_, options_);
    ASSERT_TRUE(ex.has_value()) << ex.error().ToString();
    ex_ = std::move(*ex);
  }
  std::future<InvokeResult> Start(InvokeRequest req, ChunkSink sink = {}) {
    auto p = std::make_shared<std::promise<InvokeResult>>();
    auto f = p->get_future();
    ex_->Invoke(std::move(req), {}, std::move(sink),
                [p](InvokeResult r) { p->set_value(std::move(r)); });
    return f;
  }
  InvokeResult Call(InvokeRequest req) {
    auto f = Start(std::move(req));
    EXPECT_EQ(f.wait_for(60s), std::future_status::ready);
    return f.get();
  }
  static InvokeRequest Tool(std::string tool, json args, std::string id = "") {
    InvokeRequest r;
    r.command_id = std::move(id);
    r.tool = std::move(tool);
    r.args = std::move(args);
    return r;
  }
  static InvokeRequest StartReq(const std::string& session, const std::string& agent = "echoer",
                                const std::string& command_id = "") {
    return Tool("session.start", {{"session_id", session}, {"agent_name", agent}},
                command_id.empty() ? "start-" + session : command_id);
  }
  InvokeResult Input(const std::string& session, const std::string& line) {
    return Call(Tool("session.input", {{"session_id", session}, {"line", line}}));
  }
  InvokeResult Signal(const std::string& session, const std::string& sig) {
    return Call(Tool("session.signal", {{"session_id", session}, {"signal", sig}}));
  }
  // The session's process group, from the first line it prints.
  static pid_t Pgid(const OutputWatch& out) {
    const std::string t = out.text();
    auto at = t.find("pgid:");
    return at == std::string::npos ? 0 : static_cast<pid_t>(std::stol(t.substr(at + 5)));
  }

  edge::testing::TempDir tmp_{"session"};
  std::string dir_ = tmp_.path();
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::thread io_thread_;
  ManualClock clock_;
  ExecutorOptions options_;
  std::unique_ptr<Executor> ex_;
};

void ExpectError(const InvokeResult& r, ErrorCode code, const std::string& words) {
  EXPECT_EQ(r.outcome, Outcome::kError);
  EXPECT_EQ(r.error.code, code) << r.error.ToString();
  EXPECT_NE(r.error.message.find(words), std::string::npos) << r.error.message;
}

TEST_F(SessionTest, InputReachesTheProcessItsOutputStreamsAndTermEndsIt) {
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-1"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:")) << out.text();
  EXPECT_EQ(ex_->Sessions(), std::vector<std::string>{"s-1"});

  InvokeResult in = Input("s-1", "hello world");
  ASSERT_EQ(in.outcome, Outcome::kOk) << in.error.ToString();
  EXPECT_EQ(in.payload["session_id"], "s-1");
  EXPECT_EQ(in.payload["bytes"], 12);  // the line and the newline the agent adds
  ASSERT_TRUE(out.WaitFor("got:hello world\n")) << out.text();
  ASSERT_EQ(Input("s-1", "second").outcome, Outcome::kOk);
  ASSERT_TRUE(out.WaitFor("got:second\n")) << out.text();
  EXPECT_EQ(session.wait_for(0s), std::future_status::timeout) << "the session keeps running";

  InvokeResult sig = Signal("s-1", "TERM");
  ASSERT_EQ(sig.outcome, Outcome::kOk) << sig.error.ToString();
  EXPECT_EQ(sig.payload["signal"], "TERM");
  ASSERT_EQ(session.wait_for(30s), std::future_status::ready) << "TERM ends the session";
  InvokeResult r = session.get();
  EXPECT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();  // it ended on its own terms
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.payload["session_id"], "s-1");
  EXPECT_EQ(r.payload["agent_name"], "echoer");
  EXPECT_NE(r.payload["stdout"].get<std::string>().find("got:second"), std::string::npos);

  // Ended: out of the table; input and signals are NOT_FOUND.
  EXPECT_TRUE(ex_->Sessions().empty());
  ExpectError(Input("s-1", "late"), ErrorCode::kNotFound, "session 's-1' is not live");
  ExpectError(Signal("s-1", "INT"), ErrorCode::kNotFound, "session 's-1' is not live");
}

TEST_F(SessionTest, TheAgentWideOutputCapNeverMutesASessionButItsContextsCapEndsIt) {
  // Each line makes 3000 bytes of output and then its answer: three lines pass the agent-wide
  // cap of 4096 bytes (a total per command).
  options_.max_output_bytes = 4096;
  options_.tools["chatty"] = Interactive(
      {"sh", "-c",
       "echo pgid:$$; while read l; do head -c 3000 /dev/zero | tr '\\0' .; echo \"got:$l\"; "
       "done"});
  SecurityContextConfig capped{{"*"}, "", {}, {}};
  capped.limits.max_output_bytes = 4096;
  options_.security_contexts["capped"] = capped;
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-long", "chatty"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:")) << out.text();
  for (const char* line : {"one", "two", "three"}) {
    ASSERT_EQ(Input("s-long", line).outcome, Outcome::kOk);
    ASSERT_TRUE(out.WaitFor(std::string("got:") + line + "\n"))
        << "the session went mute at " << out.text().size() << " bytes";
  }
  EXPECT_EQ(session.wait_for(0s), std::future_status::timeout) << "the session keeps running";
  ASSERT_TRUE(ex_->Cancel("start-s-long", "test over"));
  InvokeResult r = session.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_FALSE(r.output_truncated);

  // A context's own cap binds the session: past it the session ends (not left running mute)
  // and its result says why.
  OutputWatch capped_out;
  InvokeRequest start = StartReq("s-capped", "chatty");
  start.security_context = "capped";
  auto bounded = Start(std::move(start), capped_out.Sink());
  ASSERT_TRUE(capped_out.WaitFor("pgid:")) << capped_out.text();
  ASSERT_EQ(Input("s-capped", "one").outcome, Outcome::kOk);
  ASSERT_TRUE(capped_out.WaitFor("got:one\n")) << capped_out.text();
  (void)Input("s-capped", "two");  // may race the end: the session is ended by this line
  ASSERT_EQ(bounded.wait_for(30s), std::future_status::ready) << "the capped session ran on";
  r = bounded.get();
  EXPECT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_TRUE(r.output_truncated);
  EXPECT_EQ(r.payload["output_capped"], true);
  EXPECT_EQ(r.payload["output_cap_bytes"], 4096);
  EXPECT_EQ(r.payload["output_cap_key"], "security_contexts.capped.limits.max_output_bytes");
  EXPECT_EQ(capped_out.text().size(), 4096u) << "exactly the cap was delivered";
  EXPECT_TRUE(ex_->Sessions().empty());
}

TEST_F(SessionTest, IntIsDeliveredToTheGroup) {
  options_.tools["trapper"] = Interactive(
      {"sh", "-c",
       "trap 'echo caught-int' INT; echo pgid:$$; while :; do read l && echo \"got:$l\"; done"});
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-int", "trapper"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:")) << out.text();
  ASSERT_EQ(Signal("s-int", "INT").outcome, Outcome::kOk);
  // The shell runs its trap after the read is interrupted; it goes on reading.
  ASSERT_EQ(Input("s-int", "wake").outcome, Outcome::kOk);
  ASSERT_TRUE(out.WaitFor("caught-int")) << out.text();
  EXPECT_EQ(session.wait_for(0s), std::future_status::timeout);
  ASSERT_TRUE(ex_->Cancel("start-s-int", "test over"));
  EXPECT_EQ(session.get().outcome, Outcome::kCancelled);
}

TEST_F(SessionTest, CancelKillsTheWholeProcessGroupGrandchildIncluded) {
  // sh → sh -c "sleep; :" (a child) → sleep (a grandchild), all in the session's group.
  options_.tools["spawner"] = Interactive(
      {"sh", "-c", "sh -c 'sleep 300; :' & echo pgid:$$; while read l; do echo \"got:$l\"; done"});
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-tree", "spawner"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:")) << out.text();
  const pid_t pgid = Pgid(out);
  ASSERT_GT(pgid, 1);
  ASSERT_TRUE(edge::testing::WaitUntil([&] {
    return edge::testing::GroupMembers(pgid).size() >= 3;
  })) << edge::testing::GroupMembers(pgid).size()
      << " processes in the group";

  // The edge door's Cancel and a deadline both end up here.
  ASSERT_TRUE(ex_->Cancel("start-s-tree", "operator closed the session"));
  auto f = std::move(session);
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  InvokeResult r = f.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_EQ(r.reason, "operator closed the session");
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return edge::testing::GroupMembers(pgid).empty(); }))
      << edge::testing::GroupMembers(pgid).size() << " processes survived";
  EXPECT_TRUE(ex_->Sessions().empty());
  ExpectError(Input("s-tree", "x"), ErrorCode::kNotFound, "not live");
}

TEST_F(SessionTest, ASessionHasNoDefaultDeadlineButHonoursAGivenOne) {
  options_.default_timeout = 100ms;
  Open();
  OutputWatch out;
  auto forever = Start(StartReq("s-long"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:"));
  clock_.Advance(10s);  // far past default_timeout: that is for commands, not sessions
  ASSERT_EQ(Input("s-long", "still here").outcome, Outcome::kOk);
  ASSERT_TRUE(out.WaitFor("got:still here")) << out.text();
  EXPECT_EQ(forever.wait_for(0s), std::future_status::timeout);

  InvokeRequest limited = StartReq("s-short");
  limited.timeout = 500ms;  // the InvokeTool's deadline
  OutputWatch out2;
  auto f = Start(limited, out2.Sink());
  ASSERT_TRUE(out2.WaitFor("pgid:"));
  ASSERT_TRUE(edge::testing::WaitUntil([&] {
    if (f.wait_for(0s) == std::future_status::ready) return true;
    clock_.Advance(100ms);
    return false;
  }));
  InvokeResult r = f.get();
  EXPECT_EQ(r.outcome, Outcome::kTimedOut);
  EXPECT_EQ(r.error.code, ErrorCode::kTimedOut);
  ASSERT_TRUE(ex_->Cancel("start-s-long", "done"));
  EXPECT_EQ(forever.get().outcome, Outcome::kCancelled);
}

TEST_F(SessionTest, DuplicateIdsAndTheSessionCapAreRefusedAndNotStored) {
  Open();
  OutputWatch a, b;
  auto s1 = Start(StartReq("s-1"), a.Sink());
  auto s2 = Start(StartReq("s-2"), b.Sink());
  ASSERT_TRUE(a.WaitFor("pgid:"));
  ASSERT_TRUE(b.WaitFor("pgid:"));

  InvokeResult dup = Call(StartReq("s-1", "echoer", "another-command"));
  ExpectError(dup, ErrorCode::kAlreadyExists, "session 's-1' already exists (command 'start-s-1'");
  EXPECT_FALSE(dup.already_running) << "a different command: its refusal is its answer";
  ExpectError(Call(StartReq("s-3")), ErrorCode::kResourceExhausted, "sandbox.max_sessions 2");

  ASSERT_TRUE(ex_->Cancel("start-s-1", "make room"));
  EXPECT_EQ(s1.get().outcome, Outcome::kCancelled);
  // The refusals were not stored: the same command ids can start sessions now.
  OutputWatch c, d;
  auto again = Start(StartReq("s-1", "echoer", "another-command"), c.Sink());
  ASSERT_TRUE(c.WaitFor("pgid:")) << "a session id is free again once its session ended";
  ASSERT_TRUE(ex_->Cancel("another-command", "done"));
  EXPECT_EQ(again.get().outcome, Outcome::kCancelled);
  auto third = Start(StartReq("s-3"), d.Sink());
  ASSERT_TRUE(d.WaitFor("pgid:"));
  ASSERT_TRUE(ex_->Cancel("start-s-3", "done"));
  ASSERT_TRUE(ex_->Cancel("start-s-2", "done"));
  EXPECT_EQ(third.get().outcome, Outcome::kCancelled);
  EXPECT_EQ(s2.get().outcome, Outcome::kCancelled);
  // A repeated command id gets its stored result, it does not start a session again.
  InvokeResult replay = Call(StartReq("s-3"));
  EXPECT_TRUE(replay.replayed);
  EXPECT_TRUE(ex_->Sessions().empty());
}

TEST_F(SessionTest, TheWorkspaceIsResolvedBeneathTheRoot) {
  Open();
  const std::string ws = options_.data_dir + "/sandboxes/_default/root";
  fs::create_directories(ws + "/proj/sub");
  fs::create_directories(dir_ + "/outside");
  fs::create_symlink(dir_ + "/outside", ws + "/escape");

  InvokeRequest in_proj = StartReq("s-ws");
  in_proj.args["workspace_path"] = "proj/sub";
  OutputWatch out;
  auto session = Start(in_proj, out.Sink());
  ASSERT_TRUE(out.WaitFor("cwd:")) << out.text();
  ASSERT_TRUE(out.WaitFor("\n"));
  EXPECT_NE(out.text().find("cwd:" + fs::canonical(ws).string() + "/proj/sub\n"), std::string::npos)
      << out.text();
  ASSERT_TRUE(ex_->Cancel("start-s-ws", "done"));
  session.get();

  auto refused = [&](const std::string& path, ErrorCode code, const std::string& words) {
    InvokeRequest r = StartReq("s-bad", "echoer", "start-bad-" + path);
    r.args["workspace_path"] = path;
    InvokeResult res = Call(r);
    ExpectError(res, code, words);
    EXPECT_NE(res.error.message.find("workspace_path"), std::string::npos) << res.error.message;
  };
  refused("../../..", ErrorCode::kPathOutsideRoot, "'../../..'");
  refused("proj/../../x", ErrorCode::kPathOutsideRoot, "proj/../../x");
  refused("escape", ErrorCode::kPathOutsideRoot, "escape");
  refused("escape/deeper", ErrorCode::kPathOutsideRoot, "escape/deeper");
  refused("missing", ErrorCode::kNotFound, "missing");
  std::ofstream(ws + "/plain") << "x";
  refused("plain", ErrorCode::kFailedPrecondition, "plain");
  EXPECT_TRUE(ex_->Sessions().empty()) << "a refused start leaves no session behind";
}

TEST_F(SessionTest, AnInteractiveToolRunsOnlyThroughSessionStart) {
  Open();
  ExpectError(Call(Tool("echoer", json::object())), ErrorCode::kInvalidArgument,
              "tool 'echoer' is interactive: it runs only as a session's process");
  ExpectError(Call(StartReq("s-x", "say")), ErrorCode::kInvalidArgument,
              "tool 'say' is not interactive");
  ExpectError(Call(StartReq("s-x", "ghost")), ErrorCode::kNotFound, "no tool 'ghost'");
  ExpectError(Call(StartReq("s-x", "exec")), ErrorCode::kInvalidArgument,
              "tool 'exec' is not interactive");
  // The caller's context must allow session.start, and the tool's rules still bind.
  InvokeRequest ctx = StartReq("s-x");
  ctx.security_context = "no-sessions";
  ExpectError(Call(ctx), ErrorCode::kPermissionDenied, "session.start");
  // Interactive tools are tools of the node (advertised), as are the session tools.
  auto tools = ex_->Tools();
  for (const char* t :
       {"echoer", "session.start", "session.input", "session.signal", "file.search"}) {
    EXPECT_NE(std::find(tools.begin(), tools.end(), t), tools.end()) << t;
  }
  // A template with placeholders cannot be interactive: nothing would fill them.
  ExecutorOptions bad = options_;
  bad.data_dir = dir_ + "/bad";
  bad.tools["holes"] = Interactive({"sh", "-c", "{script}"});
  auto opened = Executor::Open(io_, clock_, bad);
  ASSERT_FALSE(opened.has_value());
  EXPECT_NE(opened.error().message.find("tools.holes.command: an interactive tool takes no "
                                        "placeholders ({script})"),
            std::string::npos)
      << opened.error().message;
  bad.tools.erase("holes");
  bad.max_sessions = 0;
  opened = Executor::Open(io_, clock_, bad);
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().message, "sandbox.max_sessions: must be > 0");
}

TEST_F(SessionTest, BadArgumentsAreRefusedNamingTheArg) {
  Open();
  struct Case {
    std::string tool;
    json args;
    std::string words;
  };
  const std::string long_id(129, 'a');
  const std::vector<Case> cases = {
      {"session.start", {{"agent_name", "echoer"}}, "session.start arg 'session_id': missing"},
      {"session.start", {{"session_id", ""}, {"agent_name", "echoer"}}, "'session_id': empty"},
      {"session.start",
       {{"session_id", "a b"}, {"agent_name", "echoer"}},
       "'session_id': 'a b' must match [A-Za-z0-9._-]{1,128}"},
      {"session.start",
       {{"session_id", "../x"}, {"agent_name", "echoer"}},
       "'session_id': '../x' must match"},
      {"session.start",
       {{"session_id", long_id}, {"agent_name", "echoer"}},
       "'session_id': '" + long_id.substr(0, 64) + "' is 129 bytes, more than 128"},
      {"session.start",
       {{"session_id", 7}, {"agent_name", "echoer"}},
       "must be a string, got number"},
      {"session.start", {{"session_id", "s"}}, "session.start arg 'agent_name': missing"},
      {"session.start",
       {{"session_id", "s"}, {"agent_name", "echoer"}, {"workspace_path", true}},
       "'workspace_path': must be a string, got boolean"},
      {"session.start", json::array(), "args of session.start: must be a JSON object"},
      {"session.input", {{"line", "x"}}, "session.input arg 'session_id': missing"},
      {"session.input", {{"session_id", "s"}}, "session.input arg 'line': missing"},
      {"session.input", {{"session_id", "s"}, {"line", 5}}, "'line': must be a string, got number"},
      {"session.input",
       {{"session_id", "s"}, {"line", "one\ntwo"}},
       "'line': contains a newline at byte 3 (one line per call"},
      {"session.input",
       {{"session_id", "s"}, {"line", std::string((1u << 20) + 1, 'x')}},
       "'line': 1048577 bytes, more than the 1048576 a line may have"},
      {"session.signal", {{"session_id", "s"}}, "session.signal arg 'signal': missing"},
      {"session.signal",
       {{"session_id", "s"}, {"signal", "KILL"}},
       "'signal': 'KILL' is not one of \"INT\", \"TERM\""},
      {"session.signal", {{"session_id", "s"}, {"signal", "SIGTERM"}}, "'SIGTERM' is not one of"},
      {"session.signal", {{"session_id", "s"}, {"signal", 15}}, "must be a string, got number"},
      {"file.search", {{"path", "."}}, "file.search arg 'query': missing"},
      {"file.search", {{"query", 3}}, "'query': must be a string, got number"},
      {"file.search", {{"query", "a"}, {"limit", 0}}, "'limit': 0 is not between 1 and 1000"},
      {"file.search", {{"query", "a"}, {"limit", 1001}}, "'limit': 1001 is not between 1 and 1000"},
      {"file.search", {{"query", "a"}, {"limit", -1}}, "'limit': must be a non-negative integer"},
      {"file.search",
       {{"query", "a"}, {"limit", "ten"}},
       "'limit': must be a non-negative integer"},
      {"file.search", {{"query", std::string(1025, 'q')}}, "'query': 1025 bytes, more than 1024"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tool + " " + c.args.dump().substr(0, 120));
    ExpectError(Call(Tool(c.tool, c.args)), ErrorCode::kInvalidArgument, c.words);
  }
  EXPECT_TRUE(ex_->Sessions().empty());
}

TEST_F(SessionTest, UnknownSessionsAreNotFound) {
  Open();
  ExpectError(Input("nope", "x"), ErrorCode::kNotFound, "session 'nope' is not live here");
  ExpectError(Signal("nope", "TERM"), ErrorCode::kNotFound, "session 'nope' is not live here");
}

TEST_F(SessionTest, AProcessThatStopsReadingGetsABoundedQueueNotABlockedThread) {
  options_.tools["deaf"] = Interactive({"sh", "-c", "echo pgid:$$; exec sleep 300"});
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-deaf", "deaf"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:"));
  // A 1 MiB line cannot all go into the pipe (64 KiB) while nobody reads: it stays queued.
  const std::string mib((1u << 20), 'x');
  InvokeResult first = Input("s-deaf", mib);
  ASSERT_EQ(first.outcome, Outcome::kOk) << first.error.ToString();
  EXPECT_EQ(first.payload["queued_bytes"], (1u << 20) + 1);
  // The next one would pass the 2 MiB queue: refused at once, nothing of it queued.
  InvokeResult second = Input("s-deaf", mib);
  ExpectError(second, ErrorCode::kResourceExhausted,
              "session.input: session 's-deaf': stdin queue full");
  // Signals are not queued behind input.
  ASSERT_EQ(Signal("s-deaf", "TERM").outcome, Outcome::kOk);
  InvokeResult r = session.get();
  EXPECT_EQ(r.signal, SIGTERM);
}

TEST_F(SessionTest, AProcessThatClosedItsStdinMakesInputFailPrecondition) {
  options_.tools["closer"] = Interactive({"sh", "-c", "exec 0<&-; echo closed; exec sleep 300"});
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-closed", "closer"), out.Sink());
  ASSERT_TRUE(out.WaitFor("closed"));
  // The first line is queued; its write meets the closed pipe (EPIPE, never SIGPIPE for the
  // agent), after which input is refused for good while the process runs on.
  InvokeResult last;
  ASSERT_TRUE(edge::testing::WaitUntil([&] {
    last = Input("s-closed", "anyone?");
    return last.outcome == Outcome::kError;
  }));
  ExpectError(last, ErrorCode::kFailedPrecondition, "the process closed its stdin");
  EXPECT_EQ(session.wait_for(0s), std::future_status::timeout);
  ASSERT_EQ(Signal("s-closed", "TERM").outcome, Outcome::kOk) << "signals still work";
  EXPECT_EQ(session.get().signal, SIGTERM);
}

TEST_F(SessionTest, DrainRefusesNewSessionsButLetsRunningOnesBeDriven) {
  Open();
  OutputWatch out;
  auto session = Start(StartReq("s-drain"), out.Sink());
  ASSERT_TRUE(out.WaitFor("pgid:"));
  ex_->Drain();
  ExpectError(Call(StartReq("s-new")), ErrorCode::kDraining, "draining");
  ASSERT_EQ(Input("s-drain", "while draining").outcome, Outcome::kOk);
  ASSERT_TRUE(out.WaitFor("got:while draining")) << out.text();
  ASSERT_EQ(Signal("s-drain", "TERM").outcome, Outcome::kOk);
  EXPECT_EQ(session.get().signal, SIGTERM);
}

TEST_F(SessionTest, ASessionInASandboxIsFencedByItsLease) {
  Open();
  SpawnRequest sp;
  sp.id = "sb-1";
  Lease lease{"sb-1", "node-1", 1, clock_.Now() + 60s};
  ASSERT_TRUE(ex_->Spawn(sp, &lease).has_value());
  InvokeRequest foreign = StartReq("s-sb", "echoer", "start-foreign");
  foreign.sandbox_id = "sb-1";
  foreign.lease = Lease{"sb-1", "someone-else", 2, clock_.Now() + 60s};
  ExpectError(Call(foreign), ErrorCode::kLeaseRejected, "holder");
  EXPECT_TRUE(ex_->Sessions().empty());
  // With its lease, it runs in the sandbox's workspace, and ends when the lease expires.
  InvokeRequest ok = StartReq("s-sb");
  ok.sandbox_id = "sb-1";
  ok.lease = Lease{"sb-1", "node-1", 2, clock_.Now() + 5s};
  OutputWatch out;
  auto session = Start(ok, out.Sink());
  ASSERT_TRUE(out.WaitFor("cwd:"));
  EXPECT_NE(out.text().find("sb-1/root"), std::string::npos) << out.text();
  clock_.Advance(10s);
  EXPECT_EQ(ex_->Tick(clock_.Now()), 1u);
  InvokeResult r = session.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_NE(r.reason.find("expired unrenewed"), std::string::npos) << r.reason;
}

// ---- file.search through the executor --------------------------------------------------------

TEST_F(SessionTest, FileSearchFindsNamesBeneathThePathCaseInsensitively) {
  Open();
  const std::string ws = options_.data_dir + "/sandboxes/_default/root";
  fs::create_directories(ws + "/src/Util");
  fs::create_directories(ws + "/docs");
  fs::create_directories(dir_ + "/outside");
  std::ofstream(ws + "/src/main.cc") << "x";
  std::ofstream(ws + "/src/Util/Helper.CC") << "x";
  std::ofstream(ws + "/docs/util.md") << "x";
  std::ofstream(dir_ + "/outside/util-secret.cc") << "x";
  fs::create_symlink(dir_ + "/outside", ws + "/src/linked");

  auto search = [&](json args) {
    InvokeResult r = Call(Tool("file.search", std::move(args)));
    EXPECT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
    return r.payload;
  };
  json p = search({{"query", "UTIL"}});
  EXPECT_EQ(p.dump(), json({{"candidates",
                             {{{"path", "docs/util.md"}, {"type", "file"}},
                              {{"path", "src/Util"}, {"type", "dir"}},
                              {{"path", "src/Util/Helper.CC"}, {"type", "file"}}}},
                            {"truncated", false}})
                          .dump())
      << "shallower first, names sorted, the symlink's target never searched";
  p = search({{"query", ".cc"}, {"path", "src"}});
  EXPECT_EQ(p["candidates"].size(), 2u) << p.dump();
  EXPECT_EQ(p["candidates"][0]["path"], "main.cc") << "relative to the searched directory";
  EXPECT_EQ(p["candidates"][1]["path"], "Util/Helper.CC");
  p = search({{"query", "linked"}});
  ASSERT_EQ(p["candidates"].size(), 1u) << p.dump();
  EXPECT_EQ(p["candidates"][0]["type"], "symlink");
  p = search({{"query", "u"}, {"limit", 2}});
  EXPECT_EQ(p["candidates"].size(), 2u);
  EXPECT_EQ(p["truncated"], true);
  p = search({{"query", ""}, {"limit", 1000}});
  EXPECT_EQ(p["candidates"].size(), 7u) << "an empty query lists every entry: " << p.dump();

  ExpectError(Call(Tool("file.search", {{"query", "x"}, {"path", "../.."}})),
              ErrorCode::kPathOutsideRoot, "..");
  ExpectError(Call(Tool("file.search", {{"query", "x"}, {"path", "src/linked"}})),
              ErrorCode::kPathOutsideRoot, "src/linked");
  ExpectError(Call(Tool("file.search", {{"query", "x"}, {"path", "nowhere"}})),
              ErrorCode::kNotFound, "nowhere");
}

// ---- ProcessControl on its own -------------------------------------------------------------

TEST(ProcessControlTest, QueuesAllOrNothingUpToItsCapAndEndsForGood) {
  ProcessControl c(10);
  EXPECT_FALSE(c.running());
  auto sig = c.Signal(SIGTERM);
  ASSERT_FALSE(sig.has_value());
  EXPECT_EQ(sig.error().code, ErrorCode::kFailedPrecondition) << "not started yet";
  ASSERT_TRUE(c.Write("hello\n").has_value()) << "kept until the process starts";
  EXPECT_EQ(c.queued_bytes(), 6u);
  auto full = c.Write("world\n");
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(c.queued_bytes(), 6u) << "nothing of a refused write is queued";

  int pumps = 0;
  c.Attach(::getpgrp(), [&] { ++pumps; });
  EXPECT_EQ(pumps, 1) << "what was queued before the start is written at once";
  EXPECT_EQ(c.TakeForWrite(), "hello\n");
  EXPECT_EQ(c.queued_bytes(), 6u) << "counted until the pipe took it";
  c.Written(6);
  EXPECT_EQ(c.queued_bytes(), 0u);
  ASSERT_TRUE(c.Write("ab").has_value());
  ASSERT_TRUE(c.Write("cd").has_value());
  EXPECT_EQ(pumps, 3);
  EXPECT_EQ(c.TakeForWrite(), "abcd") << "in order, in one write";
  c.Written(4);
  ASSERT_TRUE(c.Signal(0).has_value()) << "signal 0 to the test's own group: it exists";

  c.StdinFailed("the process closed its stdin (Broken pipe)");
  auto closed = c.Write("x");
  ASSERT_FALSE(closed.has_value());
  EXPECT_EQ(closed.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(c.Signal(0).has_value()) << "a closed stdin does not end the process";

  c.Ended("its process ended");
  EXPECT_FALSE(c.running());
  for (auto st : {c.Write("x"), c.Signal(SIGTERM)}) {
    ASSERT_FALSE(st.has_value());
    EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(st.error().message, "its process ended");
  }
}

}  // namespace
}  // namespace edge::sandbox
