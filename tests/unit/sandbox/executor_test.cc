#include "sandbox/executor.h"
#include "tests/support/forked_agent.h"
#include "tests/support/manual_clock.h"
#include "tests/support/processes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

// A command that ignores SIGTERM (so does everything it starts: an ignored signal stays ignored
// across exec) and keeps writing into its sandbox until SIGKILL, which comes kill_grace after a
// cancel on the injected clock. It writes its pid first.
constexpr const char* kStubbornWriter =
    "trap '' TERM; echo $$ > pid; while :; do echo x >> \"$PWD/out\"; sleep 0.02; done";

pid_t ReadPid(const std::string& path) {
  pid_t pid = 0;
  EXPECT_TRUE(edge::testing::WaitUntil([&] {
    std::ifstream in(path);
    return static_cast<bool>(in >> pid) && pid > 0;
  })) << path;
  return pid;
}

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartIoThread();
    options_.data_dir = dir_ + "/data";
    options_.own_id = "worker-1";
    options_.agent_version = "9.9.9";
    options_.kill_grace = 200ms;
    options_.pids_cgroup_root = "";
    options_.tools["say"] = ToolConfig{{"/bin/echo", "{msg}"}, 0s, ""};
    // Once any context is configured there is no implicit allow-all: "default" is explicit.
    options_.security_contexts["default"] = SecurityContextConfig{{"*"}, "", {}, {}};
    options_.security_contexts["readers"] =
        SecurityContextConfig{{"file.*", "sysinfo"}, "", {}, {}};
    SecurityContextConfig capped{{"*"}, "", {}, {}};
    capped.limits.timeout_cap = 300ms;
    capped.limits.max_concurrent = 1;
    options_.security_contexts["capped"] = capped;
  }
  void TearDown() override {
    ex_.reset();
    work_.reset();
    StopIoThread();
  }
  // Stop and start the io thread again: a test that forks stops it first (ForkedAgent).
  void StopIoThread() {
    io_.stop();
    io_thread_.join();
  }
  void StartIoThread() {
    io_.restart();
    io_thread_ = std::thread([this] { io_.run(); });
  }
  // The pgid of the first group recorded under state/process-groups (the runner's ledger, or a
  // file of its own), 0 when none is.
  pid_t RecordedGroup() const {
    for (const auto& e : fs::directory_iterator(options_.data_dir + "/state/process-groups")) {
      pid_t group = 0;
      if (std::ifstream(e.path()) >> group && group > 0) return group;
    }
    return 0;
  }
  void Open() {
    auto ex = Executor::Open(io_, clock_, options_);
    ASSERT_TRUE(ex.has_value()) << ex.error().ToString();
    ex_ = std::move(*ex);
  }

  std::future<InvokeResult> Start(InvokeRequest req, CancelToken cancel = {}, ChunkSink sink = {}) {
    auto p = std::make_shared<std::promise<InvokeResult>>();
    auto f = p->get_future();
    ex_->Invoke(std::move(req), std::move(cancel), std::move(sink),
                [p](InvokeResult r) { p->set_value(std::move(r)); });
    return f;
  }
  InvokeResult Call(InvokeRequest req, CancelToken cancel = {}) {
    auto f = Start(std::move(req), std::move(cancel));
    EXPECT_EQ(f.wait_for(60s), std::future_status::ready);
    return f.get();
  }
  // Waits for `f` while moving the injected clock by `step` (deadlines and graces run on it,
  // and fire once their timer is armed, whenever that happens on the executor's threads).
  template <typename Future>
  bool AdvanceUntilReady(Future& f, milliseconds step = 50ms) {
    return edge::testing::WaitUntil([&] {
      if (f.wait_for(0s) == std::future_status::ready) return true;
      clock_.Advance(step);
      return false;
    });
  }
  // Sandbox `id` (lease generation 1, `ttl`) running kStubbornWriter, with its pid.
  struct Stubborn {
    std::string root;
    std::future<InvokeResult> running;
    pid_t pid = 0;
  };
  Stubborn SpawnStubborn(const std::string& id, std::chrono::seconds ttl = 0s) {
    SpawnRequest sp;
    sp.id = id;
    sp.ttl = ttl;
    Lease lease = MakeLease(id, 1);
    EXPECT_TRUE(ex_->Spawn(sp, &lease).has_value());
    Stubborn s;
    s.root = ex_->Status(id)->root_dir;
    InvokeRequest req = Exec(kStubbornWriter);
    req.sandbox_id = id;
    req.timeout = std::chrono::hours(1);
    s.running = Start(req);
    WaitRunning(1);
    s.pid = ReadPid(s.root + "/pid");
    return s;
  }
  // Destroy's answer: it comes on an executor thread once the sandbox's commands have ended.
  std::future<Result<SandboxInfo>> DestroyAsync(const std::string& id, const Lease* lease) {
    auto p = std::make_shared<std::promise<Result<SandboxInfo>>>();
    auto f = p->get_future();
    ex_->Destroy(id, lease, [p](Result<SandboxInfo> r) { p->set_value(std::move(r)); });
    return f;
  }
  Result<SandboxInfo> Destroy(const std::string& id, const Lease* lease) {
    auto f = DestroyAsync(id, lease);
    if (f.wait_for(60s) != std::future_status::ready) {
      ADD_FAILURE() << "destroy of " << id << " not answered in 60 s";
      return MakeError(ErrorCode::kTimedOut, "no answer");
    }
    return f.get();
  }
  InvokeResult CallAdvancing(InvokeRequest req) {
    auto f = Start(std::move(req));
    EXPECT_TRUE(AdvanceUntilReady(f)) << "no result while the clock moved";
    return f.get();
  }
  static InvokeRequest Exec(const std::string& command, const std::string& id = "") {
    InvokeRequest r;
    r.command_id = id;
    r.tool = "exec";
    r.args = json{{"command", command}};
    return r;
  }
  Lease MakeLease(const std::string& resource, int64_t gen, std::string holder = "worker-1") {
    return Lease{resource, std::move(holder), gen, clock_.Now() + 60s};
  }
  // Journal rows as a previous agent process left them (written through a connection of
  // their own, the executor closed).
  void LeaveJournalRows(const std::vector<CommandJournal::Entry>& rows) {
    auto db = StateDb::Open(options_.data_dir);
    ASSERT_TRUE(db.has_value()) << db.error().ToString();
    auto journal = CommandJournal::Open(**db);
    ASSERT_TRUE(journal.has_value());
    for (const auto& e : rows)
      ASSERT_TRUE((*journal)->Admitted(e)) << e.command_id;
  }
  // Whether `journal` has a row of `command_id`.
  static bool InJournal(const CommandJournal& journal, const std::string& command_id) {
    auto rows = journal.Unfinished();
    EXPECT_TRUE(rows.has_value());
    return rows && std::any_of(rows->begin(), rows->end(),
                               [&](const auto& e) { return e.command_id == command_id; });
  }
  // Waits (the child is real) until `n` invocations are running.
  void WaitRunning(size_t n) {
    for (int i = 0; i < 500 && ex_->running() < n; ++i)
      std::this_thread::sleep_for(10ms);
    ASSERT_GE(ex_->running(), n);
  }

  edge::testing::TempDir tmp_{"exec"};
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

// ---- issue 15: text, modes, threads, users, contexts ---------------------------------------

TEST_F(ExecutorTest, BinaryOutputIsValidUtf8TextPlusTheExactBytes) {
  Open();
  // Before: nlohmann's dump threw on the invalid byte and the exception ended the agent.
  InvokeResult r = Call(Exec("printf 'ok\\377'; printf 'caf\\303\\251' >&2", "bin-1"));
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  EXPECT_EQ(r.payload["stdout"], "ok\xEF\xBF\xBD");  // U+FFFD for people
  EXPECT_EQ(r.payload["stdout_base64"], "b2v/");     // "ok\xFF" exactly, for programs
  EXPECT_EQ(r.payload["stderr"], "caf\xC3\xA9");     // valid UTF-8 stays as it is
  EXPECT_FALSE(r.payload.contains("stderr_base64"));
  // The result was stored (that dump threw too) and a repeat gets it back.
  InvokeResult again = Call(Exec("printf 'ok\\377'", "bin-1"));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.payload["stdout_base64"], "b2v/");
}

TEST_F(ExecutorTest, FileNamesThatAreNotUtf8AreListedLosslessly) {
  Open();
  ASSERT_EQ(Call(Exec("touch \"$(printf 'bad\\377name')\" good")).outcome, Outcome::kOk);
  InvokeRequest list;
  list.tool = "file.list";
  list.args = json{{"path", "."}};
  list.command_id = "list-1";
  InvokeResult r = Call(list);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  const json& files = r.payload["files"];
  ASSERT_EQ(files.size(), 2u) << files.dump();
  EXPECT_EQ(files[0]["path"], "bad\xEF\xBF\xBDname");
  EXPECT_EQ(files[0]["path_base64"], "YmFk/25hbWU=");  // "bad\xFFname"
  EXPECT_EQ(files[1]["path"], "good");
  EXPECT_FALSE(files[1].contains("path_base64"));
  // A stat of a name that does not exist, quoting bytes: the message is valid UTF-8.
  InvokeRequest stat;
  stat.tool = "file.stat";
  stat.args = json{{"path", "missing"}};
  EXPECT_EQ(Call(stat).error.code, ErrorCode::kNotFound);
}

TEST_F(ExecutorTest, FileWriteRefusesSetuidSetgidAndStickyModes) {
  Open();
  for (const char* mode : {"4755", "2755", "1777", "6755"}) {
    InvokeRequest w;
    w.tool = "file.write";
    w.args = json{{"path", "tool"}, {"content", "IyEvYmluL3NoCg=="}, {"mode", mode}};
    InvokeResult r = Call(w);
    ExpectError(r, ErrorCode::kInvalidArgument, "setuid, setgid and sticky bits");
    EXPECT_NE(r.error.message.find(mode), std::string::npos) << r.error.message;
  }
  EXPECT_FALSE(fs::exists(options_.data_dir + "/sandboxes/_default/root/tool"));
  InvokeRequest ok;
  ok.tool = "file.write";
  ok.args = json{{"path", "tool"}, {"content", "IyEvYmluL3NoCg=="}, {"mode", "0755"}};
  EXPECT_EQ(Call(ok).outcome, Outcome::kOk);
}

// A file.write larger than one 8 MiB piece of decoding (the executor decodes its base64 as it
// writes): the file holds exactly the bytes, the answer their count.
TEST_F(ExecutorTest, FileWriteOfManyPiecesIsExact) {
  Open();
  std::string plain((20 << 20) + 5, '\0');
  for (size_t i = 0; i < plain.size(); ++i)
    plain[i] = static_cast<char>((i * 2654435761u) >> 11);
  InvokeRequest w;
  w.tool = "file.write";
  w.args = json{{"path", "big.bin"}, {"content", edge::Base64Encode(plain)}};
  InvokeResult r = Call(w);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  EXPECT_EQ(r.payload.at("size"), plain.size());
  auto back = edge::ReadFile(options_.data_dir + "/sandboxes/_default/root/big.bin", 64 << 20);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == plain);
}

// The file a file.write replaces is released after the answer (FileService::Write's
// `replaced`), and released it is: no descriptor of the process is left on it.
TEST_F(ExecutorTest, FileWriteReleasesTheFileItReplaced) {
  Open();
  auto held_deleted = [] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const std::string target = fs::read_symlink(e.path(), ec).string();
      if (target.find("/replaced.bin (deleted)") != std::string::npos) ++n;
    }
    return n;
  };
  InvokeRequest w;
  w.tool = "file.write";
  w.args = json{{"path", "replaced.bin"}, {"content", edge::Base64Encode(std::string(4096, 'o'))}};
  ASSERT_EQ(Call(w).outcome, Outcome::kOk);
  w.args["content"] = edge::Base64Encode("new");
  InvokeResult r = Call(w);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  EXPECT_EQ(*edge::ReadFile(options_.data_dir + "/sandboxes/_default/root/replaced.bin"), "new");
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return held_deleted() == 0; }))
      << "the replaced file is still held open";
}

TEST_F(ExecutorTest, FileToolsNeverRunOnTheCallersThread) {
  Open();
  for (const char* tool : {"sysinfo", "file.list"}) {
    InvokeRequest req;
    req.tool = tool;
    auto p = std::make_shared<std::promise<std::thread::id>>();
    auto f = p->get_future();
    ex_->Invoke(req, {}, {}, [p](InvokeResult) { p->set_value(std::this_thread::get_id()); });
    ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
    EXPECT_NE(f.get(), std::this_thread::get_id()) << tool;
  }
}

TEST_F(ExecutorTest, ACancelledFileToolEndsCancelled) {
  Open();
  ASSERT_EQ(Call(Exec("mkdir -p big/a/b && touch big/a/b/f1 big/a/f2")).outcome, Outcome::kOk);
  CancelSource cancel;
  cancel.Cancel("operator changed their mind");
  InvokeRequest del;
  del.tool = "file.delete";
  del.args = json{{"path", "big"}, {"recursive", true}};
  InvokeResult r = Call(del, cancel.token());
  EXPECT_EQ(r.outcome, Outcome::kCancelled) << r.error.ToString();
  EXPECT_EQ(r.error.code, ErrorCode::kCancelled);
  EXPECT_TRUE(fs::exists(options_.data_dir + "/sandboxes/_default/root/big/a/b/f1"));
}

TEST_F(ExecutorTest, FileToolsRunWithTheContextsUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching to 'nobody' needs root";
  options_.security_contexts["as-nobody"] = SecurityContextConfig{{"file.*"}, "nobody", {}, {}};
  Open();
  const std::string ws = options_.data_dir + "/sandboxes/_default/root";
  {
    std::ofstream(ws + "/secret") << "root only\n";
    ASSERT_EQ(::chmod((ws + "/secret").c_str(), 0600), 0);
    fs::create_directory(ws + "/pub");
    ASSERT_EQ(::chown((ws + "/pub").c_str(), 65534, 65534), 0);
  }
  auto as_nobody = [](std::string tool, json args) {
    InvokeRequest r;
    r.tool = std::move(tool);
    r.args = std::move(args);
    r.security_context = "as-nobody";
    return r;
  };
  // Before: file tools ignored run_as and read /etc/shadow-like files as root.
  ExpectError(Call(as_nobody("file.read", {{"path", "secret"}})), ErrorCode::kPermissionDenied,
              "secret");
  ExpectError(Call(as_nobody("file.write", {{"path", "mine"}, {"content", "eA=="}})),
              ErrorCode::kPermissionDenied, "mine");
  InvokeResult w = Call(as_nobody("file.write", {{"path", "pub/mine"}, {"content", "eA=="}}));
  ASSERT_EQ(w.outcome, Outcome::kOk) << w.error.ToString();
  struct stat st {};
  ASSERT_EQ(::stat((ws + "/pub/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);  // created by the user, not by root
  // The pool thread went back to root: the agent's own next file call still works.
  InvokeRequest own;
  own.tool = "file.read";
  own.args = json{{"path", "secret"}};
  EXPECT_EQ(Call(own).outcome, Outcome::kOk);
}

TEST_F(ExecutorTest, AToolsOwnContextBindsAndCannotBeWidenedByTheRequest) {
  if (::geteuid() != 0) GTEST_SKIP() << "run_as 'nobody' needs root";
  options_.security_contexts["limited"] = SecurityContextConfig{{"whoami"}, "nobody", {}, {}};
  options_.tools["whoami"] = ToolConfig{{"/usr/bin/id", "-un"}, 0s, "limited"};
  Open();
  InvokeRequest r;
  r.tool = "whoami";
  r.security_context = "default";  // before: this ran the tool as root
  InvokeResult res = Call(r);
  ASSERT_EQ(res.outcome, Outcome::kOk) << res.error.ToString();
  EXPECT_EQ(res.payload["stdout"], "nobody\n");
  r.security_context = "readers";  // does not allow the tool: cannot be used to run it
  ExpectError(Call(r), ErrorCode::kPermissionDenied, "can only narrow");
}

TEST_F(ExecutorTest, NoImplicitAllowAllOnceContextsAreConfigured) {
  options_.security_contexts.erase("default");
  Open();
  EXPECT_FALSE(ex_->implicit_default_context());
  ExpectError(Call(Exec("true")), ErrorCode::kNotFound, "'default' is not configured");
  InvokeRequest named = Exec("true");
  named.security_context = "capped";
  EXPECT_EQ(Call(named).outcome, Outcome::kOk);
}

TEST_F(ExecutorTest, AContextThatRequiresARoleRefusesUnverifiedCallers) {
  SecurityContextConfig ops{{"*"}, "", {}, {}};
  ops.require_roles = {"operator"};
  options_.security_contexts["ops"] = ops;
  Open();
  InvokeRequest r = Exec("true");
  r.security_context = "ops";
  ExpectError(Call(r), ErrorCode::kPermissionDenied, "not verified");
  r.caller_roles = std::vector<std::string>{"viewer"};
  ExpectError(Call(r), ErrorCode::kPermissionDenied, "'operator'");
  r.caller_roles = std::vector<std::string>{"operator"};
  EXPECT_EQ(Call(r).outcome, Outcome::kOk);
}

TEST_F(ExecutorTest, FileReadRefusesARangeTheDoorCannotCarry) {
  Open();
  ASSERT_EQ(Call(Exec("head -c 300000 /dev/zero > big.bin")).outcome, Outcome::kOk);
  InvokeRequest read;
  read.tool = "file.read";
  read.args = json{{"path", "big.bin"}};
  read.max_result_bytes = 100000;  // base64 of 300 000 bytes is 400 000
  InvokeResult r = Call(read);
  ExpectError(r, ErrorCode::kResourceExhausted, "offset and length");
  read.args = json{{"path", "big.bin"}, {"offset", 0}, {"length", 60000}};
  InvokeResult part = Call(read);
  ASSERT_EQ(part.outcome, Outcome::kOk) << part.error.ToString();
  EXPECT_EQ(part.payload["size"], 60000);
}

// Issue 9 #1: admission lives only in the executor — a door's cap travels in its requests.
TEST_F(ExecutorTest, ADoorsCapIsCountedByTheExecutorPerDoor) {
  Open();
  const std::string gate = dir_ + "/door.go";
  auto edge_req = [&](const std::string& id) {
    InvokeRequest r = Exec("while [ ! -e " + gate + " ]; do sleep 0.01; done", id);
    r.door_limit = InvokeRequest::DoorLimit{"edge", "edge.max_concurrent_commands", 1};
    return r;
  };
  auto first = Start(edge_req("e1"));
  WaitRunning(1);
  EXPECT_EQ(ex_->running("edge"), 1u);
  EXPECT_TRUE(ex_->IsRunning("e1"));
  ExpectError(Call(edge_req("e2")), ErrorCode::kResourceExhausted,
              "edge.max_concurrent_commands 1 commands already running");
  // Another door (or none) is not held by the edge door's cap.
  InvokeRequest other = Exec("true", "w1");
  other.door_limit = InvokeRequest::DoorLimit{"worker", "worker.max_concurrent", 1};
  EXPECT_EQ(Call(other).outcome, Outcome::kOk);
  // Cancel by command id: the executor holds the cancel handles.
  EXPECT_FALSE(ex_->Cancel("nope", "x"));
  EXPECT_TRUE(ex_->Cancel("e1", "operator said so"));
  InvokeResult r = first.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_EQ(r.reason, "operator said so");
  EXPECT_EQ(ex_->running("edge"), 0u);
  EXPECT_FALSE(ex_->IsRunning("e1"));
}

TEST_F(ExecutorTest, OpenValidatesOptions) {
  ExecutorOptions bad = options_;
  bad.own_id = "";
  auto r = Executor::Open(io_, clock_, bad);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("own_id"), std::string::npos);
  bad = options_;
  bad.provider = "docker";
  r = Executor::Open(io_, clock_, bad);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("docker"), std::string::npos);
  bad = options_;
  bad.tools["t"] = ToolConfig{{"x"}, 0s, "ghost"};
  r = Executor::Open(io_, clock_, bad);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("tools.t.security_context"), std::string::npos);
  EXPECT_NE(r.error().message.find("ghost"), std::string::npos);
}

TEST_F(ExecutorTest, ExecRunsInTheDefaultWorkspace) {
  Open();
  InvokeResult r = Call(Exec("pwd; echo oops >&2; exit 2"));
  EXPECT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.payload["stdout"],
            fs::canonical(options_.data_dir).string() + "/sandboxes/_default/root\n");
  EXPECT_EQ(r.payload["stderr"], "oops\n");
  EXPECT_GT(r.peak_rss_kb, 0);

  InvokeRequest argv;
  argv.tool = "exec";
  argv.args = json{{"command", "printf"}, {"args", {"%s|", "a b", "$(id)"}}, {"mode", "argv"}};
  r = Call(argv);
  EXPECT_EQ(r.payload["stdout"], "a b|$(id)|");

  InvokeRequest shell;
  shell.tool = "exec";
  shell.args = json{{"command", "printf '%s|'"}, {"args", {"it's", "$(id)"}}, {"stdin", "x"}};
  r = Call(shell);
  EXPECT_EQ(r.payload["stdout"], "it's|$(id)|");

  InvokeRequest escape;
  escape.tool = "exec";
  escape.args = json{{"command", "pwd"}, {"cwd", "../../.."}};
  ExpectError(Call(escape), ErrorCode::kPathOutsideRoot, "cwd");
}

TEST_F(ExecutorTest, ChunksStreamToTheSink) {
  Open();
  std::mutex mu;
  std::string streamed;
  auto f = Start(Exec("seq 1 5000"), {}, [&](OutputChunk c, std::function<void()> ack) {
    {
      std::lock_guard lock(mu);
      streamed += c.data;
    }
    ack();
  });
  InvokeResult r = f.get();
  EXPECT_EQ(r.outcome, Outcome::kOk);
  std::lock_guard lock(mu);
  EXPECT_EQ(streamed, r.payload["stdout"].get<std::string>());
  EXPECT_TRUE(streamed.starts_with("1\n2\n3\n"));
}

TEST_F(ExecutorTest, ConfigToolFillsArgsWithoutShell) {
  Open();
  InvokeRequest req;
  req.tool = "say";
  req.args = json{{"msg", "$(id); echo pwned"}};
  InvokeResult r = Call(req);
  EXPECT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(r.payload["stdout"], "$(id); echo pwned\n");
  req.args = json::object();
  ExpectError(Call(req), ErrorCode::kInvalidArgument, "'msg'");
  EXPECT_NE(std::find(ex_->Tools().begin(), ex_->Tools().end(), "say"), ex_->Tools().end());
}

TEST_F(ExecutorTest, ReconfigureAppliesToTheNextInvocation) {
  Open();
  // Started under the old rules: it runs to the end whatever comes next.
  // It ends only after the reconfigure (the gate file), so it surely spans it.
  const std::string gate = dir_ + "/reconfigure.go";
  auto running =
      Start(Exec("while [ ! -e " + gate + " ]; do sleep 0.01; done; echo old", "before"));
  WaitRunning(1);
  std::map<std::string, ToolConfig> tools = {
      {"greet", ToolConfig{{"/bin/echo", "hi {name}"}, 0s, ""}}};
  std::map<std::string, SecurityContextConfig> contexts = {
      {"default", SecurityContextConfig{{"*"}, "", {}, {}}},
      {"readers", SecurityContextConfig{{"file.*", "exec"}, "", {}, {}}}};
  ASSERT_TRUE(ex_->Reconfigure(tools, contexts).has_value());
  std::ofstream(gate).put('x');
  InvokeResult before = running.get();
  EXPECT_EQ(before.outcome, Outcome::kOk) << before.error.ToString();
  EXPECT_EQ(before.payload["stdout"], "old\n");

  auto names = ex_->Tools();
  EXPECT_NE(std::find(names.begin(), names.end(), "greet"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "say"), names.end());
  InvokeRequest say;
  say.tool = "say";
  say.args = json{{"msg", "x"}};
  ExpectError(Call(say), ErrorCode::kNotFound, "'say'");
  InvokeRequest greet;
  greet.tool = "greet";
  greet.args = json{{"name", "edge"}};
  EXPECT_EQ(Call(greet).payload["stdout"], "hi edge\n");
  InvokeRequest exec = Exec("echo allowed");
  exec.security_context = "readers";
  EXPECT_EQ(Call(exec).outcome, Outcome::kOk) << "readers now allows exec";
  exec.security_context = "capped";
  ExpectError(Call(exec), ErrorCode::kNotFound, "'capped'");

  // A bad config changes nothing.
  tools["bad"] = ToolConfig{{"x"}, 0s, "ghost"};
  auto st = ex_->Reconfigure(tools, {});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message.find("tools.bad.security_context"), std::string::npos);
  EXPECT_EQ(Call(greet).payload["stdout"], "hi edge\n");
  exec.security_context = "readers";
  EXPECT_EQ(Call(exec).outcome, Outcome::kOk);
}

TEST_F(ExecutorTest, SecurityContextsDecide) {
  Open();
  InvokeRequest req = Exec("true");
  req.security_context = "readers";
  ExpectError(Call(req), ErrorCode::kPermissionDenied, "'exec'");
  req.security_context = "nope";
  ExpectError(Call(req), ErrorCode::kNotFound, "'nope'");
  InvokeRequest unknown;
  unknown.tool = "nmap";
  ExpectError(Call(unknown), ErrorCode::kNotFound, "'nmap'");
  InvokeRequest info;
  info.tool = "sysinfo";
  info.security_context = "readers";
  InvokeResult r = Call(info);
  EXPECT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(r.payload["agent_version"], "9.9.9");
  // The context's timeout cap cuts a longer request.
  InvokeRequest slow = Exec("sleep 30");
  slow.security_context = "capped";
  slow.timeout = 30s;
  r = CallAdvancing(slow);
  EXPECT_EQ(r.outcome, Outcome::kTimedOut);
  EXPECT_EQ(r.error.code, ErrorCode::kTimedOut);
  EXPECT_NE(r.error.message.find("300 ms"), std::string::npos);
  EXPECT_EQ(r.timeout, 300ms) << "the limit that applied is in the result";
  auto again = InvokeResult::FromJson(r.ToJson());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->timeout, 300ms) << "and survives the idempotency store";
}

TEST_F(ExecutorTest, ATailLimitKeepsTheLastBytesOfEachStreamAndSaysSo) {
  Open();
  // 3 MiB of 'a' then a marker on stdout, a short stderr: the payload keeps the last 1000
  // bytes of stdout (ending with the marker), all of stderr, and says output_truncated.
  InvokeRequest big = Exec("head -c 3145728 /dev/zero | tr '\\0' a; printf END; echo oops >&2");
  big.collect_tail_bytes = 1000;
  InvokeResult r = Call(big);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.message;
  const std::string out = r.payload["stdout"];
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_EQ(out, std::string(997, 'a') + "END");
  EXPECT_EQ(r.payload["stderr"], "oops\n");
  EXPECT_EQ(r.payload["output_truncated"], true);
  EXPECT_FALSE(r.output_truncated) << "the output cap was not reached";
  // Under the limit nothing is cut and nothing is marked.
  InvokeRequest small = Exec("printf hi");
  small.collect_tail_bytes = 1000;
  r = Call(small);
  EXPECT_EQ(r.payload["stdout"], "hi");
  EXPECT_FALSE(r.payload.contains("output_truncated"));
  // The cut never starts inside a UTF-8 character: 'é' is two bytes.
  InvokeRequest utf = Exec("for i in $(seq 600); do printf '\\303\\251'; done");
  utf.collect_tail_bytes = 101;
  r = Call(utf);
  const std::string tail = r.payload["stdout"];
  EXPECT_EQ(tail.size(), 100u);
  EXPECT_EQ(static_cast<unsigned char>(tail[0]), 0xC3);
}

TEST_F(ExecutorTest, OutputPastTheCapIsDroppedAndThePayloadNamesTheCap) {
  options_.max_output_bytes = 4096;
  SecurityContextConfig tight{{"*"}, "", {}, {}};
  tight.limits.max_output_bytes = 1000;
  options_.security_contexts["tight"] = tight;
  Open();
  // 10 000 bytes on stdout then a marker: the child runs to its end (policy drop), only the
  // first 4096 bytes are delivered, and the payload says the cap dropped the rest.
  InvokeRequest big = Exec("head -c 10000 /dev/zero | tr '\\0' a; printf END");
  InvokeResult r = Call(big);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.message;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.payload["stdout"], std::string(4096, 'a'));
  EXPECT_TRUE(r.output_truncated);
  EXPECT_EQ(r.payload["output_capped"], true);
  EXPECT_EQ(r.payload["output_cap_bytes"], 4096);
  EXPECT_EQ(r.payload["output_cap_key"], "sandbox.max_output_bytes");
  // A context's tighter cap is the one named.
  big.security_context = "tight";
  r = Call(big);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.message;
  EXPECT_EQ(r.payload["stdout"], std::string(1000, 'a'));
  EXPECT_EQ(r.payload["output_cap_bytes"], 1000);
  EXPECT_EQ(r.payload["output_cap_key"], "security_contexts.tight.limits.max_output_bytes");
  // Exactly at the cap nothing is dropped and nothing is marked.
  r = Call(Exec("head -c 4096 /dev/zero | tr '\\0' b"));
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.message;
  EXPECT_EQ(r.payload["stdout"], std::string(4096, 'b'));
  EXPECT_FALSE(r.output_truncated);
  EXPECT_FALSE(r.payload.contains("output_capped"));
  EXPECT_FALSE(r.payload.contains("output_cap_bytes"));
}

TEST_F(ExecutorTest, ATailLimitKeepsExactlyTheLastBytesWhenChunksAreLargerThanIt) {
  Open();
  // Megabytes through chunks far larger than the tail: what is kept is cut out of the last
  // chunks alone. The expected tails are built here, not by the executor's code.
  InvokeRequest numbers = Exec("seq 1 400000");
  numbers.collect_tail_bytes = 100;
  InvokeResult r = Call(numbers);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.message;
  std::string all;
  for (int i = 1; i <= 400000; ++i)
    all += std::to_string(i) + "\n";
  EXPECT_EQ(r.payload["stdout"], all.substr(all.size() - 100));
  EXPECT_EQ(r.payload["output_truncated"], true);
  // 3 000 000 bytes of "é\n" (C3 A9 0A): the last 101 start on A9, inside a character, so
  // the tail starts one byte later, on the newline.
  InvokeRequest accents = Exec("yes \303\251 | head -c 3000000");
  accents.collect_tail_bytes = 101;
  r = Call(accents);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.message;
  std::string want = "\n";
  for (int i = 0; i < 33; ++i)
    want += "\xC3\xA9\n";
  EXPECT_EQ(r.payload["stdout"], want);
}

TEST_F(ExecutorTest, FileTools) {
  Open();
  InvokeRequest w;
  w.tool = "file.write";
  w.args = json{{"path", "dir/a.txt"}, {"content", "aGVsbG8gd29ybGQ="}, {"mode", "0600"}};
  EXPECT_EQ(Call(w).outcome, Outcome::kOk);
  InvokeRequest rd;
  rd.tool = "file.read";
  rd.args = json{{"path", "dir/a.txt"}, {"offset", 6}};
  InvokeResult r = Call(rd);
  EXPECT_EQ(r.payload["content"], "d29ybGQ=");  // "world"
  InvokeRequest st;
  st.tool = "file.stat";
  st.args = json{{"path", "dir/a.txt"}};
  r = Call(st);
  EXPECT_EQ(r.payload["file"]["size"], 11);
  EXPECT_EQ(r.payload["file"]["mode"], "0600");
  InvokeRequest ls;
  ls.tool = "file.list";
  ls.args = json{{"path", "dir"}};
  r = Call(ls);
  ASSERT_EQ(r.payload["files"].size(), 1u);
  EXPECT_EQ(r.payload["files"][0]["path"], "dir/a.txt");
  InvokeRequest del;
  del.tool = "file.delete";
  del.args = json{{"path", "dir"}, {"recursive", true}};
  EXPECT_EQ(Call(del).outcome, Outcome::kOk);
  r = Call(st);
  EXPECT_EQ(r.error.code, ErrorCode::kNotFound);
  InvokeRequest escape;
  escape.tool = "file.read";
  escape.args = json{{"path", "../../../state/agent.db"}};
  ExpectError(Call(escape), ErrorCode::kPathOutsideRoot, "");
}

TEST_F(ExecutorTest, IdempotentCommandIdsSurviveARestart) {
  Open();
  InvokeResult first = Call(Exec("echo $$", "cmd-1"));
  ASSERT_EQ(first.outcome, Outcome::kOk);
  EXPECT_FALSE(first.replayed);
  InvokeResult again = Call(Exec("echo $$", "cmd-1"));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.payload, first.payload);  // the pid would differ if it had run again
  ex_.reset();
  Open();
  InvokeResult after = Call(Exec("echo $$", "cmd-1"));
  EXPECT_TRUE(after.replayed);
  EXPECT_EQ(after.payload, first.payload);
  EXPECT_EQ(after.command_id, "cmd-1");
  // An error result is stored too.
  InvokeRequest bad = Exec("true", "cmd-2");
  bad.args = json{{"command", 5}};
  EXPECT_EQ(Call(bad).error.code, ErrorCode::kInvalidArgument);
  InvokeResult bad_again = Call(bad);
  EXPECT_TRUE(bad_again.replayed);
  EXPECT_EQ(bad_again.error.code, ErrorCode::kInvalidArgument);
}

TEST_F(ExecutorTest, RunningCommandIdIsRefused) {
  Open();
  CancelSource cancel;
  auto running = Start(Exec("sleep 30", "dup"), cancel.token());
  WaitRunning(1);
  InvokeResult dup = Call(Exec("sleep 30", "dup"));
  ExpectError(dup, ErrorCode::kAlreadyExists, "'dup'");
  EXPECT_TRUE(dup.already_running) << "a door tells this refusal from a tool's ALREADY_EXISTS";
  cancel.Cancel("test done");
  InvokeResult r = running.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_EQ(r.reason, "test done");
  EXPECT_EQ(r.error.code, ErrorCode::kCancelled);
  EXPECT_FALSE(r.already_running);
}

TEST_F(ExecutorTest, ConcurrencyCaps) {
  options_.max_concurrent = 2;
  Open();
  CancelSource cancel;
  auto a = Start(Exec("sleep 30"), cancel.token());
  auto b = Start(Exec("sleep 30"), cancel.token());
  WaitRunning(2);
  ExpectError(Call(Exec("true")), ErrorCode::kResourceExhausted, "max_concurrent 2");
  cancel.Cancel("done");
  a.get();
  b.get();
  // Per context: "capped" allows one at a time.
  CancelSource c2;
  InvokeRequest one = Exec("sleep 30");
  one.security_context = "capped";
  auto first = Start(one, c2.token());
  WaitRunning(1);
  ExpectError(Call(one), ErrorCode::kResourceExhausted, "'capped'");
  c2.Cancel("done");
  first.get();
  EXPECT_EQ(Call(Exec("true")).outcome, Outcome::kOk);  // slots are given back
}

TEST_F(ExecutorTest, DeadlineFromArgs) {
  Open();
  InvokeRequest req = Exec("sleep 30");
  req.args["timeout"] = "200ms";
  InvokeResult r = CallAdvancing(req);
  EXPECT_EQ(r.outcome, Outcome::kTimedOut);
  EXPECT_EQ(r.signal, SIGTERM);
}

TEST_F(ExecutorTest, DrainRefusesNewWorkAndFinishesInFlight) {
  Open();
  auto running = Start(Exec("sleep 0.3; echo finished"));
  WaitRunning(1);
  ex_->Drain();
  EXPECT_TRUE(ex_->draining());
  ExpectError(Call(Exec("true")), ErrorCode::kDraining, "draining");
  SpawnRequest sp;
  sp.id = "sb";
  Lease lease = MakeLease("sb", 1);
  auto spawned = ex_->Spawn(sp, &lease);
  ASSERT_FALSE(spawned.has_value());
  EXPECT_EQ(spawned.error().code, ErrorCode::kDraining);
  InvokeResult r = running.get();
  EXPECT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(r.payload["stdout"], "finished\n");
}

TEST_F(ExecutorTest, ShutdownCancelsWhatIsLeftAfterGrace) {
  Open();
  // The shell must have ignored TERM before the shutdown begins (else TERM ends it, under a
  // loaded machine's scheduling): it says so through a file.
  const std::string ready = dir_ + "/trap.ready";
  auto running = Start(Exec("trap '' TERM; : > " + ready + "; sleep 30", "long"));
  WaitRunning(1);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return ::access(ready.c_str(), F_OK) == 0; }));
  std::promise<void> idle;
  ex_->Shutdown(50ms, [&] { idle.set_value(); });
  auto idle_future = idle.get_future();
  ASSERT_TRUE(AdvanceUntilReady(idle_future)) << "the grace and the kill grace run on the clock";
  InvokeResult r = running.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_EQ(r.reason, "agent shutdown");
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(ex_->running(), 0u);
  // Issue 16: the cut is the command's one terminal result (the door delivered it), stored
  // like any other: a repeat after the restart answers with it instead of running again.
  ex_.reset();
  Open();
  InvokeResult again = Call(Exec("echo ran", "long"));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.outcome, Outcome::kCancelled);
  EXPECT_EQ(again.reason, "agent shutdown");
  EXPECT_TRUE(ex_->TakeInterrupted("").empty()) << "it ended: nothing was interrupted";
}

// ---- issue 16: exactly one terminal result when the agent dies mid-command ----------------

// The agent is killed with -9 while a command runs: the next start kills what is left of its
// process group and ends the command with AGENT_RESTARTED — stored (a repeat answers with it,
// nothing runs twice) and handed once to the door that admitted it.
TEST_F(ExecutorTest, ACommandTheAgentDiedInEndsWithAgentRestartedOnce) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // orphans come back to us to be reaped
  // No other thread may run when we fork (ForkedAgent refuses to): waiting for the fixture's
  // io thread to be idle was not enough. It could still be freeing its handler when the fork
  // came, and under ASan the child inherited that allocator lock held: its admission thread
  // hung at its first allocation, the command never started (CI, stop 47).
  StopIoThread();
  edge::testing::ForkedAgent agent([&](const std::function<void()>& ready) {
    boost::asio::io_context io;
    // The command starts from the executor's admission thread, after this loop began to run
    // `io`: without work of its own `io` would stop before that.
    auto work = boost::asio::make_work_guard(io);
    auto ex = Executor::Open(io, SystemClock::Instance(), options_);
    if (!ex) ::_exit(3);
    InvokeRequest req = Exec("sleep 300 & sleep 300", "cmd-died");
    req.door_limit = InvokeRequest::DoorLimit{"edge", "edge.max_concurrent_commands", 4};
    (*ex)->Invoke(std::move(req), {}, {}, [](InvokeResult) { ::_exit(4); });
    while ((*ex)->running() < 1)
      io.run_one_for(std::chrono::seconds(1));
    // The shell dies with the agent (PDEATHSIG); what must survive it is the background
    // sleep, so wait until the shell has forked it (a fixed 200 ms was too short once under
    // the CI's load: the group died whole with the agent).
    auto forked = [&] {
      const pid_t group = RecordedGroup();
      return group > 0 && edge::testing::GroupMembers(group).size() >= 2;
    };
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(50);
    while (!forked() && std::chrono::steady_clock::now() < give_up)
      if (io.run_one_for(5ms) == 0) std::this_thread::sleep_for(5ms);
    ready();
    io.run_for(std::chrono::seconds(60));
  });
  StartIoThread();
  ASSERT_TRUE(agent.WaitReady());
  const pid_t pgid = RecordedGroup();
  ASSERT_GT(pgid, 0) << "the agent recorded no process group";
  struct Cleanup {  // whatever happens below, leave nothing behind
    pid_t pgid;
    ~Cleanup() {
      ::kill(-pgid, SIGKILL);
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    }
  } cleanup{pgid};
  ASSERT_TRUE(agent.Kill9());
  ASSERT_FALSE(edge::testing::GroupMembers(pgid).empty()) << "the background sleep survived";

  Open();  // the agent starts again
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return edge::testing::GroupMembers(pgid).empty(); }));
  EXPECT_TRUE(ex_->TakeInterrupted("worker").empty()) << "only the admitting door gets it";
  auto interrupted = ex_->TakeInterrupted("edge");
  ASSERT_EQ(interrupted.size(), 1u);
  const InvokeResult& r = interrupted[0];
  EXPECT_EQ(r.command_id, "cmd-died");
  ExpectError(r, ErrorCode::kAgentRestarted, "command cmd-died (tool exec, admitted at ");
  EXPECT_NE(r.error.message.find("process group " + std::to_string(pgid) + " was killed"),
            std::string::npos)
      << r.error.message;
  EXPECT_TRUE(ex_->TakeInterrupted("edge").empty()) << "handed over once";

  InvokeResult again = Call(Exec("echo ran twice", "cmd-died"));
  EXPECT_TRUE(again.replayed) << "the repeat answers with the stored result";
  EXPECT_EQ(again.error.code, ErrorCode::kAgentRestarted);

  ex_.reset();
  Open();
  EXPECT_TRUE(ex_->TakeInterrupted("edge").empty()) << "the journal was cleared";
}

// A command admitted but never started (no process group), and one whose result was stored
// just before the agent died (only its journal entry left), from journal rows as the
// previous process left them.
TEST_F(ExecutorTest, JournalRowsLeftBehindEndOnceWithWhatIsKnown) {
  Open();
  InvokeResult ended = Call(Exec("echo done", "cmd-ended"));
  ASSERT_EQ(ended.outcome, Outcome::kOk);
  ex_.reset();
  LeaveJournalRows({{"cmd-queued", "file.read", "edge", 1'800'000'000'000},
                    {"cmd-ended", "exec", "edge", 1'800'000'000'001}});
  Open();
  auto interrupted = ex_->TakeInterrupted("edge");
  ASSERT_EQ(interrupted.size(), 2u);
  EXPECT_EQ(interrupted[0].command_id, "cmd-queued");
  ExpectError(interrupted[0], ErrorCode::kAgentRestarted,
              "command cmd-queued (tool file.read, admitted at 2027-01-15T08:00:00Z) was running "
              "when the agent stopped without ending it; it had no process running");
  EXPECT_EQ(interrupted[1].command_id, "cmd-ended");
  EXPECT_EQ(interrupted[1].outcome, Outcome::kOk) << "its stored result, not AGENT_RESTARTED";
  EXPECT_EQ(interrupted[1].payload["stdout"], "done\n");
  EXPECT_FALSE(interrupted[1].replayed);
}

// A confirming door's (the edge door's outbox) rows stay until it confirms it stored each
// result: an agent that dies again before that delivers the same stored result at its next
// start. Another door's rows go at Open.
TEST_F(ExecutorTest, AConfirmingDoorsJournalRowStaysUntilTheDoorHasTheResult) {
  options_.confirming_doors = {"edge"};
  LeaveJournalRows({{"cmd-edge", "exec", "edge", 1'800'000'000'000},
                    {"cmd-worker", "exec", "worker", 1'800'000'000'001}});
  Open();
  auto first = ex_->TakeInterrupted("edge");
  ASSERT_EQ(first.size(), 1u);
  ExpectError(first[0], ErrorCode::kAgentRestarted, "command cmd-edge (tool exec");
  ASSERT_EQ(ex_->TakeInterrupted("worker").size(), 1u);

  // The agent dies again before the door confirmed: the same result, read back.
  ex_.reset();
  Open();
  auto second = ex_->TakeInterrupted("edge");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].command_id, "cmd-edge");
  EXPECT_EQ(second[0].error.message, first[0].error.message) << "the stored one, not a new one";
  EXPECT_TRUE(ex_->TakeInterrupted("worker").empty()) << "a non-confirming door's row went";

  ASSERT_TRUE(ex_->ConfirmInterrupted("cmd-edge"));
  ASSERT_TRUE(ex_->ConfirmInterrupted("cmd-edge")) << "idempotent";
  ex_.reset();
  Open();
  EXPECT_TRUE(ex_->TakeInterrupted("edge").empty()) << "confirmed: the row is gone";
}

// Every fdatasync of the state database's WAL (ExecutorOptions::state_db), counted.
std::atomic<int> g_wal_syncs{0};
int CountedSync(int fd) {
  g_wal_syncs.fetch_add(1);
  return ::fdatasync(fd);
}

// A confirming door (the edge door) writes the result to its outbox, synced, in the same
// database right after Finish: the result's idempotency record does not wait for a sync of
// its own. Another door's record is synced before its caller gets the result.
TEST_F(ExecutorTest, AConfirmingDoorsResultRecordLeavesTheSyncToTheDoor) {
  options_.confirming_doors = {"edge"};
  options_.state_db.fdatasync = CountedSync;
  Open();
  auto syncs_for = [&](const std::string& door, const std::string& id) {
    InvokeRequest r = Exec("true", id);
    r.door_limit = InvokeRequest::DoorLimit{door, door + ".max", 4};
    const int before = g_wal_syncs.load();
    EXPECT_EQ(Call(r).outcome, Outcome::kOk) << id;
    return g_wal_syncs.load() - before;
  };
  (void)syncs_for("worker", "cmd-warm-up");  // the first sync also syncs the directory
  EXPECT_EQ(syncs_for("worker", "cmd-worker"), 2) << "journal admission + result record";
  EXPECT_EQ(syncs_for("edge", "cmd-edge"), 1) << "journal admission only";
  // The relaxed record is a record all the same: a repeat answers with it, and so does a
  // reopened database (what a process crash leaves; only a power cut could undo it).
  InvokeResult again = Call(Exec("echo never", "cmd-edge"));
  EXPECT_TRUE(again.replayed);
  ex_.reset();
  Open();
  EXPECT_TRUE(Call(Exec("echo never", "cmd-edge")).replayed);
}

// Issue 14: no door's thread waits for the disk. Invoke writes the journal row without waiting;
// the admission thread waits for its sync — one for every command admitted meanwhile — and
// only then starts the commands (a command must never run without its row on disk).
std::atomic<bool> g_sync_gate_open{true};
std::atomic<int> g_gated_syncs{0};
int GatedSync(int fd) {
  g_gated_syncs.fetch_add(1);
  while (!g_sync_gate_open.load())
    std::this_thread::sleep_for(1ms);
  return ::fdatasync(fd);
}

// An executor whose WAL syncs wait while the test holds the gate closed (g_sync_gate_open),
// with the edge door confirming; one command has run, so the directory's own sync is done.
// The gate opens again on every way out of a test: the executor is never left stuck.
class GatedSyncTest : public ExecutorTest {
 protected:
  void SetUp() override {
    ExecutorTest::SetUp();
    options_.confirming_doors = {"edge"};
    options_.state_db.fdatasync = GatedSync;
    Open();
    ASSERT_EQ(Call(Exec("true", "cmd-warm-up")).outcome, Outcome::kOk);
  }
  void TearDown() override {
    g_sync_gate_open = true;
    ExecutorTest::TearDown();
  }
};

TEST_F(GatedSyncTest, CommandsStartOnceTheirJournalRowsAreOnDiskAndShareTheSync) {
  g_sync_gate_open = false;  // the disk stalls
  const int before = g_gated_syncs.load();
  constexpr int kCommands = 8;
  std::vector<std::future<InvokeResult>> results;
  auto invoking = std::async(std::launch::async, [&] {
    for (int i = 0; i < kCommands; ++i) {
      InvokeRequest r = Exec("true", "cmd-batch-" + std::to_string(i));
      r.door_limit = InvokeRequest::DoorLimit{"edge", "edge.max", 16};
      results.push_back(Start(std::move(r)));
    }
  });
  if (invoking.wait_for(30s) != std::future_status::ready) {
    g_sync_gate_open = true;
    FAIL() << "Invoke waited for the disk";
  }
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return g_gated_syncs.load() > before; }))
      << "the admission thread never synced";
  std::this_thread::sleep_for(200ms);  // time enough for a command started too early to end
  for (auto& f : results)
    EXPECT_EQ(f.wait_for(0s), std::future_status::timeout) << "ran before its row was on disk";
  g_sync_gate_open = true;
  for (auto& f : results) {
    ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
    EXPECT_EQ(f.get().outcome, Outcome::kOk);
  }
  EXPECT_LE(g_gated_syncs.load() - before, 2) << "eight admissions, one or two syncs";
  EXPECT_EQ(ex_->running(), 0u);
}

// Issue 14: a door that answers its caller itself (not confirming) gets a result only once
// the result's record is on disk — but the thread that ends commands does not wait for that
// sync: the admission thread does, one sync for every result recorded meanwhile.
TEST_F(GatedSyncTest, AnAnsweringDoorsResultsWaitForTheirRecordsSyncAndShareIt) {
  const std::string dir = options_.data_dir;
  auto worker = [](InvokeRequest r) {
    r.door_limit = InvokeRequest::DoorLimit{"worker", "worker.max", 16};
    return r;
  };
  constexpr int kCommands = 8;
  std::vector<std::future<InvokeResult>> results;
  for (int i = 0; i < kCommands; ++i) {
    // Each says it runs, then waits for the test's go.
    results.push_back(
        Start(worker(Exec("touch '" + dir + "/ran-" + std::to_string(i) + "'; while [ ! -e '" +
                              dir + "/go' ]; do sleep 0.02; done",
                          "cmd-answer-" + std::to_string(i)))));
  }
  ASSERT_TRUE(edge::testing::WaitUntil(
      [&] {
        for (int i = 0; i < kCommands; ++i)
          if (!fs::exists(dir + "/ran-" + std::to_string(i))) return false;
        return true;
      },
      30s))
      << "the commands never all ran";
  const int before = g_gated_syncs.load();
  g_sync_gate_open = false;  // the disk stalls while they end
  std::ofstream(dir + "/go").put('\n');
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return g_gated_syncs.load() > before; }, 30s))
      << "no result waited for a sync";
  std::this_thread::sleep_for(500ms);  // every command ends meanwhile (they wait for nothing)
  for (auto& f : results) {
    EXPECT_EQ(f.wait_for(0s), std::future_status::timeout)
        << "answered before its record was on disk";
  }
  // A repeat is not answered from a record that is not yet on disk either.
  auto repeat = Start(worker(Exec("echo never", "cmd-answer-3")));
  // Meanwhile the thread that ends commands is free: a command without a record ends.
  auto free = Start(Exec("true"));
  EXPECT_EQ(free.wait_for(10s), std::future_status::ready)
      << "the thread that ends commands waited for the disk";
  EXPECT_EQ(repeat.wait_for(0s), std::future_status::timeout)
      << "a repeat was answered from a record not on disk";
  g_sync_gate_open = true;
  for (auto& f : results) {
    ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
    EXPECT_EQ(f.get().outcome, Outcome::kOk);
  }
  EXPECT_LE(g_gated_syncs.load() - before, 2) << "eight results, one or two syncs";
  ASSERT_EQ(repeat.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(repeat.get().replayed) << "the repeat is answered with the stored result";
}

// Review finding (stop 30): a Shutdown's waiter goes only after every answer was delivered,
// also one still waiting for its record's sync when the last command ended.
TEST_F(GatedSyncTest, AShutdownWaitsForAnswersStillWaitingForTheirSync) {
  const std::string dir = options_.data_dir;
  InvokeRequest r =
      Exec("touch '" + dir + "/ran'; while [ ! -e '" + dir + "/go' ]; do sleep 0.02; done",
           "cmd-last-answer");
  r.door_limit = InvokeRequest::DoorLimit{"worker", "worker.max", 4};
  std::atomic<int> order{0}, answered_at{0}, idle_at{0};
  std::promise<void> idle;
  ex_->Invoke(std::move(r), {}, {}, [&](InvokeResult) { answered_at = ++order; });
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return fs::exists(dir + "/ran"); }, 30s));
  const int before = g_gated_syncs.load();
  g_sync_gate_open = false;
  std::ofstream(dir + "/go").put('\n');
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return g_gated_syncs.load() > before; }, 30s));
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return ex_->running() == 0; }, 30s))
      << "the command never ended";
  ex_->Shutdown(50ms, [&] {
    idle_at = ++order;
    idle.set_value();
  });
  auto idle_future = idle.get_future();
  EXPECT_EQ(idle_future.wait_for(300ms), std::future_status::timeout)
      << "idle while an answer waits for its sync";
  g_sync_gate_open = true;
  ASSERT_EQ(idle_future.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(answered_at.load(), 1);
  EXPECT_EQ(idle_at.load(), 2) << "the waiter went after the answer";
}

// Review finding (stop 27): with the result and its record no longer waiting for the disk, a
// command whose journal row cannot reach the disk must not run — a power cut could lose every
// trace of it, and the controller's resend would run it again. It is refused, not recorded.
std::atomic<bool> g_fail_syncs{false};
int SyncThatFailsWhenTold(int fd) {
  if (g_fail_syncs.load()) {
    errno = EIO;
    return -1;
  }
  return ::fdatasync(fd);
}

TEST_F(ExecutorTest, ACommandWhoseJournalRowCannotReachTheDiskIsNotStarted) {
  options_.state_db.fdatasync = SyncThatFailsWhenTold;
  Open();
  g_fail_syncs = true;
  struct Reset {
    ~Reset() { g_fail_syncs = false; }
  } reset;
  const std::string marker = options_.data_dir + "/ran";
  InvokeResult r = Call(Exec("touch " + marker, "cmd-unjournaled"));
  ExpectError(r, ErrorCode::kUnavailable,
              "command cmd-unjournaled was not started: the agent could not record it on disk");
  EXPECT_NE(r.error.message.find("fdatasync failed"), std::string::npos) << r.error.message;
  EXPECT_FALSE(fs::exists(marker)) << "it ran";
  EXPECT_EQ(ex_->running(), 0u);
}

// The journal row of a command goes only after its door's done callback returned (the edge
// door writes its outbox row there): a crash in between finds the row, never a result lost.
TEST_F(ExecutorTest, TheJournalRowOutlivesTheDoorsDoneCallback) {
  Open();
  auto db = StateDb::Open(options_.data_dir);  // a second connection, as after a crash
  ASSERT_TRUE(db.has_value()) << db.error().ToString();
  auto journal = CommandJournal::Open(**db);
  ASSERT_TRUE(journal.has_value());
  auto in_journal = [&] { return InJournal(**journal, "cmd-order"); };
  std::promise<bool> seen;
  ex_->Invoke(Exec("echo hi", "cmd-order"), {}, {},
              [&](InvokeResult) { seen.set_value(in_journal()); });
  auto f = seen.get_future();
  ASSERT_EQ(f.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(f.get()) << "the row was gone while the door still held the result";
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return !in_journal(); }))
      << "the row stayed after the callback";
}

// Review finding (issue 16): when a command's result cannot be stored for idempotency, a repeat
// of its command_id runs it again — and may be admitted inside the first run's done callback,
// before the first run removes its journal row. That removal must leave the repeat's row, or
// an agent that dies during the repeat would never answer it (no AGENT_RESTARTED).
TEST_F(ExecutorTest, ARepeatAdmittedAsTheFirstRunEndsKeepsItsOwnJournalRow) {
  Open();
  auto db = StateDb::Open(options_.data_dir);  // a second connection, as after a crash
  ASSERT_TRUE(db.has_value()) << db.error().ToString();
  // The result store refuses this command's result (a full disk would, for every result).
  ASSERT_TRUE(
      (*db)->Exec("CREATE TRIGGER refuse_twice BEFORE INSERT ON idempotency "
                  "WHEN NEW.command_id = 'cmd-twice' "
                  "BEGIN SELECT RAISE(ABORT, 'test: result refused'); END"));
  auto journal = CommandJournal::Open(**db);
  ASSERT_TRUE(journal.has_value());
  auto in_journal = [&] { return InJournal(**journal, "cmd-twice"); };
  // Both runs end on the fixture's one io thread: the repeat's done callback runs after the
  // first run's Finish has returned, journal removal included.
  std::promise<bool> repeat_saw_its_row;
  ex_->Invoke(Exec("true", "cmd-twice"), {}, {}, [&](InvokeResult first) {
    EXPECT_EQ(first.outcome, Outcome::kOk);
    ex_->Invoke(Exec("sleep 0.2", "cmd-twice"), {}, {}, [&](InvokeResult repeat) {
      EXPECT_EQ(repeat.outcome, Outcome::kOk) << repeat.error.message;
      EXPECT_FALSE(repeat.replayed) << "nothing was stored: the repeat ran";
      repeat_saw_its_row.set_value(in_journal());
    });
  });
  auto repeat = repeat_saw_its_row.get_future();
  ASSERT_EQ(repeat.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(repeat.get()) << "the first run's end removed the repeat's journal row";
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return !in_journal(); }))
      << "the repeat's own end removes it";
}

// The worker door's file methods are tools too (wire.md §4 argument names), admitted and
// fenced through Invoke like any command.
TEST_F(ExecutorTest, MoveChmodAndGlobAreToolsFencedByTheSandboxLease) {
  Open();
  SpawnRequest sp;
  sp.id = "sb-files";
  Lease gen2 = MakeLease("sb-files", 2);
  ASSERT_TRUE(ex_->Spawn(sp, &gen2).has_value());
  auto on_sandbox = [&](std::string tool, json args, std::optional<Lease> lease) {
    InvokeRequest r;
    r.tool = std::move(tool);
    r.args = std::move(args);
    r.sandbox_id = "sb-files";
    r.lease = std::move(lease);
    return Call(r);
  };
  const std::string root = options_.data_dir + "/sandboxes/sb-files/root";
  ASSERT_EQ(on_sandbox("file.write", {{"path", "a/one.txt"}, {"content", "MQ=="}}, gen2).outcome,
            Outcome::kOk);
  InvokeResult mv =
      on_sandbox("file.move", {{"old_path", "a/one.txt"}, {"new_path", "b.txt"}}, gen2);
  ASSERT_EQ(mv.outcome, Outcome::kOk) << mv.error.ToString();
  EXPECT_EQ(mv.payload, (json{{"old_path", "a/one.txt"}, {"new_path", "b.txt"}, {"moved", true}}));
  EXPECT_TRUE(fs::exists(root + "/b.txt"));
  EXPECT_FALSE(fs::exists(root + "/a/one.txt"));

  InvokeResult ch = on_sandbox("file.chmod", {{"path", "b.txt"}, {"mode", "0600"}}, gen2);
  ASSERT_EQ(ch.outcome, Outcome::kOk) << ch.error.ToString();
  EXPECT_EQ(fs::status(root + "/b.txt").permissions() & fs::perms::mask,
            fs::perms::owner_read | fs::perms::owner_write);
  ExpectError(on_sandbox("file.chmod", {{"path", "b.txt"}}, gen2), ErrorCode::kInvalidArgument,
              "file.chmod arg 'mode': missing");

  InvokeResult gl = on_sandbox("file.glob", {{"pattern", "*.txt"}}, std::nullopt);
  ASSERT_EQ(gl.outcome, Outcome::kOk) << gl.error.ToString();
  EXPECT_EQ(gl.payload, (json{{"matches", {"b.txt"}}}));

  // A stale generation moves nothing; a path out of the root is refused before any change.
  ExpectError(on_sandbox("file.move", {{"old_path", "b.txt"}, {"new_path", "c.txt"}},
                         MakeLease("sb-files", 1)),
              ErrorCode::kLeaseRejected, "");
  ExpectError(on_sandbox("file.move", {{"old_path", "b.txt"}, {"new_path", "../../escaped"}}, gen2),
              ErrorCode::kPathOutsideRoot, "");
  ExpectError(on_sandbox("file.move", {{"old_path", "b.txt"}}, gen2), ErrorCode::kInvalidArgument,
              "file.move arg 'new_path': missing");
  EXPECT_TRUE(fs::exists(root + "/b.txt"));
}

TEST_F(ExecutorTest, LeaseIsCheckedBeforeAnySandboxMutation) {
  Open();
  SpawnRequest sp;
  sp.id = "sb1";
  std::string sb_dir = options_.data_dir + "/sandboxes/sb1";
  auto no_lease = ex_->Spawn(sp, nullptr);
  ASSERT_FALSE(no_lease.has_value());
  EXPECT_EQ(no_lease.error().code, ErrorCode::kLeaseRejected);
  Lease foreign = MakeLease("sb1", 1, "worker-2");
  auto r = ex_->Spawn(sp, &foreign);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kLeaseRejected);
  Lease wrong_resource = MakeLease("other", 1);
  EXPECT_EQ(ex_->Spawn(sp, &wrong_resource).error().code, ErrorCode::kLeaseRejected);
  EXPECT_FALSE(fs::exists(sb_dir));
  EXPECT_FALSE(ex_->Status("sb1").has_value());

  Lease gen5 = MakeLease("sb1", 5);
  auto ok = ex_->Spawn(sp, &gen5);
  ASSERT_TRUE(ok.has_value()) << ok.error().ToString();
  EXPECT_TRUE(fs::is_directory(sb_dir + "/root"));
  EXPECT_EQ(ex_->Status("sb1")->state, SandboxState::kRunning);

  // A stale generation cannot write or destroy.
  Lease gen4 = MakeLease("sb1", 4);
  auto w = ex_->WriteFile("sb1", "f.txt", "data", "", &gen4);
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code, ErrorCode::kLeaseRejected);
  EXPECT_FALSE(fs::exists(sb_dir + "/root/f.txt"));
  EXPECT_EQ(Destroy("sb1", &gen4).error().code, ErrorCode::kLeaseRejected);
  EXPECT_TRUE(fs::is_directory(sb_dir + "/root"));

  // Generations persist across a restart of the executor.
  ex_.reset();
  Open();
  EXPECT_EQ(Destroy("sb1", &gen4).error().code, ErrorCode::kLeaseRejected);
  EXPECT_TRUE(ex_->WriteFile("sb1", "f.txt", "data", "", &gen5).has_value());
  EXPECT_EQ(*ex_->ReadFile("sb1", "f.txt"), "data");
  Lease gen6 = MakeLease("sb1", 6);
  ASSERT_TRUE(Destroy("sb1", &gen6).has_value());
  EXPECT_FALSE(fs::exists(sb_dir));
  EXPECT_EQ(ex_->Status("sb1")->state, SandboxState::kDestroyed);
  auto gone = ex_->ReadFile("sb1", "f.txt");
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
}

TEST_F(ExecutorTest, MaxSandboxes) {
  options_.max_sandboxes = 2;
  Open();
  for (const char* id : {"a", "b"}) {
    SpawnRequest sp;
    sp.id = id;
    Lease l = MakeLease(id, 1);
    ASSERT_TRUE(ex_->Spawn(sp, &l).has_value());
  }
  SpawnRequest sp;
  sp.id = "c";
  Lease l = MakeLease("c", 1);
  auto r = ex_->Spawn(sp, &l);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_FALSE(fs::exists(options_.data_dir + "/sandboxes/c"));
  EXPECT_EQ(ex_->List()->size(), 2u);
  sp.id = "_default";
  Lease d = MakeLease("_default", 1);
  EXPECT_EQ(ex_->Spawn(sp, &d).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(ExecutorTest, SandboxExecWritesTheConsoleLog) {
  Open();
  SpawnRequest sp;
  sp.id = "sb";
  Lease lease = MakeLease("sb", 1);
  ASSERT_TRUE(ex_->Spawn(sp, &lease).has_value());
  auto p = std::make_shared<std::promise<InvokeResult>>();
  ex_->Exec("sb", json{{"command", "pwd; echo line2; printf tail"}}, std::nullopt, "", {}, {},
            [p](InvokeResult r) { p->set_value(std::move(r)); });
  InvokeResult r = p->get_future().get();
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
  std::string root = ex_->Status("sb")->root_dir;
  EXPECT_EQ(r.payload["stdout"], root + "\nline2\ntail");
  auto logs = ex_->Logs("sb", 10);
  ASSERT_TRUE(logs.has_value());
  EXPECT_EQ(*logs, (std::vector<std::string>{root, "line2", "tail"}));
  EXPECT_EQ(ex_->Logs("nope", 10).error().code, ErrorCode::kNotFound);
  InvokeRequest missing = Exec("true");
  missing.sandbox_id = "nope";
  ExpectError(Call(missing), ErrorCode::kNotFound, "nope");
}

TEST_F(ExecutorTest, WorkStopsWhenItsLeaseExpiresUnrenewed) {
  Open();
  SpawnRequest sp;
  sp.id = "sb";
  Lease lease = MakeLease("sb", 1);
  ASSERT_TRUE(ex_->Spawn(sp, &lease).has_value());
  InvokeRequest req = Exec("sleep 30");
  req.sandbox_id = "sb";
  req.lease = lease;
  // Only the lease may end it: the default time limit (60 s) lies inside the 150 s the test
  // moves the clock, and its timer, when it fired first, ended the command as timed out.
  req.timeout = std::chrono::hours(1);
  auto running = Start(req);
  WaitRunning(1);
  EXPECT_EQ(ex_->Tick(clock_.Now()), 0u);  // not expired yet
  // Renewed: still fine past the first expiry.
  Lease renewed = lease;
  renewed.expires_at = clock_.Now() + 120s;
  ASSERT_TRUE(ex_->RenewLease(renewed).has_value());
  clock_.Advance(90s);
  EXPECT_EQ(ex_->Tick(clock_.Now()), 0u);
  EXPECT_EQ(ex_->running(), 1u);
  clock_.Advance(60s);
  EXPECT_EQ(ex_->Tick(clock_.Now()), 1u);
  InvokeResult r = running.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled) << r.error.ToString() << " | " << r.reason;
  EXPECT_NE(r.reason.find("expired"), std::string::npos);
  // An expired lease is refused for new work.
  auto again = Call(req);
  EXPECT_EQ(again.error.code, ErrorCode::kLeaseRejected);
}

TEST_F(ExecutorTest, SandboxWhoseTtlRunsOutIsDestroyedOnTickOnceItsCommandsHaveEnded) {
  Open();
  SpawnRequest forever;
  forever.id = "forever";
  Lease lease2 = MakeLease("forever", 1);
  ASSERT_TRUE(ex_->Spawn(forever, &lease2).has_value());
  auto [root, running, pid] = SpawnStubborn("short", 30s);
  clock_.Advance(29s);
  ex_->Tick(clock_.Now());
  EXPECT_EQ(ex_->Status("short")->state, SandboxState::kRunning);
  clock_.Advance(2s);
  // Expired: its command is cancelled, but it still runs (SIGKILL comes after the kill grace),
  // so the tick, which never waits, leaves the workspace where the process still is.
  ex_->Tick(clock_.Now());
  EXPECT_EQ(::kill(pid, 0), 0) << "the command still runs until the kill grace has passed";
  EXPECT_TRUE(fs::exists(root)) << "the workspace stays while a command of it runs";
  EXPECT_EQ(ex_->Status("short")->state, SandboxState::kRunning);
  InvokeRequest late = Exec("true");
  late.sandbox_id = "short";
  ExpectError(Call(late), ErrorCode::kFailedPrecondition, "being destroyed");
  ASSERT_TRUE(AdvanceUntilReady(running));
  InvokeResult r = running.get();
  EXPECT_EQ(r.outcome, Outcome::kCancelled) << r.error.message;
  EXPECT_NE(r.reason.find("expired"), std::string::npos) << r.reason;
  // Its end lets the destroy go on, without another tick.
  EXPECT_TRUE(edge::testing::WaitUntil([&] {
    auto gone = ex_->Status("short");
    return !gone.has_value() || gone->state == SandboxState::kDestroyed;
  }));
  EXPECT_FALSE(fs::exists(root));
  EXPECT_EQ(ex_->Status("forever")->state, SandboxState::kRunning) << "no ttl, no expiry";
}

TEST_F(ExecutorTest, DestroyAnswersOnlyOnceTheSandboxsCommandsHaveEndedAndItsWorkspaceIsGone) {
  Open();
  auto [root, running, pid] = SpawnStubborn("sb");
  Lease lease = MakeLease("sb", 1);
  SpawnRequest sp;
  sp.id = "sb";
  auto destroyed = DestroyAsync("sb", &lease);
  EXPECT_EQ(destroyed.wait_for(100ms), std::future_status::timeout)
      << "answered while the command still runs";
  // The answer waits for the SIGKILL, which the clock's kill grace brings.
  ASSERT_TRUE(AdvanceUntilReady(destroyed));
  auto info = destroyed.get();
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  EXPECT_EQ(info->state, SandboxState::kDestroyed);
  EXPECT_EQ(running.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(running.get().outcome, Outcome::kCancelled);
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1) << "the command's process outlived the destroy";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(fs::exists(fs::path(root).parent_path())) << "workspace and console log go";
  // A sandbox spawned again under the id starts empty, and nothing of the old one writes in it.
  ASSERT_TRUE(ex_->Spawn(sp, &lease).has_value());
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(fs::is_empty(root));
}

TEST_F(ExecutorTest, ADestroyThatOutwaitsItsBoundKeepsTheWorkspaceRefusesNewWorkAndCanBeRepeated) {
  options_.destroy_wait = 100ms;
  options_.kill_grace = 1s;
  Open();
  auto [root, running, pid] = SpawnStubborn("sb");
  Lease lease = MakeLease("sb", 1);
  SpawnRequest sp;
  sp.id = "sb";
  ASSERT_TRUE(ex_->WriteFile("sb", "keep.txt", "data", "", &lease).has_value());
  // SIGKILL comes 1 s after the cancel on the clock: the command outlives the 100 ms wait.
  auto answer = DestroyAsync("sb", &lease);
  ASSERT_TRUE(AdvanceUntilReady(answer));
  auto first = answer.get();
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(first.error().message.find("1 of its commands still running"), std::string::npos)
      << first.error().message;
  EXPECT_TRUE(fs::exists(root + "/keep.txt")) << "nothing of the workspace is removed";
  EXPECT_EQ(ex_->Status("sb")->state, SandboxState::kRunning);
  // Until a destroy succeeds the sandbox takes no new work and cannot be spawned anew.
  InvokeRequest more = Exec("true");
  more.sandbox_id = "sb";
  ExpectError(Call(more), ErrorCode::kFailedPrecondition, "being destroyed");
  auto write = ex_->WriteFile("sb", "new.txt", "x", "", &lease);
  ASSERT_FALSE(write.has_value());
  EXPECT_EQ(write.error().code, ErrorCode::kFailedPrecondition);
  auto read = ex_->ReadFile("sb", "keep.txt");
  ASSERT_FALSE(read.has_value());
  EXPECT_NE(read.error().message.find("being destroyed"), std::string::npos);
  auto again = ex_->Spawn(sp, &lease);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition)
      << "not ALREADY_EXISTS, which a control plane may take for a spawn that happened";
  EXPECT_NE(again.error().message.find("being destroyed"), std::string::npos);
  // Once the command has ended, destroying again finishes the job.
  ASSERT_TRUE(AdvanceUntilReady(running));
  EXPECT_EQ(running.get().outcome, Outcome::kCancelled);
  auto second = Destroy("sb", &lease);
  ASSERT_TRUE(second.has_value()) << second.error().ToString();
  EXPECT_FALSE(fs::exists(root));
  ASSERT_TRUE(ex_->Spawn(sp, &lease).has_value()) << "the id is free again";
  EXPECT_TRUE(fs::is_empty(root));
}

TEST_F(ExecutorTest, ConcurrentLeaseChecksWithMixedGenerations) {
  Open();
  SpawnRequest sp;
  sp.id = "sb";
  Lease first = MakeLease("sb", 1);
  ASSERT_TRUE(ex_->Spawn(sp, &first).has_value());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int g = 1; g <= 20; ++g) {
        Lease l = MakeLease("sb", (g * 7 + t * 3) % 20 + 1);
        (void)ex_->WriteFile("sb", "f" + std::to_string(t), "x", "", &l);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  // Generation 20 was offered, so every lower one is now refused.
  Lease low = MakeLease("sb", 19);
  auto w = ex_->WriteFile("sb", "late", "x", "", &low);
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code, ErrorCode::kLeaseRejected);
  Lease top = MakeLease("sb", 20);
  EXPECT_TRUE(ex_->WriteFile("sb", "late", "x", "", &top).has_value());
}

}  // namespace
}  // namespace edge::sandbox
