// The edge session against an in-process fake controller over real mTLS on loopback: what the
// wire carries (sealed and verified envelopes, Hello first, heartbeats), how commands run, the
// outbox, reconnects with backoff, token renewal and key changes — on a ManualClock.
#include "agent/edge/edge_session.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <fstream>
#include <regex>

#include "agent/edge/capabilities.h"
#include "agent/edge/enrollment_files.h"
#include "agent/edge/outbox_store.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/envelope_codec.h"
#include "agent/identity/jwt.h"
#include "config/agent_config.h"
#include "tests/support/manual_clock.h"
#include "tests/unit/edge/fake_controller.h"
#include "tests/unit/edge/test_support.h"

namespace edge::agentedge::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using google::protobuf::util::TimeUtil;

class EdgeSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_ / "data";
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    session_.reset();
    executor_.reset();
    work_.reset();
    io_.stop();
    io_thread_.join();
    fake_.reset();
  }

  // The fake controller, this node's keystore and (unless `register_key` is false) its
  // registered node key.
  void StartController(FakeController::Options options = {}, bool register_key = true) {
    fake_ = std::make_unique<FakeController>(clock_, options);
    fake_->Start();
    ASSERT_TRUE(fake_->WriteKeystore(data_, "edge-01"));
    auto key = NodeKeyStore(data_).LoadOrCreate();
    ASSERT_TRUE(key) << key.error().ToString();
    key_.emplace(*key);
    if (register_key) fake_->RegisterNode("edge-01", key_->public_key());
  }

  void StartSession(const std::string& extra_yaml = "", bool wait_connected = true) {
    auto cfg = config::LoadAgentConfigFromString(
        "node_id: edge-01\ndata_dir: " + data_ + "\ncluster:\n  heartbeat_interval_secs: " +
            std::to_string(heartbeat_secs_) + "\nlabels:\n  site: lab\n" + extra_yaml,
        "agent.yaml", {});
    ASSERT_TRUE(cfg) << cfg.error().ToString();
    config_ = *cfg;
    sandbox::ExecutorOptions eo;
    eo.data_dir = data_;
    eo.own_id = "edge-01";
    eo.kill_grace = 200ms;
    eo.pids_cgroup_root = "";
    eo.agent_version = "test-version";
    for (const auto& [name, c] : config_.security_contexts) {
      sandbox::SecurityContextConfig sc{c.allowed_tools, c.run_as, c.mount_points, {}};
      sc.require_roles = c.require_roles;
      eo.security_contexts[name] = sc;
    }
    auto ex = sandbox::Executor::Open(io_, clock_, eo);
    ASSERT_TRUE(ex) << ex.error().ToString();
    executor_ = std::move(*ex);
    auto identity = identity::KeystoreFiles::Load(data_);
    ASSERT_TRUE(identity) << identity.error().ToString();
    SessionDeps deps{
        .clock = clock_,
        .random = random_,
        .backoff = backoff_,
        .executor = *executor_,
        .channel = identity::ChannelFactory(*identity).Mtls(
            address_override_.empty() ? fake_->address() : address_override_),
        .controller = address_override_.empty() ? fake_->address() : address_override_,
        .apply_config =
            [this](const config::AgentConfig& c) {
              std::map<std::string, sandbox::ToolConfig> tools;
              for (const auto& [n, t] : c.tools)
                tools[n] =
                    sandbox::ToolConfig{t.command, t.timeout, t.security_context, t.interactive};
              return executor_->Reconfigure(tools, {});
            },
        .request_exit =
            [this](const std::string& reason) {
              std::lock_guard lock(exit_mu_);
              exit_reasons_.push_back(reason);
            },
    };
    SessionOptions options;
    options.agent_version = "test-version";
    options.rpc_timeout = rpc_timeout_;
    auto s = EdgeSession::Create(config_, std::move(deps), options);
    ASSERT_TRUE(s) << s.error().ToString();
    session_ = std::move(*s);
    ASSERT_TRUE(session_->Start());
    if (wait_connected) {
      ASSERT_TRUE(fake_->WaitFor([](const auto& streams) {
        return !streams.empty() && !streams.back().events.empty();
      })) << session_->status().last_error;
    }
  }

  void Advance(std::chrono::milliseconds d) {
    clock_.Advance(d);
    session_->timers().Poke();
  }
  // Moves the clock by `step` until `done` (a deadline or grace on the injected clock fires
  // once its timer is armed, whenever that happens on the executor's threads).
  bool AdvanceUntil(const std::function<bool()>& done, std::chrono::milliseconds step) {
    return WaitUntil([&] {
      if (done()) return true;
      clock_.Advance(step);
      return false;
    });
  }
  bool HasResult(const std::string& id) {
    for (const auto& e : AllEvents())
      if (e.has_command_result() && e.command_result().command_id() == id) return true;
    return false;
  }
  // Every event of every stream, in order.
  std::vector<pb::EdgeEvent> AllEvents() {
    std::vector<pb::EdgeEvent> all;
    for (const auto& s : fake_->Streams())
      all.insert(all.end(), s.events.begin(), s.events.end());
    return all;
  }
  // Waits until `n` CommandResults for `id` arrived (the predicate runs under the fake's
  // lock, so it counts in the streams it is given, not through Results()).
  bool WaitResultCount(const std::string& id, size_t n) {
    return fake_->WaitFor([&](const auto& streams) {
      size_t count = 0;
      for (const auto& s : streams)
        for (const auto& e : s.events)
          count += e.has_command_result() && e.command_result().command_id() == id ? 1 : 0;
      return count == n;
    });
  }
  std::vector<pb::CommandResult> Results(const std::string& id) {
    std::vector<pb::CommandResult> out;
    for (const auto& e : AllEvents()) {
      if (e.has_command_result() && e.command_result().command_id() == id) {
        out.push_back(e.command_result());
      }
    }
    return out;
  }
  pb::EdgeResult WaitResult(const std::string& id, std::chrono::milliseconds t = 20s) {
    pb::EdgeResult r;
    bool got = fake_->WaitFor(
        [&](const auto& streams) {
          for (const auto& s : streams)
            for (const auto& e : s.events)
              if (e.has_command_result() && e.command_result().command_id() == id) {
                r = e.command_result().result();
                return true;
              }
          return false;
        },
        t);
    EXPECT_TRUE(got) << "no result for " << id;
    return r;
  }
  size_t CountEvents(pb::EdgeEvent::EventCase kind) {
    size_t n = 0;
    for (const auto& e : AllEvents())
      n += e.event_case() == kind;
    return n;
  }
  bool WaitEvents(pb::EdgeEvent::EventCase kind, size_t n) {
    return fake_->WaitFor([&](const auto& streams) {
      size_t c = 0;
      for (const auto& s : streams)
        for (const auto& e : s.events)
          c += e.event_case() == kind;
      return c >= n;
    });
  }
  void ExpectAllVerified() {
    for (const auto& s : fake_->Streams()) {
      for (const auto& err : s.verify_errors)
        ADD_FAILURE() << "stream " << s.index << ": " << err;
    }
  }
  std::chrono::nanoseconds UntilNextTimer() {
    auto due = session_->timers().NextDue();
    return due ? *due - clock_.Monotonic() : std::chrono::nanoseconds::max();
  }

  int heartbeat_secs_ = 30;  // cluster.heartbeat_interval_secs of StartSession
  // Where the session connects instead of the fake controller, and its RPC deadline.
  std::string address_override_;
  std::chrono::milliseconds rpc_timeout_{15s};
  TempDir dir_;
  std::string data_;
  ManualClock clock_;
  FixedRandom random_;
  FullJitterBackoff backoff_{1s, 60s, random_};
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::thread io_thread_;
  std::unique_ptr<FakeController> fake_;
  std::optional<identity::NodeKey> key_;
  std::unique_ptr<sandbox::Executor> executor_;
  config::AgentConfig config_;
  std::unique_ptr<EdgeSession> session_;
  std::mutex exit_mu_;
  std::vector<std::string> exit_reasons_;
};

// The watchdog's view of a session (issue 13): only a connected stream that has sent no
// heartbeat for three intervals is stuck; backoff, attestation and a fresh stream are not.
TEST(SessionStuckTest, ConnectedWithoutHeartbeatsForThreeIntervalsOnly) {
  SessionStatus s;
  s.heartbeat_interval_secs = 10;
  s.state = "backoff";
  s.last_heartbeat_ms = 1'000;
  EXPECT_FALSE(SessionStuck(s, 1'000'000).has_value()) << "waiting to reconnect is legitimate";
  s.state = "connected";
  EXPECT_FALSE(SessionStuck(s, 31'000).has_value());
  auto why = SessionStuck(s, 31'001);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("no heartbeat sent for 30 s (interval 10 s)"), std::string::npos) << *why;
  // A stream that opened after a long backoff counts from its start.
  s.connected_since_ms = 500'000;
  EXPECT_FALSE(SessionStuck(s, 520'000).has_value());
  EXPECT_TRUE(SessionStuck(s, 530'001).has_value());
  // No interval from the controller yet: 30 s.
  s.heartbeat_interval_secs = 0;
  EXPECT_FALSE(SessionStuck(s, 590'000).has_value());
  EXPECT_TRUE(SessionStuck(s, 590'001).has_value());
}

TEST_F(EdgeSessionTest, HelloFirstWithCapabilitiesThenHeartbeatsAllSealedAndVerified) {
  StartController();
  StartSession();
  auto streams = fake_->Streams();
  ASSERT_EQ(streams.size(), 1u);
  const auto& s = streams[0];
  ASSERT_TRUE(s.events[0].has_hello());
  EXPECT_TRUE(std::regex_match(
      s.stream_id,
      std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << s.stream_id;
  EXPECT_EQ(s.peer_cn, "edge-01");
  EXPECT_EQ(s.bearer, fake_->IssuedTokens().back()) << "authorization: Bearer <token>";
  EXPECT_EQ(s.envelope_tokens[0], s.bearer);
  const auto& caps = s.events[0].hello().capabilities();
  EXPECT_EQ(caps.os(), "linux");
  EXPECT_FALSE(caps.arch().empty());
  EXPECT_NE(std::find(caps.local_tools().begin(), caps.local_tools().end(), "exec"),
            caps.local_tools().end());
  EXPECT_EQ(caps.custom_labels().at("site"), "lab");
  EXPECT_EQ(caps.custom_labels().at("agent.version"), "test-version");
  EXPECT_FALSE(caps.custom_labels().contains("agent.state"));
  EXPECT_EQ(fake_->ProofsSeen(), std::vector<std::string>{""}) << "an enrolled node has no proof";

  // The first heartbeat is due one interval after the Hello, and not before.
  EXPECT_EQ(UntilNextTimer(), 30s);
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 1));
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 2));
  auto events = fake_->Streams()[0].events;
  ASSERT_TRUE(events[2].has_heartbeat());
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(events[2].heartbeat().sent_at()),
            ToEpochMillis(clock_.Now()));
  // The fake checked every envelope with EnvelopeCodec::VerifyEvent against the node's key.
  ExpectAllVerified();
  // And the test checks one again by hand: Hello under the node key, for this stream.
  std::vector<std::string> keys = {key_->public_key()};
  EXPECT_TRUE(identity::EnvelopeCodec::VerifyEvent(events[0], "edge-01", "", keys, clock_.Now()));
  auto status = session_->status();
  EXPECT_EQ(status.state, "connected");
  EXPECT_EQ(status.stream_id, s.stream_id);
  EXPECT_EQ(status.tenant_id, "tenant-a");
}

TEST_F(EdgeSessionTest, PushConfigChangesTheHeartbeatIntervalAtOnceAndRecordsTheVersion) {
  StartController();
  StartSession();
  pb::EdgeCommand push;
  push.mutable_push_config()->set_config_delta("cluster:\n  heartbeat_interval_secs: 5\n");
  push.mutable_push_config()->set_version("v2");
  ASSERT_TRUE(fake_->Send(push));
  // The version is recorded, then the session applies the interval: wait for both.
  ASSERT_TRUE(WaitUntil([&] {
    auto st = session_->status();
    return st.commands.config_version == "v2" && st.heartbeat_interval_secs == 5;
  }));
  EXPECT_EQ(UntilNextTimer(), 5s) << "rescheduled at once, not after the old 30 s";
  Advance(5s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 1));
  Advance(5s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 2));
  EXPECT_EQ(CountEvents(pb::EdgeEvent::kCapabilityUpdate), 0u) << "no capability changed";

  // A bad delta changes nothing and says why.
  push.mutable_push_config()->set_config_delta("cluster:\n  heartbeat_interval_secs: 0\n");
  push.mutable_push_config()->set_version("v3");
  ASSERT_TRUE(fake_->Send(push));
  ASSERT_TRUE(WaitUntil([&] { return !session_->status().commands.last_config_error.empty(); }));
  auto st = session_->status();
  EXPECT_EQ(st.commands.config_version, "v2");
  EXPECT_NE(st.commands.last_config_error.find("v3"), std::string::npos);
  EXPECT_NE(st.commands.last_config_error.find("cluster.heartbeat_interval_secs"),
            std::string::npos);
  EXPECT_EQ(st.heartbeat_interval_secs, 5);

  // Tools and labels: a CapabilityUpdate, and the next InvokeTool sees the new tool.
  push.mutable_push_config()->set_config_delta(
      R"({"labels":{"site":"field"},"tools":{"greet":{"command":["/bin/echo","hi {name}"]}}})");
  push.mutable_push_config()->set_version("v4");
  ASSERT_TRUE(fake_->Send(push));
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kCapabilityUpdate, 1));
  pb::EdgeCapabilities caps;
  for (const auto& e : AllEvents())
    if (e.has_capability_update()) caps = e.capability_update().capabilities();
  EXPECT_EQ(caps.custom_labels().at("site"), "field");
  EXPECT_NE(std::find(caps.local_tools().begin(), caps.local_tools().end(), "greet"),
            caps.local_tools().end());
  ASSERT_TRUE(fake_->Send(Invoke("greet-1", "greet", {{"name", "edge"}})));
  pb::EdgeResult r = WaitResult("greet-1");
  ASSERT_TRUE(r.has_ok()) << r.DebugString();
  EXPECT_EQ(PayloadJson(r)["stdout"], "hi edge\n");

  // An interactive tool (wire.md §5.5): a CapabilityUpdate names it in
  // agent.interactive_tools, and it is refused when invoked by its own name.
  push.mutable_push_config()->set_config_delta(
      R"({"tools":{"shell":{"command":["sh"],"interactive":true}}})");
  push.mutable_push_config()->set_version("v5");
  ASSERT_TRUE(fake_->Send(push));
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kCapabilityUpdate, 2));
  for (const auto& e : AllEvents())
    if (e.has_capability_update()) caps = e.capability_update().capabilities();
  EXPECT_EQ(caps.custom_labels().at("agent.interactive_tools"), "shell");
  ASSERT_TRUE(fake_->Send(Invoke("shell-1", "shell", {})));
  r = WaitResult("shell-1");
  ASSERT_TRUE(r.has_err()) << r.DebugString();
  EXPECT_EQ(r.err().code(), "INVALID_ARGUMENT");
  EXPECT_NE(r.err().message().find("interactive"), std::string::npos) << r.err().message();
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, BackoffGrowsWithFullJitterAndResetsOnlyAfterAMessageIsReceived) {
  StartController();
  // The jitter draws the top of each window, so each delay is the window: 1 s, 2 s, 4 s, ...
  fake_->FailNext("ConnectEdge", 3, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  StartSession("", /*wait_connected=*/false);
  for (auto expected : {1000ms, 2000ms, 4000ms}) {
    ASSERT_TRUE(WaitUntil([&] {
      auto s = session_->status();
      return s.state == "backoff" && s.last_backoff == expected;
    })) << "want a "
        << expected.count() << " ms backoff, status " << session_->status().state;
    EXPECT_EQ(UntilNextTimer(), expected);
    Advance(expected);
  }
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s.size() == 4 && !s[3].events.empty(); }));
  EXPECT_EQ(fake_->Calls("AttestNode"), 1) << "the token is reused across reconnects";

  // A stream that ends before any message arrived does not reset the backoff.
  fake_->EndStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "dropped"));
  ASSERT_TRUE(WaitUntil([&] {
    auto s = session_->status();
    return s.state == "backoff" && s.last_backoff == 8000ms;
  }));
  Advance(8000ms);
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s.size() == 5 && !s[4].events.empty(); }));
  // A message received on the new stream resets it: the next delay is the base again.
  pb::EdgeCommand ping;
  ping.mutable_push_config()->set_config_delta("{}");
  ping.mutable_push_config()->set_version("ping");
  ASSERT_TRUE(fake_->Send(ping));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().commands.config_version == "ping"; }));
  fake_->EndStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "dropped again"));
  ASSERT_TRUE(WaitUntil([&] {
    auto s = session_->status();
    return s.state == "backoff" && s.last_backoff == 1000ms;
  }));
  EXPECT_NE(session_->status().last_error.find("dropped again"), std::string::npos);
}

// A loopback port whose listener never accepts: the kernel completes the TCP handshake and
// the client's TLS hello waits there for ever — a controller that never answers.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(fd_, 16) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len)) {
      return;
    }
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~SilentListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

// Issue 16: a controller that accepts connections and never answers. The agent's own RPC
// deadline ends each attempt (300 ms here, 15 s by default), then it backs off on the
// injected clock — one attempt per backoff window, no storm of reconnects — and its status
// says why.
TEST_F(EdgeSessionTest, AControllerThatNeverAnswersMeetsTheDeadlineThenTheBackoff) {
  StartController();  // for this node's keystore and key; the session is pointed elsewhere
  SilentListener silent;
  ASSERT_FALSE(silent.address().empty());
  address_override_ = silent.address();
  rpc_timeout_ = 300ms;
  StartSession("", /*wait_connected=*/false);
  auto in_backoff_after = [&](uint64_t attempts) {
    auto s = session_->status();
    return s.state == "backoff" && s.attempts == attempts;
  };
  ASSERT_TRUE(WaitUntil([&] { return in_backoff_after(1); }, 30s))
      << session_->status().state << ": " << session_->status().last_error;
  std::string why = session_->status().last_error;
  std::transform(why.begin(), why.end(), why.begin(), ::tolower);
  EXPECT_NE(why.find("deadline"), std::string::npos) << why;
  EXPECT_EQ(session_->status().last_backoff, 1000ms);
  EXPECT_FALSE(WaitUntil([&] { return session_->status().attempts > 1; }, 500ms))
      << "tried again while the clock stood still";
  Advance(1000ms);
  ASSERT_TRUE(WaitUntil([&] { return in_backoff_after(2); }, 30s))
      << session_->status().state << ": " << session_->status().last_error;
  EXPECT_EQ(session_->status().last_backoff, 2000ms);
  EXPECT_EQ(fake_->Calls("AttestNode"), 0) << "nothing reached the real controller";
}

TEST_F(EdgeSessionTest, AQuietStreamThatStayedUpAMinuteAlsoResetsTheBackoff) {
  StartController();
  fake_->FailNext("ConnectEdge", 2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  StartSession("", /*wait_connected=*/false);
  for (auto expected : {1000ms, 2000ms}) {
    ASSERT_TRUE(WaitUntil([&] {
      auto s = session_->status();
      return s.state == "backoff" && s.last_backoff == expected;
    }));
    Advance(expected);
  }
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s.size() == 3 && !s[2].events.empty(); }));
  // 59 s up without a message: no reset yet, the next delay keeps growing.
  Advance(59s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 1));
  fake_->EndStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "dropped early"));
  ASSERT_TRUE(WaitUntil([&] {
    auto s = session_->status();
    return s.state == "backoff" && s.last_backoff == 4000ms;
  }));
  Advance(4000ms);
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s.size() == 4 && !s[3].events.empty(); }));
  // This one stays up a full minute with nothing from the controller but its acceptance.
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 2));
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 3));
  fake_->EndStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "dropped late"));
  ASSERT_TRUE(WaitUntil([&] {
    auto s = session_->status();
    return s.state == "backoff" && s.last_backoff == 1000ms;
  })) << "backoff "
      << session_->status().last_backoff.count() << " ms";
}

TEST_F(EdgeSessionTest, InvokeToolStreamsProgressThenExactlyOneResult) {
  StartController();
  StartSession();
  ASSERT_TRUE(fake_->Send(Exec("cmd-1", "echo hi; echo oops >&2; exit 3")));
  pb::EdgeResult r = WaitResult("cmd-1");
  ASSERT_TRUE(r.has_ok()) << "a non-zero exit is Ok{exit_code}: " << r.DebugString();
  EXPECT_EQ(r.ok().exit_code(), 3);
  json payload = PayloadJson(r);
  EXPECT_EQ(payload["stdout"], "hi\n");
  EXPECT_EQ(payload["stderr"], "oops\n");
  EXPECT_EQ(payload["output_truncated"], false);
  // Progress chunks came first, on the same stream, before the one result.
  std::string out, err;
  bool result_seen = false;
  const auto streams = fake_->Streams();  // a copy: a member of a temporary would dangle
  for (const auto& e : streams[0].events) {
    if (e.has_command_result()) result_seen = true;
    if (!e.has_command_progress()) continue;
    EXPECT_FALSE(result_seen) << "progress after the result";
    EXPECT_EQ(e.command_progress().command_id(), "cmd-1");
    out += e.command_progress().chunk().stdout();
    err += e.command_progress().chunk().stderr();
  }
  EXPECT_EQ(out, "hi\n");
  EXPECT_EQ(err, "oops\n");
  // Another command later; still exactly one result for the first.
  ASSERT_TRUE(fake_->Send(Exec("cmd-2", "true")));
  WaitResult("cmd-2");
  EXPECT_EQ(Results("cmd-1").size(), 1u);
  ExpectAllVerified();
}

// Issue 15 #1: bytes that are not UTF-8 (output, a tail cut, a file name) crashed the agent or
// left it heartbeating but deaf. Every command is answered and the stream keeps reading.
TEST_F(EdgeSessionTest, BytesThatAreNotUtf8NeverStopTheStreamFromReading) {
  StartController();
  StartSession();
  ASSERT_TRUE(fake_->Send(Exec("bin", "printf 'ok\\377'")));
  pb::EdgeResult bin = WaitResult("bin");
  ASSERT_TRUE(bin.has_ok()) << bin.DebugString();
  EXPECT_EQ(PayloadJson(bin)["stdout_base64"], "b2v/");
  std::string streamed;
  for (const auto& e : AllEvents()) {
    if (e.has_command_progress() && e.command_progress().command_id() == "bin") {
      streamed += e.command_progress().chunk().stdout();
    }
  }
  EXPECT_EQ(streamed, "ok\xFF") << "progress chunks carry the exact bytes";

  ASSERT_TRUE(fake_->Send(Exec("mk", "touch \"$(printf 'bad\\377name')\"")));
  ASSERT_TRUE(WaitResult("mk").has_ok());
  ASSERT_TRUE(fake_->Send(Invoke("ls", "file.list", {{"path", "."}})));
  pb::EdgeResult ls = WaitResult("ls");
  ASSERT_TRUE(ls.has_ok()) << ls.DebugString();
  EXPECT_EQ(PayloadJson(ls)["files"][0]["path_base64"], "YmFk/25hbWU=");
  // A binary file's tail, cut at the 64 KiB result limit.
  ASSERT_TRUE(fake_->Send(Exec("cat", "head -c 200000 /dev/urandom")));
  pb::EdgeResult cat = WaitResult("cat");
  ASSERT_TRUE(cat.has_ok()) << cat.DebugString();
  // And the stream still reads: the next command is answered.
  ASSERT_TRUE(fake_->Send(Invoke("after", "sysinfo", json::object())));
  EXPECT_TRUE(WaitResult("after").has_ok());
  EXPECT_EQ(fake_->Streams().size(), 1u) << "no reconnect was needed";
  ExpectAllVerified();
}

// Issue 15 #2: a result larger than one message ended the stream, for ever (it was resent
// after every reconnect). It is answered with RESOURCE_EXHAUSTED instead, and the node works on.
TEST_F(EdgeSessionTest, AResultLargerThanOneMessageIsRefusedAndTheNodeWorksOn) {
  StartController();
  StartSession("edge:\n  max_message_bytes: 1MiB\n");
  ASSERT_TRUE(fake_->Send(Exec("mk", "head -c 3000000 /dev/zero > big.bin")));
  ASSERT_TRUE(WaitResult("mk").has_ok());
  ASSERT_TRUE(fake_->Send(Invoke("read", "file.read", {{"path", "big.bin"}})));
  pb::EdgeResult r = WaitResult("read");
  ASSERT_TRUE(r.has_err()) << r.DebugString();
  EXPECT_EQ(r.err().code(), "RESOURCE_EXHAUSTED");
  EXPECT_NE(r.err().message().find("offset and length"), std::string::npos) << r.err().message();
  ASSERT_TRUE(fake_->Send(
      Invoke("part", "file.read", {{"path", "big.bin"}, {"offset", 0}, {"length", 500000}})));
  pb::EdgeResult part = WaitResult("part");
  ASSERT_TRUE(part.has_ok()) << part.DebugString();
  EXPECT_EQ(PayloadJson(part)["size"], 500000);
  EXPECT_EQ(fake_->Streams().size(), 1u);
}

TEST_F(EdgeSessionTest, UserTokensAreVerifiedAgainstTheConfiguredIssuers) {
  StartController();
  auto key = identity::EcSigningKey::Generate();
  ASSERT_TRUE(key);
  auto other = identity::EcSigningKey::Generate();
  ASSERT_TRUE(other);
  const std::string pub = data_ + "/issuer.pub.pem";
  std::ofstream(pub) << *key->PublicPem();
  StartSession("security:\n  user_token_issuers:\n    ctl: " + pub +
               "\nsecurity_contexts:\n  default:\n    allowed_tools: ['*']\n"
               "  ops:\n    allowed_tools: ['*']\n    require_roles: [operator]\n");
  const int64_t now = ToEpochMillis(clock_.Now()) / 1000;
  auto token = [&](const identity::EcSigningKey& k, json claims) {
    json base = {{"iss", "ctl"},     {"aud", "edge-invoke"}, {"sub", "alice"},  {"tid", "tenant-a"},
                 {"nid", "edge-01"}, {"iat", now},           {"exp", now + 600}};
    base.update(claims);
    return *identity::SignJwtEs256(base, k);
  };
  auto send = [&](const std::string& id, const std::string& tok, const std::string& ctx = "") {
    pb::EdgeCommand c = Invoke(id, "exec", {{"command", "echo ran"}}, "tenant-a", ctx);
    c.mutable_invoke_tool()->mutable_seal_envelope()->set_user_security_token(tok);
    ASSERT_TRUE(fake_->Send(c));
  };
  send("good", token(*key, {{"cid", "good"}}));
  pb::EdgeResult good = WaitResult("good");
  ASSERT_TRUE(good.has_ok()) << good.DebugString();

  struct Case {
    std::string id, token, words;
  };
  const std::vector<Case> refused = {
      {"forged", token(*other, {{"cid", "forged"}}), "signature"},
      {"replayed", token(*key, {{"cid", "good"}}), "claim cid"},
      {"other-node", token(*key, {{"cid", "other-node"}, {"nid", "edge-02"}}), "claim nid"},
      {"other-tenant", token(*key, {{"cid", "other-tenant"}, {"tid", "tenant-b"}}), "claim tid"},
      {"expired", token(*key, {{"cid", "expired"}, {"exp", now - 3600}}), "expired"},
      {"stranger", token(*key, {{"cid", "stranger"}, {"iss", "elsewhere"}}), "not in security"},
      {"audience", token(*key, {{"cid", "audience"}, {"aud", "edge-api"}}), "aud"},
  };
  for (const auto& c : refused) {
    send(c.id, c.token);
    pb::EdgeResult r = WaitResult(c.id);
    ASSERT_TRUE(r.has_err()) << c.id << ": " << r.DebugString();
    EXPECT_EQ(r.err().code(), "UNAUTHENTICATED") << c.id;
    EXPECT_NE(r.err().message().find(c.words), std::string::npos)
        << c.id << ": " << r.err().message();
  }
  // Roles from the verified token reach the security context.
  send("no-role", token(*key, {{"cid", "no-role"}}), "ops");
  pb::EdgeResult no_role = WaitResult("no-role");
  ASSERT_TRUE(no_role.has_err()) << no_role.DebugString();
  EXPECT_EQ(no_role.err().code(), "PERMISSION_DENIED");
  send("with-role", token(*key, {{"cid", "with-role"}, {"roles", {"operator"}}}), "ops");
  EXPECT_TRUE(WaitResult("with-role").has_ok());
}

TEST_F(EdgeSessionTest, ConcurrencyCapRefusesWithResourceExhausted) {
  StartController();
  StartSession("edge:\n  max_concurrent_commands: 1\n");
  ASSERT_TRUE(fake_->Send(Exec("long", "sleep 30")));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().commands.running == 1; }));
  ASSERT_TRUE(fake_->Send(Exec("second", "echo never")));
  pb::EdgeResult r = WaitResult("second");
  ASSERT_TRUE(r.has_err()) << r.DebugString();
  EXPECT_EQ(r.err().code(), "RESOURCE_EXHAUSTED");
  EXPECT_NE(r.err().message().find("edge.max_concurrent_commands 1"), std::string::npos);
  pb::EdgeCommand cancel;
  cancel.mutable_cancel()->set_command_id("long");
  ASSERT_TRUE(fake_->Send(cancel));
  EXPECT_TRUE(WaitResult("long").has_cancelled());
}

// Issue 16 #2: a controller that restarts resends every command without a result. Those the
// node runs or has finished never count against edge.max_concurrent_commands: with the cap
// full, a resend of the running command is ignored and one of a finished command is answered
// from its stored result — never RESOURCE_EXHAUSTED. Only new work meets the cap.
TEST_F(EdgeSessionTest, ResendsOfRunningOrFinishedCommandsNeverMeetTheConcurrencyCap) {
  StartController();
  StartSession("edge:\n  max_concurrent_commands: 1\n");
  ASSERT_TRUE(fake_->Send(Exec("done", "echo done")));
  ASSERT_TRUE(WaitResult("done").has_ok());
  const std::string gate = dir_ / "long.go";
  ASSERT_TRUE(fake_->Send(Exec("long", "while [ ! -e " + gate + " ]; do sleep 0.01; done")));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().commands.running == 1; }));
  // The cap is full: the resends, then a new command.
  ASSERT_TRUE(fake_->Send(Exec("long", "while [ ! -e " + gate + " ]; do sleep 0.01; done")));
  ASSERT_TRUE(fake_->Send(Exec("done", "echo done")));
  ASSERT_TRUE(fake_->Send(Exec("new", "echo new")));
  pb::EdgeResult fresh = WaitResult("new");
  ASSERT_TRUE(fresh.has_err()) << fresh.DebugString();
  EXPECT_EQ(fresh.err().code(), "RESOURCE_EXHAUSTED") << "new work does meet the cap";
  ASSERT_TRUE(WaitResultCount("done", 2));
  pb::EdgeResult again = Results("done")[1].result();
  ASSERT_TRUE(again.has_ok()) << again.DebugString();
  EXPECT_EQ(PayloadJson(again)["stdout"], "done\n");
  EXPECT_TRUE(Results("long").empty()) << "the resend of a running command is ignored";
  std::ofstream(gate).put('x');
  pb::EdgeResult long_result = WaitResult("long");
  EXPECT_TRUE(long_result.has_ok()) << long_result.DebugString();
  ASSERT_TRUE(fake_->Send(Exec("marker", "true")));
  WaitResult("marker");
  EXPECT_EQ(Results("long").size(), 1u) << "one result for the command and its resend";
}

TEST_F(EdgeSessionTest, InnerEnvelopeRefusalsNameTheField) {
  StartController();
  StartSession();
  struct Case {
    std::string id;
    std::function<void(pb::InvokeTool&)> mutate;
    std::string code;
    std::string field;
  };
  std::vector<Case> cases = {
      {"no-env", [](pb::InvokeTool& t) { t.clear_seal_envelope(); }, "PERMISSION_DENIED",
       "invoke_tool.seal_envelope"},
      {"no-token",
       [](pb::InvokeTool& t) { t.mutable_seal_envelope()->clear_user_security_token(); },
       "PERMISSION_DENIED", "user_security_token"},
      {"two-parts",
       [](pb::InvokeTool& t) { t.mutable_seal_envelope()->set_user_security_token("a.b"); },
       "INVALID_ARGUMENT", "user_security_token"},
      {"other-tenant",
       [](pb::InvokeTool& t) { t.mutable_seal_envelope()->set_tenant_id("tenant-b"); },
       "PERMISSION_DENIED", "tenant_id \"tenant-b\""},
      {"other-context",
       [](pb::InvokeTool& t) { t.mutable_seal_envelope()->set_security_context_name("root"); },
       "PERMISSION_DENIED", "security_context_name"},
  };
  for (const auto& c : cases) {
    pb::EdgeCommand cmd = Exec(c.id, "echo should-not-run");
    c.mutate(*cmd.mutable_invoke_tool());
    ASSERT_TRUE(fake_->Send(cmd));
    pb::EdgeResult r = WaitResult(c.id);
    ASSERT_TRUE(r.has_err()) << c.id << " " << r.DebugString();
    EXPECT_EQ(r.err().code(), c.code) << c.id;
    EXPECT_NE(r.err().message().find(c.field), std::string::npos)
        << c.id << ": " << r.err().message();
  }
  EXPECT_EQ(session_->status().commands.invoked, 0u) << "nothing ran";
}

TEST_F(EdgeSessionTest, DeadlineEndsTheCommandWithTimedOut) {
  StartController();
  StartSession();
  pb::EdgeCommand cmd = Exec("slow", "sleep 30");
  *cmd.mutable_invoke_tool()->mutable_deadline() = TimeUtil::MillisecondsToDuration(300);
  ASSERT_TRUE(fake_->Send(cmd));
  ASSERT_TRUE(AdvanceUntil([&] { return HasResult("slow"); }, 100ms)) << "the deadline never fired";
  pb::EdgeResult r = WaitResult("slow");
  ASSERT_TRUE(r.has_timed_out()) << r.DebugString();
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(r.timed_out().deadline()), 300);
}

TEST_F(EdgeSessionTest, CancelEndsTheCommandWithCancelledAndItsReason) {
  StartController();
  StartSession();
  ASSERT_TRUE(fake_->Send(Exec("victim", "sleep 30")));
  ASSERT_TRUE(WaitUntil([&] { return executor_->running() == 1; }));
  pb::EdgeCommand cancel;
  cancel.mutable_cancel()->set_command_id("victim");
  cancel.mutable_cancel()->set_reason("operator said so");
  ASSERT_TRUE(fake_->Send(cancel));
  pb::EdgeResult r = WaitResult("victim");
  ASSERT_TRUE(r.has_cancelled()) << r.DebugString();
  EXPECT_EQ(r.cancelled().reason(), "operator said so");
  // A Cancel for a command that is not running is ignored.
  cancel.mutable_cancel()->set_command_id("unknown");
  ASSERT_TRUE(fake_->Send(cancel));
  ASSERT_TRUE(fake_->Send(Exec("after", "true")));
  EXPECT_TRUE(WaitResult("after").has_ok());
  EXPECT_TRUE(Results("unknown").empty());
}

TEST_F(EdgeSessionTest, DrainRefusesNewWorkWithDrainingFinishesInFlightAndAcknowledges) {
  StartController();
  StartSession();
  ASSERT_TRUE(fake_->Send(Exec("inflight", "sleep 0.5; echo finished")));
  ASSERT_TRUE(WaitUntil([&] { return executor_->running() == 1; }));
  pb::EdgeCommand drain;
  drain.mutable_drain();
  ASSERT_TRUE(fake_->Send(drain));
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kCapabilityUpdate, 1));
  for (const auto& e : AllEvents()) {
    if (!e.has_capability_update()) continue;
    EXPECT_EQ(e.capability_update().capabilities().custom_labels().at("agent.state"), "draining");
  }
  ASSERT_TRUE(fake_->Send(Exec("refused", "echo no")));
  pb::EdgeResult refused = WaitResult("refused");
  ASSERT_TRUE(refused.has_err());
  EXPECT_EQ(refused.err().code(), "DRAINING");
  pb::EdgeResult done = WaitResult("inflight");
  ASSERT_TRUE(done.has_ok()) << done.DebugString();
  EXPECT_EQ(PayloadJson(done)["stdout"], "finished\n");
  EXPECT_TRUE(session_->status().commands.draining);
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, ShutdownCancelsAfterGraceFlushesClosesTheStreamAndAsksToExit) {
  StartController();
  StartSession();
  ASSERT_TRUE(fake_->Send(Exec("sleeper", "sleep 30")));
  ASSERT_TRUE(WaitUntil([&] { return executor_->running() == 1; }));
  pb::EdgeCommand shutdown;
  *shutdown.mutable_shutdown()->mutable_grace() = TimeUtil::MillisecondsToDuration(200);
  ASSERT_TRUE(fake_->Send(shutdown));
  ASSERT_TRUE(AdvanceUntil([&] { return HasResult("sleeper"); }, 100ms))
      << "the grace never ran out";
  pb::EdgeResult r = WaitResult("sleeper");
  ASSERT_TRUE(r.has_cancelled()) << r.DebugString();
  // The result was written before the agent half-closed the stream (WritesDone).
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s[0].half_closed && s[0].done; }));
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard lock(exit_mu_);
    return exit_reasons_.size() == 1;
  }));
  EXPECT_NE(exit_reasons_[0].find("shutdown"), std::string::npos);
  EXPECT_TRUE(WaitUntil([&] { return session_->status().state == "stopped"; }));
  EXPECT_EQ(fake_->Streams().size(), 1u) << "no reconnect after a shutdown";
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, ResultsCompletedWhileDisconnectedAreResentAfterTheNextHello) {
  StartController();
  StartSession();
  ASSERT_TRUE(fake_->Send(Exec("early", "echo early")));
  WaitResult("early");
  // It finishes only when the test says so (the gate file), not after some sleep.
  const std::string gate = dir_ / "late.go";
  ASSERT_TRUE(
      fake_->Send(Exec("late", "while [ ! -e " + gate + " ]; do sleep 0.01; done; echo late")));
  ASSERT_TRUE(WaitUntil([&] { return executor_->running() == 1; }));
  fake_->EndStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller restarting"));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().state == "backoff"; }));
  std::ofstream(gate).put('x');
  // The command finishes while there is no stream: its result waits in the outbox.
  ASSERT_TRUE(WaitUntil([&] {
    auto s = session_->status();
    return s.state == "backoff" && s.commands.running == 0 && s.outbox_entries == 2;
  }));
  EXPECT_TRUE(Results("late").empty());
  Advance(session_->status().last_backoff);
  ASSERT_TRUE(
      fake_->WaitFor([](const auto& s) { return s.size() == 2 && s[1].events.size() >= 3; }));
  auto second = fake_->Streams()[1];
  ASSERT_TRUE(second.events[0].has_hello()) << "Hello first, then the outbox";
  std::set<std::string> resent;
  for (size_t i = 1; i < second.events.size(); ++i) {
    ASSERT_TRUE(second.events[i].has_command_result());
    resent.insert(second.events[i].command_result().command_id());
  }
  // "early" was written on a stream that broke before its settle window ended: sent again.
  EXPECT_EQ(resent, (std::set<std::string>{"early", "late"}));
  EXPECT_EQ(PayloadJson(Results("late").back().result())["stdout"], "late\n");
  // Once the new stream has stayed up for the settle window, the outbox is pruned. The
  // window starts when the agent sees each write complete: wait for both to be recorded.
  ASSERT_TRUE(WaitUntil([&] {
    auto outbox = OutboxStore::Open(data_, clock_);
    if (!outbox) return false;
    auto all = (*outbox)->All();
    return all && all->size() == 2 && std::all_of(all->begin(), all->end(), [&](const auto& e) {
             return e.stream_id == second.stream_id && e.written_ms > 0;
           });
  }));
  Advance(30s);
  EXPECT_TRUE(WaitUntil([&] { return session_->status().outbox_entries == 0; }));
  ExpectAllVerified();
}

// Issue 14: every written result armed its own prune timer, and each prune was a transaction
// reading the whole outbox: a burst of results kept the timer thread waking and scanning for
// the settle window. One prune is pending at a time; it waits for the oldest entry still to
// settle, so a result written while it was pending is pruned on time all the same.
TEST_F(EdgeSessionTest, ABurstOfResultsArmsOnePruneTimerAndEachIsPrunedOnceSettled) {
  heartbeat_secs_ = 300;  // heartbeats prune too: none comes in this test's 50 s
  StartController();
  StartSession();
  auto written = [&](size_t n) {
    return WaitUntil([&] {
      auto all = session_->outbox().All();
      return all && all->size() == n && std::all_of(all->begin(), all->end(), [](const auto& e) {
               return !e.stream_id.empty() && e.written_ms > 0;
             });
    });
  };
  const size_t timers_before = session_->timers().Pending();
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(fake_->Send(Exec("burst-" + std::to_string(i), "true")));
  for (int i = 0; i < 8; ++i)
    WaitResult("burst-" + std::to_string(i));
  ASSERT_TRUE(written(8));
  EXPECT_EQ(session_->timers().Pending(), timers_before + 1) << "one prune timer for 8 results";
  // 20 s later, one more result, written while that prune is pending.
  Advance(20s);
  ASSERT_TRUE(fake_->Send(Exec("later", "true")));
  WaitResult("later");
  ASSERT_TRUE(written(9));
  EXPECT_EQ(session_->timers().Pending(), timers_before + 1);
  // The burst settles at 30 s; "later" (written at 20 s) not yet. The prune then arms again
  // for it (the fired timer is off the queue while it runs, so one pending again after the
  // prune means it has).
  Advance(10s);
  ASSERT_TRUE(WaitUntil([&] {
    return session_->outbox().Size().value_or(0) == 1 &&
           session_->timers().Pending() == timers_before + 1;
  }));
  auto left = session_->outbox().All();
  ASSERT_TRUE(left && left->size() == 1);
  EXPECT_EQ(left->front().command_id, "later");
  EXPECT_EQ(UntilNextTimer(), 20s) << "due when \"later\" settles, at 50 s";
  Advance(19s);
  EXPECT_EQ(session_->outbox().Size().value_or(0), 1u);
  Advance(1s);
  EXPECT_TRUE(WaitUntil([&] { return session_->outbox().Size().value_or(1) == 0; }));
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, OutboxOfAPreviousRunIsSentAfterHello) {
  StartController();
  {
    auto outbox = OutboxStore::Open(data_, clock_);
    ASSERT_TRUE(outbox);
    pb::EdgeResult r;
    r.mutable_cancelled()->set_reason("agent shutdown");
    ASSERT_TRUE((*outbox)->Put("from-last-run", r));
  }
  StartSession();
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s[0].events.size() >= 2; }));
  auto events = fake_->Streams()[0].events;
  EXPECT_TRUE(events[0].has_hello());
  ASSERT_TRUE(events[1].has_command_result());
  EXPECT_EQ(events[1].command_result().command_id(), "from-last-run");
  EXPECT_EQ(events[1].command_result().result().cancelled().reason(), "agent shutdown");
  ExpectAllVerified();
}

// Issue 16: every resend counted an attempt, so a controller restarted five times before the
// settle window ended turned a real result into "sent 5 times without being settled". Streams
// that merely break (UNAVAILABLE: the controller restarting) count nothing; a stream the
// controller ends blaming a message (RESOURCE_EXHAUSTED) counts against the results on it,
// and after max_attempts (5) of those the result is replaced, so a poison never blocks.
TEST_F(EdgeSessionTest, ControllerRestartsNeverReplaceAResultOnlyStreamsEndedBlamingItDo) {
  StartController();
  {
    auto outbox = OutboxStore::Open(data_, clock_);
    ASSERT_TRUE(outbox);
    pb::EdgeResult r;
    r.mutable_ok()->set_exit_code(0);
    ASSERT_TRUE((*outbox)->Put("survivor", r));
  }
  StartSession();
  // The result on stream `index`, once its write is recorded in the outbox (so the stream's
  // end is judged with the write known), then the stream ended with `status`.
  auto deliver_then_end = [&](size_t index, grpc::Status status) -> pb::EdgeResult {
    pb::EdgeResult got;
    EXPECT_TRUE(fake_->WaitFor([&](const auto& streams) {
      if (streams.size() != index + 1) return false;
      for (const auto& e : streams[index].events)
        if (e.has_command_result() && e.command_result().command_id() == "survivor") {
          got = e.command_result().result();
          return true;
        }
      return false;
    })) << "stream "
        << index;
    const std::string sid = fake_->Streams()[index].stream_id;
    EXPECT_TRUE(WaitUntil([&] {
      auto all = session_->outbox().All();
      return all && all->size() == 1 && (*all)[0].stream_id == sid;
    })) << "stream "
        << index;
    fake_->EndStream(status);
    EXPECT_TRUE(WaitUntil([&] { return session_->status().state == "backoff"; }));
    Advance(session_->status().last_backoff);
    return got;
  };
  size_t index = 0;
  for (int restart = 0; restart < 10; ++restart, ++index) {
    pb::EdgeResult r =
        deliver_then_end(index, grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting"));
    ASSERT_TRUE(r.has_ok()) << "after " << restart << " controller restarts: " << r.DebugString();
  }
  for (int blamed = 0; blamed < 5; ++blamed, ++index) {
    pb::EdgeResult r = deliver_then_end(
        index, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "message too large"));
    ASSERT_TRUE(r.has_ok()) << "after " << blamed << " blamed streams: " << r.DebugString();
  }
  // Five streams ended blaming it: replaced by an error saying why.
  pb::EdgeResult replaced;
  ASSERT_TRUE(fake_->WaitFor([&](const auto& streams) {
    if (streams.size() != index + 1) return false;
    for (const auto& e : streams[index].events)
      if (e.has_command_result() && e.command_result().command_id() == "survivor") {
        replaced = e.command_result().result();
        return true;
      }
    return false;
  }));
  ASSERT_TRUE(replaced.has_err()) << replaced.DebugString();
  EXPECT_EQ(replaced.err().code(), "UNAVAILABLE");
  EXPECT_NE(replaced.err().message().find("5 times with an error that blames a message"),
            std::string::npos)
      << replaced.err().message();
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, TokenIsRenewedAt70To90PercentAndTheNextEnvelopeCarriesTheNewOne) {
  random_.set_mode(FixedRandom::Mode::kMin);  // the low end of the jitter: 70 %
  StartController({.token_ttl = 100s});
  StartSession();
  const std::string first = fake_->IssuedTokens().back();
  const int64_t first_expiry = session_->status().token_expires_at_ms;
  Advance(30s);
  // Each heartbeat schedules the next when it runs: wait for it before moving time again.
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 1));
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 2));
  Advance(9s);  // 69 s: not yet
  EXPECT_EQ(UntilNextTimer(), 1s) << "the renewal is due at 70 s of the 100 s lifetime";
  EXPECT_EQ(fake_->Calls("RotateEdgeKey"), 0);
  Advance(1s);
  ASSERT_TRUE(WaitUntil([&] { return fake_->IssuedTokens().size() == 2; }));
  EXPECT_EQ(fake_->Calls("RotateEdgeKey"), 1) << "renewed with RotateEdgeKey, same key";
  EXPECT_EQ(fake_->Keys("edge-01"), std::vector<std::string>{key_->public_key()});
  const std::string second = fake_->IssuedTokens().back();
  // The session installed it (issued at 70 s, so it expires 70 s after the first).
  ASSERT_TRUE(
      WaitUntil([&] { return session_->status().token_expires_at_ms == first_expiry + 70000; }));
  Advance(20s);  // 90 s: a heartbeat, sealed with the new token (the old one is revoked)
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 3));
  auto s = fake_->Streams()[0];
  EXPECT_EQ(s.envelope_tokens.back(), second);
  EXPECT_NE(second, first);
  ExpectAllVerified();

  // When the refresh fails, the agent attests again.
  fake_->FailNext("RotateEdgeKey", 1, grpc::Status(grpc::StatusCode::ABORTED, "busy"));
  const int attests = fake_->Calls("AttestNode");
  Advance(70s);
  ASSERT_TRUE(WaitUntil([&] { return fake_->IssuedTokens().size() == 3; }));
  EXPECT_EQ(fake_->Calls("AttestNode"), attests + 1);
}

// Issue 16: the wall clock jumps an hour either way (injected clock; the fake controller
// shares it, as a host whose clock was stepped). Forward: the token is past its expiry by the
// wall clock long before the monotonic renewal timer fires; the next heartbeat tick renews it
// once, on the same stream, and no event is ever sealed with the expired token. Backward:
// nothing changes; the renewal comes when its timer says. Never a reconnect.
TEST_F(EdgeSessionTest, AWallClockJumpOfAnHourRenewsTheTokenOnceAndNeverReconnects) {
  StartController({.token_ttl = 600s});
  StartSession();
  ASSERT_EQ(fake_->IssuedTokens().size(), 1u);
  const int attests = fake_->Calls("AttestNode");

  clock_.SetWall(clock_.Now() + 1h);
  Advance(30s);  // the heartbeat tick sees the token expired by the wall clock
  ASSERT_TRUE(WaitUntil([&] { return fake_->IssuedTokens().size() == 2; }));
  ASSERT_TRUE(WaitUntil([&] {
    return session_->status().token_expires_at_ms == ToEpochMillis(clock_.Now()) + 600'000;
  }));
  EXPECT_EQ(CountEvents(pb::EdgeEvent::kHeartbeat), 0u) << "not sealed with the expired token";
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 1));
  EXPECT_EQ(fake_->Streams()[0].envelope_tokens.back(), fake_->IssuedTokens().back());
  // Each heartbeat schedules the next when it runs: wait for it before moving time again
  // (and so every heartbeat sealed before the jump back below has arrived: the fake judges
  // timestamps by the shared clock when it receives them).
  for (size_t i = 2; i <= 5; ++i) {
    Advance(30s);
    ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, i));
  }
  EXPECT_EQ(fake_->IssuedTokens().size(), 2u) << "renewed once, not on every tick";

  clock_.SetWall(clock_.Now() - 1h);
  const size_t heartbeats = CountEvents(pb::EdgeEvent::kHeartbeat);
  for (int i = 0; i < 4; ++i) {
    Advance(30s);
    ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, heartbeats + i + 1));
  }
  EXPECT_EQ(fake_->IssuedTokens().size(), 2u) << "a jump back renews nothing early";
  EXPECT_EQ(fake_->Streams().size(), 1u) << "no reconnect, either way";
  EXPECT_EQ(fake_->Calls("AttestNode") + fake_->Calls("RotateEdgeKey"), attests + 1);
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, PendingJoinTokenIsTheFirstProofAndIsDeletedAfterTheChallenge) {
  StartController({.join_token = "aGVhZA.Y2xhaW1z.c2ln"}, /*register_key=*/false);
  ASSERT_TRUE(EnrollmentFiles::WritePendingToken(data_, "aGVhZA.Y2xhaW1z.c2ln"));
  StartSession();
  EXPECT_EQ(fake_->ProofsSeen(), std::vector<std::string>{"aGVhZA.Y2xhaW1z.c2ln"});
  EXPECT_FALSE(std::filesystem::exists(EnrollmentFiles::PendingTokenPath(data_)));
  EXPECT_EQ(fake_->Keys("edge-01"), std::vector<std::string>{key_->public_key()});
  // A refused stream drops the token; the next attestation carries no proof.
  fake_->EndStream(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "token revoked"));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().state == "backoff"; }));
  Advance(session_->status().last_backoff);
  ASSERT_TRUE(fake_->WaitFor([](const auto& s) { return s.size() == 2 && !s[1].events.empty(); }));
  EXPECT_EQ(fake_->ProofsSeen(), (std::vector<std::string>{"aGVhZA.Y2xhaW1z.c2ln", ""}));
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, AnAlreadyRedeemedProofFallsBackToPlainAttestation) {
  StartController({.join_token = "aGVhZA.Y2xhaW1z.c2ln"}, /*register_key=*/true);
  ASSERT_TRUE(EnrollmentFiles::WritePendingToken(data_, "aGVhZA.Y2xhaW1z.c2ln"));
  StartSession();
  EXPECT_EQ(fake_->ProofsSeen(), (std::vector<std::string>{"aGVhZA.Y2xhaW1z.c2ln", ""}));
  EXPECT_FALSE(std::filesystem::exists(EnrollmentFiles::PendingTokenPath(data_)));
}

TEST_F(EdgeSessionTest, AKeyReplacedOnDiskIsUsedFromTheNextHeartbeat) {
  StartController();
  StartSession();
  // What `edge-agent rotate-key` does: the controller accepts the new key, the file is replaced.
  auto next = identity::NodeKey::Generate();
  ASSERT_TRUE(next);
  auto identity = identity::KeystoreFiles::Load(data_);
  NodeAttestor cli(identity::ChannelFactory(*identity).Mtls(fake_->address()), "edge-01", data_,
                   clock_);
  auto token = cli.Attest(*key_);
  ASSERT_TRUE(token) << token.error().ToString();
  auto rotated = cli.Rotate(*key_, *next, *token);
  ASSERT_TRUE(rotated) << rotated.error().ToString();
  EXPECT_EQ(rotated->overlap_window, 60s);
  ASSERT_TRUE(NodeKeyStore(data_).Install(*next, clock_.Now()));
  const int attests = fake_->Calls("AttestNode");
  const int64_t expiry = session_->status().token_expires_at_ms;
  Advance(30s);  // heartbeat: the key file changed → attest with the new key
  ASSERT_TRUE(WaitUntil([&] { return fake_->Calls("AttestNode") == attests + 1; }));
  ASSERT_TRUE(WaitUntil([&] { return fake_->IssuedTokens().size() == 4; }));
  // The session installed the new token (issued 30 s later, so it expires 30 s later).
  ASSERT_TRUE(WaitUntil([&] { return session_->status().token_expires_at_ms == expiry + 30000; }));
  Advance(30s);
  ASSERT_TRUE(WaitEvents(pb::EdgeEvent::kHeartbeat, 2));
  auto s = fake_->Streams()[0];
  ASSERT_EQ(s.events.size(), 3u);
  std::vector<std::string> only_new = {next->public_key()};
  EXPECT_TRUE(identity::EnvelopeCodec::VerifyEvent(s.events[2], "edge-01", s.stream_id, only_new,
                                                   clock_.Now()))
      << "the heartbeat after the change is signed by the new key";
  EXPECT_EQ(s.envelope_tokens.back(), fake_->IssuedTokens().back());
  EXPECT_EQ(fake_->Streams().size(), 1u) << "the stream survived the key change";
}

TEST_F(EdgeSessionTest, MalformedCommandsAreRefusedOrCountedNeverRun) {
  StartController();
  StartSession();
  // No command_id: nothing can be answered; counted.
  ASSERT_TRUE(fake_->Send(Exec("", "echo x")));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().commands.rejected_commands == 1; }));
  // No known kind (an empty command, or only a field this agent does not know).
  pb::EdgeCommand unknown;
  unknown.GetReflection()->MutableUnknownFields(&unknown)->AddVarint(99, 1);
  ASSERT_TRUE(fake_->Send(unknown));
  ASSERT_TRUE(fake_->Send(pb::EdgeCommand()));
  ASSERT_TRUE(WaitUntil([&] { return session_->status().commands.rejected_commands == 3; }));
  // Args the tool needs, missing or of the wrong shape.
  ASSERT_TRUE(fake_->Send(Invoke("no-args", "exec", json::object())));
  pb::EdgeResult r = WaitResult("no-args");
  ASSERT_TRUE(r.has_err());
  EXPECT_EQ(r.err().code(), "INVALID_ARGUMENT");
  EXPECT_NE(r.err().message().find("command"), std::string::npos) << r.err().message();
  ASSERT_TRUE(fake_->Send(Invoke("bad-args", "exec", {{"command", 5}})));
  r = WaitResult("bad-args");
  ASSERT_TRUE(r.has_err());
  EXPECT_EQ(r.err().code(), "INVALID_ARGUMENT");
  ASSERT_TRUE(fake_->Send(Invoke("no-tool", "", json::object())));
  r = WaitResult("no-tool");
  EXPECT_EQ(r.err().code(), "INVALID_ARGUMENT");
  EXPECT_NE(r.err().message().find("invoke_tool.tool_name"), std::string::npos);
  ASSERT_TRUE(fake_->Send(Invoke("ghost", "no.such.tool", json::object())));
  EXPECT_EQ(WaitResult("ghost").err().code(), "NOT_FOUND");
  pb::EdgeCommand negative = Exec("negative", "true");
  negative.mutable_invoke_tool()->mutable_deadline()->set_seconds(-1);
  ASSERT_TRUE(fake_->Send(negative));
  r = WaitResult("negative");
  EXPECT_EQ(r.err().code(), "INVALID_ARGUMENT");
  EXPECT_NE(r.err().message().find("invoke_tool.deadline"), std::string::npos);
  // The stream is still fine.
  ASSERT_TRUE(fake_->Send(Exec("fine", "echo fine")));
  EXPECT_TRUE(WaitResult("fine").has_ok());
  EXPECT_EQ(fake_->Streams().size(), 1u);
  ExpectAllVerified();
}

TEST_F(EdgeSessionTest, RepeatedCommandIdsNeverRunTwice) {
  StartController();
  StartSession();
  const std::string ran = dir_ / "ran.log";
  // Completed: the stored result comes back, nothing runs again.
  ASSERT_TRUE(fake_->Send(Exec("once", "echo run >> " + ran + "; echo done")));
  WaitResult("once");
  ASSERT_TRUE(fake_->Send(Exec("once", "echo run >> " + ran + "; echo done")));
  ASSERT_TRUE(WaitResultCount("once", 2));
  EXPECT_EQ(PayloadJson(Results("once")[1].result())["stdout"], "done\n");
  // Still running: the duplicate is ignored; one result when it ends.
  const std::string gate = dir_ / "twice.go";
  const std::string twice = "while [ ! -e " + gate + " ]; do sleep 0.01; done; echo run >> " + ran;
  ASSERT_TRUE(fake_->Send(Exec("twice", twice)));
  ASSERT_TRUE(WaitUntil([&] { return executor_->running() == 1; }));
  ASSERT_TRUE(fake_->Send(Exec("twice", twice)));
  // The duplicate is handled (ignored) before the first may end: a marker command after it
  // on the same stream has its result while "twice" still waits on the gate.
  ASSERT_TRUE(fake_->Send(Exec("between", "true")));
  WaitResult("between");
  EXPECT_TRUE(Results("twice").empty());
  std::ofstream(gate).put('x');
  WaitResult("twice");
  ASSERT_TRUE(fake_->Send(Exec("marker", "true")));
  WaitResult("marker");
  EXPECT_EQ(Results("twice").size(), 1u);
  std::ifstream in(ran);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "run\nrun\n") << "each command ran exactly once";

  // While draining, a repeat of a completed command still gets its stored result (a new
  // command is refused with DRAINING).
  pb::EdgeCommand drain;
  drain.mutable_drain();
  ASSERT_TRUE(fake_->Send(drain));
  ASSERT_TRUE(fake_->Send(Exec("new-while-draining", "true")));
  EXPECT_EQ(WaitResult("new-while-draining").err().code(), "DRAINING");
  ASSERT_TRUE(fake_->Send(Exec("once", "echo run >> " + ran + "; echo done")));
  ASSERT_TRUE(WaitResultCount("once", 3));
  auto third = Results("once")[2].result();
  ASSERT_TRUE(third.has_ok()) << third.DebugString();
  EXPECT_EQ(PayloadJson(third)["stdout"], "done\n");
}

TEST_F(EdgeSessionTest, StopIsPromptWhileBackingOff) {
  StartController();
  fake_->FailNext("ConnectEdge", 100, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  backoff_.Reset();
  StartSession("", false);
  ASSERT_TRUE(WaitUntil([&] { return session_->status().state == "backoff"; }));
  const auto t0 = std::chrono::steady_clock::now();
  session_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(session_->status().state, "stopped");
}

}  // namespace
}  // namespace edge::agentedge::testing
