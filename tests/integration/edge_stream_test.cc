// The edge stream through the real binaries (issue: edge stream): edge-controller and
// edge-agent on loopback; the agent enrolls, attests, connects and runs what the operator's
// CLI dispatches. A hand-driven client (the test, holding a real node's keystore and key)
// checks what the controller refuses on ConnectEdge.
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>

#include "agent/identity/channel_factory.h"
#include "agent/identity/envelope_codec.h"
#include "agent/identity/jwt.h"
#include "agent/identity/keystore_files.h"
#include "agent/identity/node_key.h"
#include "node_cluster.grpc.pb.h"
#include "tests/integration/edge_fixture.h"

namespace edge::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace pb = aegis::cluster::v1;
using json = nlohmann::json;

class EdgeStreamTest : public EdgeFixture {};

TEST_F(EdgeStreamTest, EnrollConnectInvokeEchoStreamsOutputAndResult) {
  auto& agent = EnrollAndStart();
  json node = Node("edge-01");
  EXPECT_EQ(node.value("state", ""), "healthy") << node.dump();

  auto r = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo hi"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hi\n"), std::string::npos) << r.out;

  // The tool's exit code is the CLI's exit code.
  auto three = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=exit 3"});
  EXPECT_EQ(three.exit_code, 3) << three.out << three.err;

  // Both are recorded with their results.
  auto list = Ctl({"commands", "--node", "edge-01", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(json::parse(list.out).size(), 2u) << list.out;

  // The join token was spent and is gone from the agent's disk and config.
  EXPECT_EQ(ReadText(ConfigPath("edge-01")).find("join_token"), std::string::npos);
  EXPECT_FALSE(fs::exists(DataDir("edge-01") + "/certs/join_token.pending"));
  EXPECT_TRUE(fs::exists(DataDir("edge-01") + "/keys/node.ed25519"));
  EXPECT_TRUE(agent.Running());
}

TEST_F(EdgeStreamTest, UnknownNodeAndBadArgumentsAreClearErrors) {
  EnrollAndStart();
  auto unknown = Ctl({"invoke", "--node", "nope", "--tool", "exec", "--arg", "command=true"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("nope"), std::string::npos) << unknown.err;
  auto tool = Ctl({"invoke", "--node", "edge-01", "--tool", "no.such.tool"});
  EXPECT_NE(tool.exit_code, 0);
  EXPECT_NE((tool.out + tool.err).find("NOT_FOUND"), std::string::npos) << tool.out << tool.err;
  auto escape = Ctl({"invoke", "--node", "edge-01", "--tool", "file.read", "--arg",
                     "path=../../../../etc/passwd"});
  EXPECT_NE(escape.exit_code, 0);
  EXPECT_NE((escape.out + escape.err).find("PATH_OUTSIDE_ROOT"), std::string::npos)
      << escape.out << escape.err;
}

TEST_F(EdgeStreamTest, CancelEndsASleepWithCancelledAndKillsIt) {
  EnrollAndStart();
  const std::string marker = "edge-it-cancel-" + std::to_string(::getpid());
  const std::string id = Detach("edge-01", "sleep 60; echo " + marker);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitUntil([&] { return ProcessWithMarker(marker); }, 30s)) << "never started";
  auto c = Ctl({"cancel", "--command", id, "--reason", "operator said so"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  json cmd = WaitResult(id, 30s);
  ASSERT_TRUE(cmd.is_object()) << "no result after cancel";
  EXPECT_EQ(cmd["result"].value("outcome", ""), "cancelled") << cmd.dump();
  EXPECT_TRUE(WaitUntil([&] { return !ProcessWithMarker(marker); }, 20s)) << "still running";
}

TEST_F(EdgeStreamTest, DeadlineEndsWithTimedOut) {
  EnrollAndStart();
  auto r = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=sleep 30",
                "--deadline", "1s"});
  EXPECT_EQ(r.exit_code, 124) << r.out << r.err;
  auto list = json::parse(Ctl({"commands", "--node", "edge-01", "--format", "json"}).out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["result"].value("outcome", ""), "timed_out") << list.dump();
}

TEST_F(EdgeStreamTest, DrainRefusesNewWorkAndFinishesInFlight) {
  EnrollAndStart();
  const std::string id = Detach("edge-01", "sleep 2; echo finished-after-drain");
  auto d = Ctl({"drain", "--node", "edge-01"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(WaitUntil([&] { return Node("edge-01").value("state", "") == "draining"; }, 30s))
      << Node("edge-01").dump();
  auto refused = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=true"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE((refused.out + refused.err).find("DRAINING"), std::string::npos)
      << refused.out << refused.err;
  json cmd = WaitResult(id);
  ASSERT_TRUE(cmd.is_object());
  EXPECT_EQ(cmd["result"].value("outcome", ""), "ok") << cmd.dump();
  EXPECT_NE(cmd.dump().find("finished-after-drain"), std::string::npos) << cmd.dump();
}

TEST_F(EdgeStreamTest, ShutdownWithGraceCancelsWhatIsLeftAndExitsZero) {
  auto& agent = EnrollAndStart();
  const std::string marker = "edge-it-shutdown-" + std::to_string(::getpid());
  const std::string id = Detach("edge-01", "sleep 60; echo " + marker);
  ASSERT_TRUE(WaitUntil([&] { return ProcessWithMarker(marker); }, 30s));
  auto s = Ctl({"shutdown", "--node", "edge-01", "--grace", "1s"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  auto code = agent.Wait(30s);
  ASSERT_TRUE(code.has_value()) << "agent did not exit";
  EXPECT_EQ(*code, 0) << agent.Stderr();
  EXPECT_FALSE(ProcessWithMarker(marker)) << "a child outlived the agent";
  json cmd = WaitResult(id, 10s);
  ASSERT_TRUE(cmd.is_object()) << "the cancelled result was flushed before exit";
  EXPECT_EQ(cmd["result"].value("outcome", ""), "cancelled") << cmd.dump();
}

TEST_F(EdgeStreamTest, PushConfigChangesTheHeartbeatInterval) {
  EnrollAndStart("edge-01", "", 30);
  const std::string delta = dir_ / "delta.yaml";
  WriteText(delta, "cluster:\n  heartbeat_interval_secs: 1\n");
  auto p = Ctl({"push-config", "--node", "edge-01", delta, "--version", "v2"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  // With a 30 s interval three distinct heartbeats cannot arrive in 20 s; with 1 s they do.
  std::set<std::string> seen;
  bool fast = WaitUntil(
      [&] {
        json n = Node("edge-01");
        if (n.contains("last_heartbeat")) seen.insert(n["last_heartbeat"].dump());
        return seen.size() >= 3;
      },
      20s);
  EXPECT_TRUE(fast) << "heartbeats seen: " << seen.size();
}

TEST_F(EdgeStreamTest, ControllerKilledWhile20CommandsRunEveryResultArrivesOnce) {
  EnrollAndStart("edge-01", "edge:\n  max_concurrent_commands: 32\n", 30);
  const std::string ran = dir_ / "ran.log";
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    ids.push_back(Detach("edge-01", "sleep 3; echo run-" + std::to_string(i) + " >> " + ran +
                                        "; echo out-" + std::to_string(i)));
    ASSERT_FALSE(ids.back().empty());
  }
  ctl_->Kill();
  std::this_thread::sleep_for(500ms);
  ctl_->Restart();
  for (size_t i = 0; i < ids.size(); ++i) {
    json cmd = WaitResult(ids[i], 90s);
    ASSERT_TRUE(cmd.is_object()) << "no result for command " << i << " " << ids[i];
    EXPECT_EQ(cmd["result"].value("outcome", ""), "ok") << cmd.dump();
    EXPECT_NE(cmd.dump().find("out-" + std::to_string(i)), std::string::npos) << cmd.dump();
  }
  // Each ran exactly once, and the controller holds exactly one record per command.
  std::string log = ReadText(ran);
  for (int i = 0; i < 20; ++i) {
    const std::string line = "run-" + std::to_string(i) + "\n";
    size_t first = log.find(line);
    EXPECT_NE(first, std::string::npos) << line;
    EXPECT_EQ(log.find(line, first + 1), std::string::npos) << "ran twice: " << line;
  }
  auto list = json::parse(Ctl({"commands", "--node", "edge-01", "--format", "json"}).out);
  EXPECT_EQ(list.size(), 20u);
}

TEST_F(EdgeStreamTest, AgentRestartedReconnectsWithTheSameIdentity) {
  auto& first = EnrollAndStart();
  const std::string key_before = ReadText(DataDir("edge-01") + "/keys/node.ed25519");
  const std::string p12_before = ReadText(DataDir("edge-01") + "/certs/node.p12");
  ASSERT_FALSE(key_before.empty());
  first.Signal(SIGTERM);
  auto code = first.Wait(30s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << first.Stderr();
  ASSERT_TRUE(WaitConnected("edge-01", false, 30s));

  auto& second = StartAgent();
  ASSERT_TRUE(WaitConnected("edge-01", true)) << second.Stderr();
  EXPECT_EQ(ReadText(DataDir("edge-01") + "/keys/node.ed25519"), key_before);
  EXPECT_EQ(ReadText(DataDir("edge-01") + "/certs/node.p12"), p12_before);
  auto r = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo again"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("again"), std::string::npos) << r.out;
}

// A test client holding a real enrolled node's identity, driving ConnectEdge by hand.
class HandDrivenNode {
 public:
  HandDrivenNode(const std::string& data_dir, const std::string& target, std::string node,
                 std::string key_path = "")
      : node_(std::move(node)) {
    if (key_path.empty()) key_path = data_dir + "/keys/node.ed25519";
    auto ident = identity::KeystoreFiles::Load(data_dir);
    if (!ident) throw std::runtime_error(ident.error().ToString());
    channel_ = identity::ChannelFactory(*ident).Mtls(target);
    stub_ = pb::NodeClusterService::NewStub(channel_);
    auto key = identity::NodeKey::Load(key_path);
    if (!key) throw std::runtime_error(key.error().ToString());
    key_.emplace(std::move(*key));
  }
  // AttestNode + ChallengeNode without a bootstrap proof (the node is enrolled); the
  // status of the first call that fails.
  grpc::Status TryAttest(std::string* token) {
    try {
      *token = Attest();
      return grpc::Status::OK;
    } catch (const std::runtime_error& e) {
      return grpc::Status(last_code_, e.what());
    }
  }
  std::string Attest() {
    pb::AttestNodeRequest req;
    req.set_node_id(node_);
    req.set_role(pb::NODE_ROLE_EDGE);
    req.set_public_key(key_->public_key());
    req.mutable_capabilities();
    pb::AttestNodeResponse resp;
    grpc::ClientContext c1;
    auto st = stub_->AttestNode(&c1, req, &resp);
    if (!st.ok()) {
      last_code_ = st.error_code();
      throw std::runtime_error("attest: " + st.error_message());
    }
    pb::ChallengeNodeRequest ch;
    ch.set_challenge_id(resp.challenge_id());
    ch.set_node_id(node_);
    ch.set_challenge_signature(*key_->Sign(resp.challenge_nonce()));
    pb::ChallengeNodeResponse tok;
    grpc::ClientContext c2;
    st = stub_->ChallengeNode(&c2, ch, &tok);
    if (!st.ok()) {
      last_code_ = st.error_code();
      throw std::runtime_error("challenge: " + st.error_message());
    }
    return tok.node_security_token();
  }
  pb::EdgeEvent Hello(const std::string& token, const std::string& stream_id,
                      const identity::NodeKey* signer = nullptr) {
    pb::EdgeEvent e;
    e.mutable_hello()->set_stream_id(stream_id);
    e.mutable_hello()->mutable_capabilities()->set_os("linux");
    Seal(e, token, stream_id, signer);
    return e;
  }
  pb::EdgeEvent Heartbeat(const std::string& token, const std::string& stream_id) {
    pb::EdgeEvent e;
    e.mutable_heartbeat()->mutable_sent_at()->set_seconds(std::time(nullptr));
    Seal(e, token, stream_id, nullptr);
    return e;
  }
  // Opens ConnectEdge with `bearer`, writes `events` in order, and returns how the
  // controller ended the stream.
  grpc::Status Run(const std::string& bearer, const std::vector<pb::EdgeEvent>& events) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + bearer);
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto stream = stub_->ConnectEdge(&ctx);
    for (const auto& e : events) {
      if (!stream->Write(e)) break;
    }
    pb::EdgeCommand cmd;
    // The controller sends no command to this node; Read ends when it ends the stream. A
    // stream that is (wrongly) kept open ends at the deadline: DEADLINE_EXCEEDED.
    while (stream->Read(&cmd)) {
    }
    return stream->Finish();
  }
  const std::string& node() const { return node_; }

 private:
  void Seal(pb::EdgeEvent& e, const std::string& token, const std::string& stream_id,
            const identity::NodeKey* signer) {
    auto st = identity::EnvelopeCodec::SealEvent(
        e, signer ? *signer : *key_, token, std::chrono::system_clock::now(), node_, stream_id);
    if (!st) throw std::runtime_error(st.error().ToString());
  }
  std::string node_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::NodeClusterService::Stub> stub_;
  std::optional<identity::NodeKey> key_;
  grpc::StatusCode last_code_ = grpc::StatusCode::OK;
};

TEST_F(EdgeStreamTest, ForgedReplayedOutOfOrderAndExpiredAreRefused) {
  // Enroll a node with `edge-agent enroll` (keystore, node key, first attestation) and
  // drive its stream by hand.
  WriteAgentConfig("edge-07");
  auto e = RunCommand({AgentBin(), "--config", ConfigPath("edge-07"), "enroll"}, {}, 60s);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  HandDrivenNode n(DataDir("edge-07"), ctl_->advertise(), "edge-07");
  const std::string token = n.Attest();
  const std::string sid_a = "0b7c6a4e-6f0b-4c7e-9a51-3c2f4c1d2e01";
  const std::string sid_b = "0b7c6a4e-6f0b-4c7e-9a51-3c2f4c1d2e02";

  // First message not a Hello: INVALID_ARGUMENT.
  auto st = n.Run(token, {n.Heartbeat(token, sid_a)});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();

  // A Hello signed by a key that is not the node's: UNAUTHENTICATED.
  auto forger = identity::NodeKey::Generate();
  ASSERT_TRUE(forger);
  st = n.Run(token, {n.Hello(token, sid_a, &*forger)});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  // A genuine heartbeat replayed from stream B onto stream A: UNAUTHENTICATED.
  st = n.Run(token, {n.Hello(token, sid_a), n.Heartbeat(token, sid_b)});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  // An expired NodeSecurityToken (signed by the controller's own key, so only the expiry
  // is wrong), and one signed by a foreign key: UNAUTHENTICATED.
  auto ctl_key = identity::EcSigningKey::FromPem(ReadText(ctl_->data_dir() + "/ca/token.key"));
  ASSERT_TRUE(ctl_key) << ctl_key.error().ToString();
  const int64_t now = std::time(nullptr);
  json claims = {{"iss", "edge-controller"}, {"sub", "edge-07"},  {"role", "edge"},
                 {"tid", "default"},         {"iat", now - 7200}, {"exp", now - 3600},
                 {"jti", "expired-1"}};
  auto expired = identity::SignJwtEs256(claims, *ctl_key);
  ASSERT_TRUE(expired);
  st = n.Run(*expired, {n.Hello(*expired, sid_a)});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("expired"), std::string::npos) << st.error_message();
  auto foreign_key = identity::EcSigningKey::Generate();
  claims["exp"] = now + 3600;
  auto foreign = identity::SignJwtEs256(claims, *foreign_key);
  st = n.Run(*foreign, {n.Hello(*foreign, sid_a)});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_EQ(st.error_message().find("expired"), std::string::npos) << st.error_message();

  // The genuine stream is accepted: the node shows as connected while it is open.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + token);
  auto stub = pb::NodeClusterService::NewStub(
      identity::ChannelFactory(*identity::KeystoreFiles::Load(DataDir("edge-07")))
          .Mtls(ctl_->advertise()));
  auto stream = stub->ConnectEdge(&ctx);
  ASSERT_TRUE(stream->Write(n.Hello(token, sid_a)));
  EXPECT_TRUE(WaitConnected("edge-07", true, 20s));
  ctx.TryCancel();
  stream->Finish();
}

TEST_F(EdgeStreamTest, RotateKeyWhileRunningArchivesTheOldKeyAndTheAgentSwitchesToTheNew) {
  // A short overlap, so the old key's end is observable; heartbeats every second, so the
  // running agent notices the new key file within the overlap.
  ctl_.reset();
  ctl_ = std::make_unique<ControllerFixture>(dir_, "ctl", "cluster:\n  rotation_overlap: 4s\n");
  auto& agent = EnrollAndStart("edge-01", "", 1);
  const std::string data = DataDir("edge-01");
  const std::string old_key = ReadText(data + "/keys/node.ed25519");

  auto r = RunCommand({AgentBin(), "--config", ConfigPath("edge-01"), "rotate-key"}, {}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("rotated the node key of edge-01"), std::string::npos) << r.out;
  EXPECT_NE(ReadText(data + "/keys/node.ed25519"), old_key) << "a new key is installed";
  std::vector<fs::path> archived;
  for (const auto& e : fs::directory_iterator(data + "/keys/archive"))
    archived.push_back(e.path());
  ASSERT_EQ(archived.size(), 1u);
  EXPECT_EQ(ReadText(archived[0]), old_key) << "the old key is archived, not lost";
  EXPECT_EQ(fs::status(archived[0]).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(data + "/keys/node.ed25519").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  // Past the overlap the controller knows only the new key: the agent still works, on the
  // same stream identity, and the old key can no longer attest.
  std::this_thread::sleep_for(5s);
  auto again = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo new"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err << agent.Stderr();
  EXPECT_NE(again.out.find("new"), std::string::npos) << again.out;
  EXPECT_TRUE(agent.Running());
  const std::string log = agent.Stderr();
  EXPECT_NE(log.find("changed on disk: attesting with the new key"), std::string::npos) << log;
  EXPECT_EQ(log.find("ended:"), std::string::npos) << "the stream survived the rotation: " << log;
  HandDrivenNode with_old(data, ctl_->advertise(), "edge-01", archived[0]);
  std::string token;
  auto st = with_old.TryAttest(&token);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  HandDrivenNode with_new(data, ctl_->advertise(), "edge-01");
  EXPECT_TRUE(with_new.TryAttest(&token).ok());
}

// ---- issue 15: review findings reproduced through the real binaries -------------------------

TEST_F(EdgeStreamTest, BytesThatAreNotUtf8NeitherCrashNorDeafenTheNode) {
  auto& agent = EnrollAndStart();
  auto invoke = [&](std::vector<std::string> args) {
    std::vector<std::string> all = {"invoke", "--node", "edge-01"};
    all.insert(all.end(), args.begin(), args.end());
    return Ctl(all);
  };
  // Before: each of these terminated the agent, or left it heartbeating but never reading.
  auto bin = invoke({"--tool", "exec", "--arg", "command=printf 'ok\\377'"});
  EXPECT_EQ(bin.exit_code, 0) << bin.out << bin.err;
  auto tail = invoke({"--tool", "exec", "--arg", "command=head -c 300000 /dev/urandom"});
  EXPECT_EQ(tail.exit_code, 0) << tail.err;
  auto cut = invoke({"--tool", "exec", "--arg",
                     "command=printf '\\342\\202\\254'; printf 'x%.0s' $(seq 1 65534)"});
  EXPECT_EQ(cut.exit_code, 0) << cut.err;
  auto mk = invoke({"--tool", "exec", "--arg", "command=touch \"$(printf 'bad\\377name')\""});
  EXPECT_EQ(mk.exit_code, 0) << mk.err;
  auto ls = invoke({"--tool", "file.list", "--arg", "path=."});
  EXPECT_EQ(ls.exit_code, 0) << ls.out << ls.err;
  EXPECT_NE(ls.out.find("YmFk/25hbWU="), std::string::npos) << "the exact name, base64: " << ls.out;
  // Still reading commands, still running, still healthy.
  auto after = invoke({"--tool", "sysinfo", "--deadline", "20s"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_TRUE(agent.Running()) << agent.Stderr();
  EXPECT_EQ(Node("edge-01").value("state", ""), "healthy");
}

TEST_F(EdgeStreamTest, ResultsLargerThanOneMessageAreRefusedAndTheNodeWorksOn) {
  // Both sides default to 16 MiB now. A 3.5 MiB read (about 4.7 MB as a result) goes through;
  // before, the controller's 4 MiB limit ended the stream with it and the outbox resent it
  // after every reconnect, so the node never worked again.
  EnrollAndStart();
  // Multi-megabyte answers through an ASan agent and controller: one took more than the
  // default 20 s in a stress run at load 11 on 2 cores (exit -1: the CLI was killed), so
  // these calls get 2 minutes. Speed is measured by the benchmarks, not here.
  constexpr auto kBig = std::chrono::seconds(120);
  auto mk = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg",
                 "command=head -c 3670016 /dev/zero > big.bin && head -c 20000000 /dev/zero > "
                 "huge.bin"},
                kBig);
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  auto big =
      Ctl({"invoke", "--node", "edge-01", "--tool", "file.read", "--arg", "path=big.bin"}, kBig);
  EXPECT_EQ(big.exit_code, 0) << big.err.substr(0, 2000);
  EXPECT_NE(big.out.find("\"size\": 3670016"), std::string::npos) << big.out.substr(0, 300);
  // Over the limit: a clear refusal naming it, and the node goes on working.
  auto huge =
      Ctl({"invoke", "--node", "edge-01", "--tool", "file.read", "--arg", "path=huge.bin"}, kBig);
  EXPECT_NE(huge.exit_code, 0);
  EXPECT_NE((huge.out + huge.err).find("RESOURCE_EXHAUSTED"), std::string::npos)
      << huge.out << huge.err;
  EXPECT_NE((huge.out + huge.err).find("offset and length"), std::string::npos)
      << huge.out << huge.err;
  auto next = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo alive"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(next.out.find("alive"), std::string::npos);
  EXPECT_EQ(Node("edge-01").value("state", ""), "healthy");
}

// Bytes `pid` has written (/proc/PID/io wchar), or -1 once it is gone.
int64_t BytesWritten(pid_t pid) {
  const std::string io = ReadText("/proc/" + std::to_string(pid) + "/io");
  const size_t at = io.find("wchar: ");
  return at == std::string::npos ? -1 : std::stoll(io.substr(at + 7));
}

// controller/output_pacer.h end to end: a real controller (its stall limit set) and agent (its
// output cap raised), and an operator CLI running `head -c kBytes /dev/zero` that is stopped
// (SIGSTOP, like a suspended terminal) before the output starts. The controller stops reading
// the node's stream, gRPC's flow control holds the agent's writes and the command blocks on
// its pipe, until the stall limit; then the client lags and output past 32 MiB is dropped for
// it. Before stop 45 the controller read on and queued the whole output.
class PacedStreamTest : public EdgeStreamTest {
 protected:
  // Several times what the buffers on the way held in runs (16-31 MiB: the CLI's and the node's
  // HTTP/2 windows and sockets, the client's 8 MiB queue, the agent's output window), under an
  // output cap raised for it (sandbox.max_output_bytes, 64 MiB by default).
  static constexpr int64_t kBytes = int64_t{128} << 20;
  const std::string head_ = "head -c " + std::to_string(kBytes) + " /dev/zero";

  // `fleet`: `fleet invoke --selector node:edge-01` instead of `invoke --node edge-01`.
  void StartStoppedCli(const std::string& stall_limit, bool fleet = false) {
    ctl_.reset();
    ctl_ = std::make_unique<ControllerFixture>(
        dir_, "ctl", "cluster:\n  output_stall_limit: " + stall_limit + "\n");
    WriteAgentConfig("edge-01");
    ASSERT_NO_FATAL_FAILURE(
        AddSandboxSetting("edge-01", "max_output_bytes", std::to_string(kBytes + (1 << 20))));
    agent_ = &StartAgent("edge-01");
    ASSERT_TRUE(WaitConnected("edge-01", true)) << agent_->Stderr();
    const std::string marker = "edge-it-paced-" + std::to_string(::getpid());
    std::vector<std::string> argv = {ControllerBin(), "--config", ctl_->config_path()};
    if (fleet) {
      argv.insert(argv.end(), {"fleet", "invoke", "--selector", "node:edge-01"});
    } else {
      argv.insert(argv.end(), {"invoke", "--node", "edge-01"});
    }
    argv.insert(argv.end(),
                {"--tool", "exec", "--arg", "command=sleep 2; " + head_ + "; echo end; : " + marker,
                 "--arg", "timeout=5m"});
    cli_ = std::make_unique<ChildProcess>(argv, dir_.path());
    // The command runs (its call is open end to end): the CLI stops before the output starts.
    ASSERT_TRUE(WaitUntil([&] { return ProcessWithMarker(marker); }, 60s)) << cli_->Stderr();
    cli_->Signal(SIGSTOP);
    // The writer: the process whose command line is exactly `head_`.
    auto is_writer = [&](const std::string& cmdline) { return cmdline == head_ + " "; };
    ASSERT_TRUE(WaitUntil([&] { return (writer_ = FindProcess(is_writer)) != 0; }, 60s))
        << "the output never started";
  }
  // Resumes the CLI and waits for its exit code.
  int Resume() {
    cli_->Signal(SIGCONT);
    auto code = cli_->Wait(180s);
    EXPECT_TRUE(code) << "the resumed CLI did not finish";
    return code.value_or(-1);
  }

  ChildProcess* agent_ = nullptr;
  std::unique_ptr<ChildProcess> cli_;
  pid_t writer_ = 0;
};

TEST_F(PacedStreamTest, AStoppedOperatorCliHoldsTheCommandBackAndThenGetsAllOfItsOutput) {
  // The stall limit past the test's hold: the stream waits for the stopped client.
  ASSERT_NO_FATAL_FAILURE(StartStoppedCli("50s"));
  // The writer stops advancing while it still has output to write: held, not finished.
  int64_t held = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const int64_t before = BytesWritten(writer_);
        std::this_thread::sleep_for(1s);
        held = BytesWritten(writer_);
        return held < 0 || held == before;
      },
      60s));
  std::printf("held at %lld of %lld bytes while the CLI was stopped\n",
              static_cast<long long>(held), static_cast<long long>(kBytes));
  ASSERT_GE(held, 0) << "the command wrote all its output to a stopped client: it was queued";
  EXPECT_LT(held, kBytes);
  // Still held past the default stall limit (the stream was waiting before this point): the
  // configured one applies.
  std::this_thread::sleep_for(11s);
  EXPECT_EQ(BytesWritten(writer_), held) << "the node's stream stopped waiting for the client";

  EXPECT_EQ(Resume(), 0) << cli_->Stderr();
  const std::string out = cli_->Stdout();
  ASSERT_EQ(static_cast<int64_t>(out.size()), kBytes + 4) << "output was lost or added";
  EXPECT_EQ(out.find_first_not_of('\0'), static_cast<size_t>(kBytes));
  EXPECT_EQ(out.substr(kBytes), "end\n");
  EXPECT_EQ(cli_->Stderr().find("dropped"), std::string::npos) << cli_->Stderr();
  EXPECT_TRUE(agent_->Running());
  EXPECT_EQ(Node("edge-01").value("state", ""), "healthy");
}

TEST_F(PacedStreamTest, ALaggingCliIsToldOfTheDropsAndExits74ThoughTheCommandSucceeded) {
  // A 1 s stall limit: the node goes on, the stopped client lags and its output past 32 MiB is
  // dropped; the command runs to its end.
  ASSERT_NO_FATAL_FAILURE(StartStoppedCli("1s"));
  ASSERT_TRUE(WaitUntil([&] { return BytesWritten(writer_) < 0; }, 120s))
      << "the node's stream still waits for the stopped client";

  EXPECT_EQ(Resume(), 74) << cli_->Stderr();
  const std::string err = cli_->Stderr();
  EXPECT_NE(err.find("fell behind and some of command"), std::string::npos) << err;
  EXPECT_NE(err.find(" bytes of"), std::string::npos) << "how much was dropped: " << err;
  EXPECT_NE(err.find("edge-controller command get"), std::string::npos) << err;
  const int64_t got = static_cast<int64_t>(cli_->Stdout().size());
  EXPECT_GT(got, 0);
  EXPECT_LT(got, kBytes) << "nothing was dropped";
  // The command itself succeeded, and the node works on.
  auto list = Ctl({"commands", "--node", "edge-01", "--format", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const json cmds = json::parse(list.out);
  ASSERT_EQ(cmds.size(), 1u) << list.out.substr(0, 2000);
  EXPECT_EQ(cmds[0]["result"]["outcome"], "ok") << list.out.substr(0, 2000);
  EXPECT_EQ(cmds[0]["result"]["exit_code"], 0) << list.out.substr(0, 2000);
  auto next = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo alive"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(next.out, "alive\n");
}

TEST_F(PacedStreamTest, ALaggingFleetCliIsToldOfTheDropsAndExits74ThoughEveryPartSucceeded) {
  ASSERT_NO_FATAL_FAILURE(StartStoppedCli("1s", /*fleet=*/true));
  ASSERT_TRUE(WaitUntil([&] { return BytesWritten(writer_) < 0; }, 120s))
      << "the node's stream still waits for the stopped client";

  EXPECT_EQ(Resume(), 74) << cli_->Stderr().substr(0, 4000);
  const std::string err = cli_->Stderr();
  EXPECT_NE(err.find("[edge-01] note: "), std::string::npos) << err.substr(0, 4000);
  EXPECT_NE(err.find("fell behind and some of fleet command"), std::string::npos)
      << err.substr(0, 4000);
  EXPECT_NE(err.find(" bytes of"), std::string::npos) << "how much: " << err.substr(0, 4000);
  EXPECT_NE(cli_->Stdout().find("edge-01"), std::string::npos) << "the per-node table";
}

// The node's output cap (sandbox.max_output_bytes) is the other way output goes missing: the
// command runs on, the rest of its output is dropped on the node. Before stop 47 the CLI
// exited 0 with exactly the cap's worth, and only the stored payload said output_truncated.
class OutputCapTest : public EdgeStreamTest {
 protected:
  static constexpr size_t kCap = size_t{1} << 20;
  void SetUp() override {
    EdgeStreamTest::SetUp();
    WriteAgentConfig("edge-01");
    ASSERT_NO_FATAL_FAILURE(AddSandboxSetting("edge-01", "max_output_bytes", "1MiB"));
    agent_ = &StartAgent("edge-01");
    ASSERT_TRUE(WaitConnected("edge-01", true)) << agent_->Stderr();
  }
  // 3 MiB of zeros, then a line that never arrives.
  const std::string over_ = "command=head -c 3145728 /dev/zero; echo end";
  ChildProcess* agent_ = nullptr;
};

TEST_F(OutputCapTest, InvokeSaysTheCapDroppedTheRestAndExits74) {
  auto r = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", over_}, 60s);
  EXPECT_EQ(r.exit_code, 74) << r.err;
  ASSERT_EQ(r.out.size(), kCap) << "exactly the cap's worth arrives";
  EXPECT_EQ(r.out.find_first_not_of('\0'), std::string::npos);
  EXPECT_NE(r.err.find("note: node edge-01 reached its output cap of 1MiB "
                       "(sandbox.max_output_bytes) and dropped the rest of command "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("wrote more output than the node's output cap and the rest is lost; "
                       "raise that cap on the node"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("fell behind"), std::string::npos) << "not this client's drops: " << r.err;

  // JSON says the output is incomplete, and the stored payload says why.
  auto j = Ctl(
      {"invoke", "--node", "edge-01", "--tool", "exec", "--arg", over_, "--format", "json"}, 60s);
  EXPECT_EQ(j.exit_code, 74) << j.err;
  const json got = json::parse(j.out);
  EXPECT_EQ(got["output_complete"], false);
  EXPECT_EQ(got["stdout"].get<std::string>().size(), kCap);
  EXPECT_EQ(got["result"]["outcome"], "ok");
  EXPECT_EQ(got["result"]["exit_code"], 0);
  EXPECT_EQ(got["result"]["payload"]["output_capped"], true);
  EXPECT_EQ(got["result"]["payload"]["output_cap_bytes"], kCap);
  const json stored = Command(got["command_id"].get<std::string>());
  EXPECT_EQ(stored["result"]["payload"]["output_capped"], true) << stored.dump().substr(0, 500);

  // Exactly the cap is all of the output: exit 0, no note.
  auto at = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg",
                 "command=head -c 1048576 /dev/zero"},
                60s);
  EXPECT_EQ(at.exit_code, 0) << at.err;
  EXPECT_EQ(at.out.size(), kCap);
  EXPECT_EQ(at.err.find("output cap"), std::string::npos) << at.err;
  // A failed command keeps its own exit code, and is still told of the cap.
  auto failed = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg",
                     "command=head -c 3145728 /dev/zero; exit 3"},
                    60s);
  EXPECT_EQ(failed.exit_code, 3) << failed.err;
  EXPECT_NE(failed.err.find("rest is lost"), std::string::npos) << failed.err;
  EXPECT_TRUE(agent_->Running());
}

TEST_F(OutputCapTest, FleetInvokeNamesTheCappedNodeAndExits74) {
  auto r =
      Ctl({"fleet", "invoke", "--selector", "node:edge-01", "--tool", "exec", "--arg", over_}, 60s);
  EXPECT_EQ(r.exit_code, 74) << r.err;
  EXPECT_NE(r.err.find("[edge-01] note: node edge-01 reached its output cap of 1MiB"),
            std::string::npos)
      << r.err.substr(0, 4000);
  EXPECT_NE(r.err.find("on 1 node(s) (edge-01) fleet command "), std::string::npos)
      << r.err.substr(0, 4000);
  auto j = Ctl({"fleet", "invoke", "--selector", "node:edge-01", "--tool", "exec", "--arg", over_,
                "--format", "json"},
               60s);
  EXPECT_EQ(j.exit_code, 74) << j.err;
  const json got = json::parse(j.out);
  EXPECT_EQ(got["output_complete"], false);
  ASSERT_EQ(got["parts"].size(), 1u);
  EXPECT_EQ(got["parts"][0]["output_capped"], true);
  EXPECT_EQ(got["parts"][0]["state"], "ok");
  EXPECT_EQ(got["parts"][0]["stdout"].get<std::string>().size(), kCap);
  // After the stream, `fleet get` still says which part lost output, and to which cap.
  const std::string id = got["fleet_command_id"].get<std::string>();
  auto shown = Ctl({"fleet", "get", id});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("[edge-01] note: node edge-01 reached its output cap of 1MiB "
                           "(sandbox.max_output_bytes) and dropped the rest of command "),
            std::string::npos)
      << shown.out;
  auto shown_json = Ctl({"fleet", "get", id, "--format", "json"});
  ASSERT_EQ(shown_json.exit_code, 0) << shown_json.err;
  const json stored = json::parse(shown_json.out);
  ASSERT_EQ(stored["parts"].size(), 1u);
  EXPECT_EQ(stored["parts"][0]["output_capped"], true);
  EXPECT_NE(stored["parts"][0]["output_cap_note"].get<std::string>().find("1MiB"),
            std::string::npos)
      << stored.dump();
  // Under the cap: every part complete, exit 0.
  auto small = Ctl({"fleet", "invoke", "--selector", "node:edge-01", "--tool", "exec", "--arg",
                    "command=echo fine", "--format", "json"});
  EXPECT_EQ(small.exit_code, 0) << small.err;
  const json ok = json::parse(small.out);
  EXPECT_EQ(ok["output_complete"], true);
  EXPECT_EQ(ok["parts"][0]["output_capped"], false);
  auto plain = Ctl({"fleet", "get", ok["fleet_command_id"].get<std::string>()});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("note:"), std::string::npos) << plain.out;
}

TEST_F(EdgeStreamTest, AToolBoundToAContextRunsUnderItWhateverTheOperatorAsks) {
  if (::geteuid() != 0) GTEST_SKIP() << "run_as 'nobody' needs the agent to run as root";
  EnrollAndStart("edge-01",
                 "tools:\n  whoami:\n    command: [/usr/bin/id, -un]\n"
                 "    security_context: limited\n"
                 "security_contexts:\n  limited:\n    allowed_tools: [whoami, file.read]\n"
                 "    run_as: nobody\n  default:\n    allowed_tools: ['*']\n");
  // Before: --context default ran the tool as root.
  auto r = Ctl({"invoke", "--node", "edge-01", "--tool", "whoami", "--context", "default"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nobody"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("root"), std::string::npos) << r.out;
  // A file tool in a run_as context cannot read what its user cannot (was: /etc/shadow).
  auto mk = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg",
                 "command=echo secret > s && chmod 600 s"});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  auto read = Ctl({"invoke", "--node", "edge-01", "--tool", "file.read", "--context", "limited",
                   "--arg", "path=s"});
  EXPECT_NE(read.exit_code, 0);
  EXPECT_NE((read.out + read.err).find("PERMISSION_DENIED"), std::string::npos)
      << read.out << read.err;
}

TEST_F(EdgeStreamTest, TheAgentVerifiesTheControllersUserTokensAndTheirRoles) {
  const std::string pub = ctl_->data_dir() + "/ca/token.pub.pem";
  ASSERT_TRUE(fs::exists(pub)) << "the controller publishes its token key";
  EnrollAndStart("edge-01",
                 "security:\n  user_token_issuers:\n    edge-controller: " + pub +
                     "\nsecurity_contexts:\n  default:\n    allowed_tools: ['*']\n"
                     "  ops:\n    allowed_tools: ['*']\n    require_roles: [operator]\n"
                     "  admins:\n    allowed_tools: ['*']\n    require_roles: [admin]\n");
  auto ok = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg", "command=echo ok"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  auto ops = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--context", "ops", "--arg",
                  "command=echo ops"});
  EXPECT_EQ(ops.exit_code, 0) << ops.err;
  auto admins = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--context", "admins",
                     "--arg", "command=echo admins"});
  EXPECT_NE(admins.exit_code, 0);
  EXPECT_NE((admins.out + admins.err).find("PERMISSION_DENIED"), std::string::npos)
      << admins.out << admins.err;
  // An agent that trusts another issuer key refuses the controller's tokens.
  auto other = identity::EcSigningKey::Generate();
  ASSERT_TRUE(other);
  const std::string wrong = dir_ / "wrong.pub.pem";
  WriteText(wrong, *other->PublicPem());
  EnrollAndStart("edge-02",
                 "security:\n  user_token_issuers:\n    edge-controller: " + wrong + "\n");
  auto refused =
      Ctl({"invoke", "--node", "edge-02", "--tool", "exec", "--arg", "command=echo never"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE((refused.out + refused.err).find("UNAUTHENTICATED"), std::string::npos)
      << refused.out << refused.err;
}

TEST_F(EdgeStreamTest, TheCallersUmaskNeverLeaksIntoWhatTheAgentCreates) {
  const mode_t old = ::umask(0);  // the agent inherits it
  WriteAgentConfig("edge-01");
  StartAgent("edge-01");
  ::umask(old);
  ASSERT_TRUE(WaitConnected("edge-01", true));
  auto mk = Ctl({"invoke", "--node", "edge-01", "--tool", "exec", "--arg",
                 "command=touch made && mkdir dir && stat -c '%a' made dir"});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  EXPECT_NE(mk.out.find("640\n750"), std::string::npos) << mk.out;
  struct stat st {};
  ASSERT_EQ(::stat((DataDir("edge-01") + "/sandboxes/_default/root").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0022, 0u) << std::oct << (st.st_mode & 07777);
}

TEST_F(EdgeStreamTest, ConfigCheckProductionFailsOnImplicitAllowAllAndUnverifiedUsers) {
  const std::string lax = dir_ / "lax.yaml", strict = dir_ / "strict.yaml";
  const std::string key = dir_ / "issuer.pub.pem";
  auto k = identity::EcSigningKey::Generate();
  ASSERT_TRUE(k);
  WriteText(key, *k->PublicPem());
  WriteText(lax, "node_id: n1\ndata_dir: " + (dir_ / "d1") + "\n");
  WriteText(strict, "node_id: n1\ndata_dir: " + (dir_ / "d1") +
                        "\nsecurity:\n  user_token_issuers:\n    edge-controller: " + key +
                        "\nsecurity_contexts:\n  default:\n    allowed_tools: [sysinfo]\n");
  auto plain = RunCommand({AgentBin(), "--config", lax, "config", "check"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  auto prod = RunCommand({AgentBin(), "--config", lax, "config", "check", "--production"});
  EXPECT_EQ(prod.exit_code, 2);
  EXPECT_NE(prod.err.find("security_contexts"), std::string::npos) << prod.err;
  EXPECT_NE(prod.err.find("security.user_token_issuers"), std::string::npos) << prod.err;
  auto ok = RunCommand({AgentBin(), "--config", strict, "config", "check", "--production"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

}  // namespace
}  // namespace edge::testing
