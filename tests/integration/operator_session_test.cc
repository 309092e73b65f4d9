// Operator sessions end to end through the real binaries on loopback (wire.md §5.2–§5.5):
// POST a session on an agent's interactive tool, open WebSockets with one-time tickets, and
// check the relay's rules where the issue asks for them — a reused ticket is 401, two
// sockets see the same seq stream, the same message_id from both reaches the node once, a
// forbidden tool never reaches it, usage shows in the metrics, DELETE ends the session and
// kills the process, a killed agent gives NODE_DISCONNECTED, another tenant sees 404, pushed
// edge_api.limits reach every socket as node.config.changed while sessions keep their pinned
// versions.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <filesystem>
#include <fstream>

#include "common/random.h"
#include "tests/integration/operator_fixture.h"
#include "tests/support/processes.h"

namespace edge::testing {
namespace {

using nlohmann::json;

// Live processes whose command line mentions `needle` (from /proc; zombies left out).
std::vector<pid_t> ProcessesRunning(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(e.path() / "cmdline", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(cmdline)), {});
    const pid_t pid = static_cast<pid_t>(std::stoi(name));
    if (text.find(needle) != std::string::npos && !ProcessGone(pid)) out.push_back(pid);
  }
  return out;
}

// Answers each input line with an agent.message, a plain line and a session.usage frame.
constexpr const char* kChatScript = R"(echo ready
n=0
while IFS= read -r line; do
  n=$((n+1))
  printf '{"type":"agent.message","payload":{"n":%d}}\n' "$n"
  printf 'plain %d\n' "$n"
  printf '{"type":"session.usage","payload":{"input_tokens":3,"output_tokens":5,"estimated_cost":0.25,"tool_invocations":1}}\n'
done
)";

class OperatorSessionTest : public OperatorFixture {
 protected:
  void StartChatAgent(const std::string& node = "edge-01") {
    const std::string script = dir_ / "chat.sh";
    WriteText(script, kChatScript);
    EnrollAndStart(
        node, "tools:\n  chat:\n    command: [sh, \"" + script + "\"]\n    interactive: true\n");
  }
  // POST …/sessions as `token`: the 201 body.
  json CreateSession(const std::string& token, const std::string& node = "edge-01") {
    auto r =
        Http("POST", "/v1/edge/nodes/" + node + "/sessions", token, R"({"agent_name":"chat"})");
    EXPECT_EQ(r.status, 201u) << r.body;
    return Body(r);
  }
  std::string Ticket(const std::string& token, const std::string& session) {
    auto r = Http("POST", "/v1/edge/sessions/" + session + "/tickets", token);
    EXPECT_EQ(r.status, 201u) << r.body;
    return Body(r).value("edge_ws_ticket", "");
  }
  static std::string Target(const std::string& ticket, const std::string& session,
                            const std::string& extra = "") {
    return "/v1/edge/ws/stream?ticket=" + ticket + "&session_id=" + session + extra;
  }
  static std::string Prompt(const std::string& session, const std::string& message_id,
                            const json& payload = json{{"text", "hello"}}) {
    return json{{"v", "rawp-dps-1.0"},      {"type", "control.prompt.request"},
                {"message_id", message_id}, {"timestamp", "2026-11-25T00:00:00Z"},
                {"session_id", session},    {"payload", payload}}
        .dump();
  }
  // How many commands of `tool` the controller sent to the node.
  int CommandsOf(const std::string& tool, const std::string& node = "edge-01") {
    auto r = Ctl({"commands", "--node", node, "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto list = json::parse(r.out, nullptr, false);
    if (!list.is_array()) return -1;
    return static_cast<int>(std::count_if(
        list.begin(), list.end(), [&](const json& c) { return c.value("tool", "") == tool; }));
  }
  static auto IsType(const std::string& type) {
    return [type](const json& f) { return f.value("type", "") == type; };
  }
  static auto IsOutput(const std::string& data) {
    return [data](const json& f) {
      return f.value("type", "") == "agent.output" && f["payload"].value("data", "") == data;
    };
  }
};

TEST_F(OperatorSessionTest, TwoSocketsMirrorOneSessionAndTheRelayRulesHold) {
  StartChatAgent();
  const std::string alice = UserToken("alice", "default");
  json created = CreateSession(alice);
  const std::string sid = created.value("session_id", "");
  ASSERT_EQ(sid.size(), 36u) << created.dump();
  const std::string status = created.value("status", "");
  EXPECT_TRUE(status == "RUNNING" || status == "INIT") << status;
  EXPECT_EQ(created["pinned_config_versions"]["capabilities"], 1);
  const std::string ticket = created.value("edge_ws_ticket", "");
  ASSERT_EQ(ticket.size(), 43u);

  WsClient phone, laptop, reuse;
  ASSERT_EQ(phone.Open(http_port_, Target(ticket, sid)), 101u);
  EXPECT_EQ(reuse.Open(http_port_, Target(ticket, sid)), 401u) << "a ticket opens one socket";
  ASSERT_EQ(laptop.Open(http_port_, Target(Ticket(alice, sid), sid)), 101u);
  // Both get the session's stream from its start: session.started, then "ready".
  auto p_ready = phone.ReadUntil(IsOutput("ready"));
  auto l_ready = laptop.ReadUntil(IsOutput("ready"));
  ASSERT_TRUE(p_ready && l_ready);
  EXPECT_EQ((*p_ready)["seq"], (*l_ready)["seq"]);
  EXPECT_EQ(phone.seen.front().value("type", ""), "session.started");
  EXPECT_EQ(phone.seen.front()["seq"], 1);

  // The same prompt from both devices reaches the node once; both see it echoed and answered.
  const std::string mid = NewUuidV4();
  phone.Send(Prompt(sid, mid));
  laptop.Send(Prompt(sid, mid));
  auto p_answer = phone.ReadUntil(IsOutput("plain 1"));
  auto l_answer = laptop.ReadUntil(IsOutput("plain 1"));
  ASSERT_TRUE(p_answer && l_answer);
  EXPECT_EQ((*p_answer)["seq"], (*l_answer)["seq"]);
  for (auto* ws : {&phone, &laptop}) {
    auto echo = std::find_if(ws->seen.begin(), ws->seen.end(), IsType("control.prompt.request"));
    ASSERT_NE(echo, ws->seen.end());
    EXPECT_EQ((*echo)["message_id"], mid);
    auto msg = std::find_if(ws->seen.begin(), ws->seen.end(), IsType("agent.message"));
    ASSERT_NE(msg, ws->seen.end());
    EXPECT_EQ((*msg)["payload"]["n"], 1);
    EXPECT_EQ((*msg)["message_id"].get<std::string>().size(), 36u);
    // seq rises by one per frame of the numbered stream.
    std::vector<uint64_t> seqs;
    for (const auto& f : ws->seen)
      if (f.contains("seq")) seqs.push_back(f["seq"].get<uint64_t>());
    for (size_t i = 0; i < seqs.size(); ++i)
      EXPECT_EQ(seqs[i], i + 1) << ws->seen[i].dump();
  }
  EXPECT_EQ(CommandsOf("session.input"), 1) << "one session.input for the duplicated prompt";

  // A prompt naming a denied tool never reaches the node; only its sender is told.
  phone.Send(Prompt(sid, NewUuidV4(), json{{"text", "rm it"}, {"tools", {"exec"}}}));
  auto denied = phone.ReadUntil([](const json& f) {
    return f.value("type", "") == "session.error" &&
           f["payload"].value("code", "") == "PERMISSION_DENIED";
  });
  ASSERT_TRUE(denied);
  EXPECT_FALSE(denied->contains("seq"));
  EXPECT_EQ(CommandsOf("session.input"), 1);
  // A frame that is not a control frame is refused with a precise message; the socket stays.
  laptop.Send(R"({"v":"rawp-dps-1.0","type":"control.prompt.request"})");
  auto bad = laptop.ReadUntil(IsType("session.error"));
  ASSERT_TRUE(bad);
  EXPECT_EQ((*bad)["payload"]["code"], "INVALID_ARGUMENT");
  EXPECT_NE((*bad)["payload"].value("message", "").find("message_id is missing"), std::string::npos)
      << bad->dump();

  // The usage the process reported is in the node's metrics; the session is listed.
  auto metrics = Body(Http("GET", "/v1/edge/nodes/edge-01/metrics?period=today", alice));
  EXPECT_EQ(metrics["period"], "today") << metrics.dump();
  EXPECT_EQ(metrics["aggregated_usage"]["total_input_tokens"], 3) << metrics.dump();
  EXPECT_EQ(metrics["aggregated_usage"]["total_output_tokens"], 5);
  EXPECT_DOUBLE_EQ(metrics["aggregated_usage"]["estimated_cost"].get<double>(), 0.25);
  // session.start, one session.input, and the one tool the process reported.
  EXPECT_EQ(metrics["aggregated_usage"]["total_tool_invocations"], 3);
  EXPECT_GE(metrics["health"]["uptime_seconds"].get<int64_t>(), 0);
  EXPECT_EQ(Http("GET", "/v1/edge/nodes/edge-01/metrics?period=year", alice).status, 400u);
  // `period=` with no value is the default, and the answer names it (it said "").
  auto empty_period = Body(Http("GET", "/v1/edge/nodes/edge-01/metrics?period=", alice));
  EXPECT_EQ(empty_period["period"], "today") << empty_period.dump();
  EXPECT_EQ(empty_period["aggregated_usage"], metrics["aggregated_usage"]);
  auto list = Body(Http("GET", "/v1/edge/sessions", alice));
  ASSERT_EQ(list["sessions"].size(), 1u) << list.dump();
  EXPECT_EQ(list["sessions"][0]["session_id"], sid);
  EXPECT_EQ(list["sessions"][0]["status"], "RUNNING");
  auto nodes = Body(Http("GET", "/v1/edge/nodes", alice));
  EXPECT_EQ(nodes["nodes"][0]["active_sessions_count"], 1);
  EXPECT_EQ(nodes["nodes"][0]["interactive_tools"], json::array({"chat"})) << nodes.dump();

  // Another tenant's user sees nothing of it.
  const std::string mallory = UserToken("mallory", "other");
  EXPECT_EQ(Http("GET", "/v1/edge/sessions/" + sid + "/history", mallory).status, 404u);
  EXPECT_EQ(Http("POST", "/v1/edge/sessions/" + sid + "/tickets", mallory).status, 404u);
  EXPECT_EQ(Http("DELETE", "/v1/edge/sessions/" + sid, mallory).status, 404u);
  EXPECT_EQ(Body(Http("GET", "/v1/edge/sessions", mallory))["sessions"], json::array());

  // DELETE ends it: both sockets see session.ended and are closed; the history says so.
  EXPECT_EQ(Http("DELETE", "/v1/edge/sessions/" + sid, alice).status, 204u);
  ASSERT_TRUE(phone.ReadUntil(IsType("session.ended")));
  ASSERT_TRUE(laptop.ReadUntil(IsType("session.ended")));
  EXPECT_FALSE(phone.Read(10s));
  EXPECT_EQ(phone.close_code(), 1000);
  auto history = Body(Http("GET", "/v1/edge/sessions/" + sid + "/history", alice));
  EXPECT_EQ(history["status"], "TERMINATED") << history.dump();
  EXPECT_FALSE(history.value("end_reason", "").empty());
  EXPECT_EQ(Http("POST", "/v1/edge/sessions/" + sid + "/tickets", alice).status, 410u);
  WsClient late;
  EXPECT_EQ(late.Open(http_port_, Target(ticket, sid)), 410u) << "an ended session is gone";
  EXPECT_EQ(Body(Http("GET", "/v1/edge/sessions", alice))["sessions"], json::array());
}

TEST_F(OperatorSessionTest, RefusalsBeforeTheUpgradeAndAKilledAgent) {
  StartChatAgent();
  const std::string alice = UserToken("alice", "default");
  // Bad requests: not an interactive tool, a path out of the root, unknown node, no token.
  auto not_interactive =
      Http("POST", "/v1/edge/nodes/edge-01/sessions", alice, R"({"agent_name":"exec"})");
  EXPECT_EQ(not_interactive.status, 400u) << not_interactive.body;
  EXPECT_NE(not_interactive.body.find("its interactive tools: chat"), std::string::npos)
      << not_interactive.body;
  EXPECT_EQ(Http("POST", "/v1/edge/nodes/edge-01/sessions", alice,
                 R"({"agent_name":"chat","workspace_path":"../etc"})")
                .status,
            400u);
  EXPECT_EQ(Http("POST", "/v1/edge/nodes/edge-01/sessions", alice, R"({"agent":"chat"})").status,
            400u);
  EXPECT_EQ(Http("POST", "/v1/edge/nodes/nope/sessions", alice, R"({"agent_name":"chat"})").status,
            404u);
  EXPECT_EQ(Http("POST", "/v1/edge/nodes/edge-01/sessions", "", R"({"agent_name":"chat"})").status,
            401u);

  json a = CreateSession(alice);
  json b = CreateSession(alice);
  const std::string sa = a.value("session_id", ""), sb = b.value("session_id", "");
  WsClient unknown, other, nowhere;
  EXPECT_EQ(unknown.Open(http_port_, Target(std::string(43, 'A'), sa)), 401u) << "unknown ticket";
  EXPECT_EQ(other.Open(http_port_, Target(a.value("edge_ws_ticket", ""), sb)), 403u)
      << "a ticket of another session";
  EXPECT_EQ(nowhere.Open(http_port_, Target(Ticket(alice, sa), NewUuidV4())), 404u);
  WsClient foreign;
  EXPECT_EQ(foreign.Open(http_port_, Target(Ticket(alice, sa), sa), "https://evil.example"), 403u)
      << "an Origin that is neither the controller nor allowed";
  WsClient bad_seq;
  EXPECT_EQ(bad_seq.Open(http_port_, Target(Ticket(alice, sa), sa, "&last_seq=-1")), 400u);

  // The browser's own origin is fine; the socket hears when the node's agent is killed.
  WsClient live;
  ASSERT_EQ(live.Open(http_port_, Target(Ticket(alice, sa), sa),
                      "http://127.0.0.1:" + std::to_string(http_port_)),
            101u);
  ASSERT_TRUE(live.ReadUntil(IsOutput("ready")));
  agents_.back()->Signal(SIGKILL);
  auto gone = live.ReadUntil([](const json& f) {
    return f.value("type", "") == "session.error" &&
           f["payload"].value("code", "") == "NODE_DISCONNECTED";
  });
  ASSERT_TRUE(gone) << "the socket is told the node went away";
  EXPECT_TRUE(gone->contains("seq"));
}

// PushConfig of edge_api.limits through the CLI: the node's limits version rises, every socket
// of every session on the node hears node.config.changed, the sessions keep the versions they
// were pinned to, and a session created afterwards pins the new one. A refused delta changes
// nothing.
TEST_F(OperatorSessionTest, PushedLimitsTellEverySocketAndSessionsKeepTheirPinnedVersions) {
  StartChatAgent();
  const std::string alice = UserToken("alice", "default");
  json a = CreateSession(alice), b = CreateSession(alice);
  const std::string sa = a.value("session_id", ""), sb = b.value("session_id", "");
  EXPECT_EQ(a["pinned_config_versions"]["limits"], 0) << a.dump();
  WsClient a1, a2, b1;
  ASSERT_EQ(a1.Open(http_port_, Target(a.value("edge_ws_ticket", ""), sa)), 101u);
  ASSERT_EQ(a2.Open(http_port_, Target(Ticket(alice, sa), sa)), 101u);
  ASSERT_EQ(b1.Open(http_port_, Target(b.value("edge_ws_ticket", ""), sb)), 101u);
  for (auto* ws : {&a1, &a2, &b1})
    ASSERT_TRUE(ws->ReadUntil(IsOutput("ready")));

  const std::string delta = dir_ / "limits.yaml";
  WriteText(delta, "edge_api:\n  limits:\n    reattach_window: 120\n    rate_limit: 5\n");
  auto pushed = Ctl({"push-config", "--node", "edge-01", delta});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err;
  EXPECT_NE(pushed.out.find("edge_api.limits of node edge-01: config_version 1"), std::string::npos)
      << pushed.out;
  EXPECT_EQ(pushed.out.find("sent to node"), std::string::npos) << "nothing went to the node";
  for (auto* ws : {&a1, &a2, &b1}) {
    auto changed = ws->ReadUntil(IsType("node.config.changed"));
    ASSERT_TRUE(changed) << "every socket of every session of the node is told";
    EXPECT_EQ((*changed)["payload"]["changed_scope"], "limits") << changed->dump();
    EXPECT_EQ((*changed)["payload"]["config_version"], 1);
    EXPECT_EQ((*changed)["payload"]["node_id"], "edge-01");
    EXPECT_FALSE(changed->contains("session_id")) << "it is about the node";
  }
  auto config = Body(Http("GET", "/v1/edge/nodes/edge-01/config", alice));
  EXPECT_EQ(config["limits"]["config_version"], 1) << config.dump();
  EXPECT_EQ(config["limits"]["limits"]["reattach_window"], 120);
  EXPECT_EQ(config["limits"]["limits"]["rate_limit"], 5);
  EXPECT_EQ(config["limits"]["limits"]["max_buffer_size"], 4 << 20) << "untouched keys keep theirs";
  auto nodes = Body(Http("GET", "/v1/edge/nodes", alice));
  EXPECT_EQ(nodes["nodes"][0]["config_versions"]["limits"], 1) << nodes.dump();
  // The live sessions keep their pinned version; a new one pins the new version.
  for (const auto& id : {sa, sb}) {
    auto h = Body(Http("GET", "/v1/edge/sessions/" + id + "/history", alice));
    EXPECT_EQ(h["pinned_config_versions"]["limits"], 0) << h.dump();
  }
  EXPECT_EQ(CreateSession(alice)["pinned_config_versions"]["limits"], 1);

  // Refused deltas name the key and change nothing; the sockets hear nothing more.
  WriteText(delta, "edge_api:\n  limits:\n    buffer_overflow_policy: keep_everything\n");
  auto bad = Ctl({"push-config", "--node", "edge-01", delta});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("edge_api.limits.buffer_overflow_policy"), std::string::npos) << bad.err;
  // The same limits again: no new version, no frame.
  WriteText(delta, R"({"edge_api":{"limits":{"reattach_window":120}}})");
  auto same = Ctl({"push-config", "--node", "edge-01", delta});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("config_version 1"), std::string::npos) << same.out;
  EXPECT_EQ(Body(Http("GET", "/v1/edge/nodes/edge-01/config", alice))["limits"]["config_version"],
            1);
  // A prompt still round-trips; before its answer, no second node.config.changed arrived.
  const size_t seen_before = a1.seen.size();
  a1.Send(Prompt(sa, NewUuidV4()));
  ASSERT_TRUE(a1.ReadUntil(IsOutput("plain 1")));
  EXPECT_EQ(std::count_if(a1.seen.begin() + static_cast<std::ptrdiff_t>(seen_before), a1.seen.end(),
                          IsType("node.config.changed")),
            0);
}

// A reader that stops reading while its session floods output: with buffer_overflow_policy
// disconnect its socket is closed with 1013 once its queue (half of max_buffer_size) is full,
// the node and the session go on, and a new socket with last_seq gets every frame after the
// last one it read — contiguous, no REPLAY_GAP — up to the live end of the stream.
// Each prompt floods at most $(cat $LIMIT) lines (64 to a printf), then waits for $STOP. The
// bound keeps what the closed socket missed inside the replay buffer however fast this build
// is: flooding until the test saw the close and wrote $STOP let a Release build add more than
// the buffer holds in that moment, and the reconnect then met "the replay buffer dropped
// frame N" instead of the frames it missed.
constexpr const char* kFloodScript = R"(echo ready
block=$(printf 'x%.0s' $(seq 1 180))
lines=""
for i in $(seq 1 64); do lines="$lines $block"; done
while IFS= read -r line; do
  limit=$(cat "$LIMIT")
  n=0
  while [ ! -e "$STOP" ] && [ $((n * 64)) -lt "$limit" ]; do
    n=$((n+1))
    printf "flood $n %s\n" $lines
  done
  while [ ! -e "$STOP" ]; do sleep 0.05; done
  echo "flood stopped"
done
)";

class SessionOverflowTest : public OperatorSessionTest {
 protected:
  void SetUp() override {
    // Each socket's queue: 8 MiB; the replay buffer (16 MiB) keeps what a closed socket
    // missed plus what the flood adds until the test stops it.
    StartControllerWithHttp("",
                            "edge_api:\n  limits:\n    max_buffer_size: 16777216\n"
                            "    buffer_overflow_policy: disconnect\n");
  }
};

TEST_F(SessionOverflowTest, AStalledReaderGets1013AndRecoversWithLastSeq) {
  const std::string script = dir_ / "flood.sh", stop = dir_ / "stop", limit = dir_ / "limit";
  WriteText(script, "STOP='" + stop + "'\nLIMIT='" + limit + "'\n" + kFloodScript);
  EnrollAndStart("edge-01", "tools:\n  flood:\n    command: [sh, \"" + script +
                                "\"]\n    interactive: true\n");
  const std::string alice = UserToken("alice", "default");
  auto created =
      Http("POST", "/v1/edge/nodes/edge-01/sessions", alice, R"({"agent_name":"flood"})");
  ASSERT_EQ(created.status, 201u) << created.body;
  const std::string sid = Body(created).value("session_id", "");
  WsClient slow;
  ASSERT_EQ(slow.Open(http_port_, Target(Body(created).value("edge_ws_ticket", ""), sid), "", 4096),
            101u);
  auto ready = slow.ReadUntil(IsOutput("ready"));
  ASSERT_TRUE(ready);
  uint64_t last = (*ready)["seq"].get<uint64_t>();
  // A flood line's frame is the "ready" frame with a longer line ("flood N " + 180 bytes, N
  // of at most 5 digits) and a seq of at most 4 more digits. 14 MiB of such frames overflow
  // the socket's 8 MiB queue even with what the controller's write queue (256 KiB) and the
  // kernel (at most tcp_wmem's 4 MiB) hold, and what the socket misses stays within the
  // 16 MiB replay buffer.
  const size_t frame_bytes = ready->dump().size() - 5 + 192 + 4;
  const size_t flood_lines = (14u << 20) / frame_bytes;
  WriteText(limit, std::to_string(flood_lines) + "\n");
  size_t stream_bytes = 0;  // of the flood's frames, both sockets
  slow.Send(Prompt(sid, NewUuidV4(), json{{"text", "flood"}}));

  // Stalled: nothing is read until the controller says it closed the socket.
  ASSERT_TRUE(WaitUntil(
      [&] { return ctl_->process().Stderr().find("closed with 1013") != std::string::npos; }, 180s))
      << "the stalled socket was never closed";
  WriteText(stop, "");
  // What reached the socket before the close is contiguous; then the close says 1013.
  while (auto f = slow.Read(30s)) {
    if (!f->contains("seq")) continue;
    EXPECT_EQ((*f)["seq"].get<uint64_t>(), last + 1) << f->dump();
    last = (*f)["seq"].get<uint64_t>();
    stream_bytes += f->dump().size();
  }
  EXPECT_EQ(slow.close_code(), 1013);

  WsClient again;
  ASSERT_EQ(
      again.Open(http_port_, Target(Ticket(alice, sid), sid, "&last_seq=" + std::to_string(last))),
      101u);
  auto end = again.ReadUntil(IsOutput("flood stopped"), 180s);
  ASSERT_TRUE(end) << "the stream goes on to its live end";
  uint64_t expect = last + 1;
  for (const auto& f : again.seen) {
    EXPECT_NE(f["payload"].value("code", ""), "REPLAY_GAP") << f.dump();
    if (!f.contains("seq")) continue;
    EXPECT_EQ(f["seq"].get<uint64_t>(), expect) << "every frame after last_seq, once, in order";
    expect = f["seq"].get<uint64_t>() + 1;
    stream_bytes += f.dump().size();
  }
  // The flood was larger than the socket's 8 MiB queue, and all of it arrived.
  EXPECT_GT(stream_bytes, 8u << 20) << "bytes of frames in the stream";
  // The session is still running: it answers again.
  std::filesystem::remove(stop);
  again.Send(Prompt(sid, NewUuidV4(), json{{"text", "again"}}));
  WriteText(stop, "");
  ASSERT_TRUE(again.ReadUntil(IsOutput("flood stopped"), 60s));
}

// A session answers each line with 40 000 bytes and a numbered line. The agent-wide output
// cap (a total per command) is 64 KiB, which a session passes on its second answer: before
// stop 47 it then ran on mute. Only its security context's cap (100 KiB here) binds it, and
// past that the session is ended with a reason naming the cap.
TEST_F(OperatorSessionTest, OnlyTheContextsOutputCapBindsASessionAndPastItTheSessionEnds) {
  const std::string script = dir_ / "bulky.sh";
  WriteText(script,
            "echo ready\nn=0\nwhile IFS= read -r line; do\n  n=$((n+1))\n"
            "  head -c 40000 /dev/zero | tr '\\0' x; echo\n  printf 'plain %d\\n' \"$n\"\n"
            "done\n");
  WriteAgentConfig("edge-01", "tools:\n  chat:\n    command: [sh, \"" + script +
                                  "\"]\n    interactive: true\n"
                                  "security_contexts:\n  default:\n    allowed_tools: ['*']\n"
                                  "    limits:\n      max_output_bytes: 100KiB\n");
  ASSERT_NO_FATAL_FAILURE(AddSandboxSetting("edge-01", "max_output_bytes", "64KiB"));
  auto& agent = StartAgent("edge-01");
  ASSERT_TRUE(WaitConnected("edge-01", true)) << agent.Stderr();
  const std::string alice = UserToken("alice", "default");
  json created = CreateSession(alice);
  const std::string sid = created.value("session_id", "");
  ASSERT_FALSE(sid.empty()) << created.dump();
  WsClient ws;
  ASSERT_EQ(ws.Open(http_port_, Target(created.value("edge_ws_ticket", ""), sid)), 101u);
  ASSERT_TRUE(ws.ReadUntil(IsOutput("ready")));
  // Past the agent-wide 64 KiB: still answered.
  for (const char* n : {"1", "2"}) {
    ws.Send(Prompt(sid, NewUuidV4()));
    ASSERT_TRUE(ws.ReadUntil(IsOutput(std::string("plain ") + n)))
        << "the session went mute before answer " << n;
  }
  // Past the context's 100 KiB: the session ends, and says why.
  ws.Send(Prompt(sid, NewUuidV4()));
  auto ended = ws.ReadUntil(IsType("session.ended"));
  ASSERT_TRUE(ended) << "the capped session ran on";
  const std::string why = (*ended)["payload"].value("message", "");
  EXPECT_NE(why.find("node edge-01 reached its output cap of 100KiB "
                     "(security_contexts.default.limits.max_output_bytes)"),
            std::string::npos)
      << ended->dump();
  EXPECT_FALSE(std::any_of(ws.seen.begin(), ws.seen.end(), IsOutput("plain 3")))
      << "its answer is past the cap";
  auto history = Body(Http("GET", "/v1/edge/sessions/" + sid + "/history", alice));
  EXPECT_EQ(history["status"], "TERMINATED") << history.dump();
  EXPECT_EQ(history.value("end_reason", ""), why) << history.dump();
  EXPECT_TRUE(WaitUntil([&] { return ProcessesRunning(script).empty(); }, 30s))
      << "the ended session's process lives on";
}

// Controller-wide edge_api.limits: a session nobody attaches to ends after reattach_window,
// and the agent kills its process group.
class SessionLimitsTest : public OperatorSessionTest {
 protected:
  void SetUp() override {
    StartControllerWithHttp("", "edge_api:\n  limits:\n    reattach_window: 2\n");
  }
};

TEST_F(SessionLimitsTest, ASessionWithoutASocketEndsAfterTheReattachWindow) {
  StartChatAgent();
  const std::string alice = UserToken("alice", "default");
  auto config = Body(Http("GET", "/v1/edge/nodes/edge-01/config", alice));
  EXPECT_EQ(config["limits"]["limits"]["reattach_window"], 2) << config.dump();
  const std::string sid = CreateSession(alice).value("session_id", "");
  ASSERT_FALSE(sid.empty());
  const std::string script = dir_ / "chat.sh";
  json history;
  ASSERT_TRUE(WaitUntil(
      [&] {
        history = Body(Http("GET", "/v1/edge/sessions/" + sid + "/history", alice));
        return history.value("status", "") == "TERMINATED";
      },
      60s))
      << history.dump();
  EXPECT_NE(history.value("end_reason", "").find("reattach_window"), std::string::npos)
      << history.dump();
  // No process of its tool is left (the agent killed the session's process group).
  std::vector<pid_t> left;
  EXPECT_TRUE(WaitUntil(
      [&] {
        left = ProcessesRunning(script);
        return left.empty();
      },
      30s))
      << "the session's process group was killed; left: " << left.size();
}

}  // namespace
}  // namespace edge::testing
