// The compute member door through the real binaries (issue 11): edge-controller plays the
// workflow engine (CloudEventsService.startStreaming on its gRPC port, TLS), edge-agent joins
// as a compute member with a token from `edge-controller compute token create`, and
// `edge-controller compute dispatch` sends processor and criteria calls that run local tools.
// A hand-driven client (the test) checks what the controller refuses. Ports are picked at run
// time; everything stays on loopback and in a temp dir.
#include <signal.h>

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <future>
#include <thread>

#include "cyoda/cyoda-cloud-api.grpc.pb.h"
#include "tests/integration/controller_fixture.h"

namespace edge::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace ce = io::cloudevents::v1;
namespace cyoda = org::cyoda::cloud::api::grpc;

// Exit codes of `compute dispatch` (controller/cli/compute_commands.h).
constexpr int kSuccessFalse = 1;
constexpr int kNoMember = 3;
constexpr int kDisconnected = 4;
constexpr int kTimeout = 5;

// Tools, as argv templates ({{ }} are literal braces). Each reads the request on stdin.
constexpr const char* kTools = R"(tools:
  approve:
    command: ["sh", "-c", "in=$(cat); case \"$in\" in *'\"year\":\"2025\"'*) y=2025;; *) y=none;; esac; printf '{{\"year\":\"%s\",\"approved\":true,\"by\":\"%s\",\"kind\":\"%s\"}}' \"$y\" \"$EDGE_COMPUTE_AUTHID\" \"$EDGE_COMPUTE_KIND\""]
  keep:
    command: ["sh", "-c", "cat >/dev/null"]
  is-big:
    command: ["sh", "-c", "grep -q '\"size\":\"big\"'"]
  says-no:
    command: ["sh", "-c", "cat >/dev/null; printf '{{\"matches\":false,\"reason\":\"json says no\"}}'"]
  fails:
    command: ["sh", "-c", "cat >/dev/null; echo broken >&2; exit 3"]
  chatty:
    command: ["sh", "-c", "cat >/dev/null; echo not json"]
  slow:
    command: ["sh", "-c", "cat >/dev/null; sleep 30"]
)";

constexpr const char* kHandlers = R"(  processors:
    approve: { tool: approve, timeout: 20s }
    keep: { tool: keep }
    fails: { tool: fails }
    chatty: { tool: chatty }
    slow: { tool: slow, timeout: 40s }
    short: { tool: slow, timeout: 300ms }
  criteria:
    is-big: { tool: is-big }
    says-no: { tool: says-no }
)";

class ComputeTest : public ::testing::Test {
 protected:
  void SetUp() override { StartController(); }
  void TearDown() override {
    // A clean stop ends the tools the agent still runs (their process groups).
    if (agent_ && agent_->Running()) {
      agent_->Signal(SIGTERM);
      agent_->Wait(20s);
    }
    agent_.reset();
    ctl_.reset();
  }

  void StartController(const std::string& compute_yaml = "") {
    ctl_ = std::make_unique<ControllerFixture>(
        dir_, "ctl", "compute:\n  dispatch_timeout: 30s\n" + compute_yaml);
  }

  std::string Token(const std::string& tenant = "acme", const std::string& role = "ROLE_M2M") {
    auto r = ctl_->Cli(
        {"compute", "token", "create", "--tenant", tenant, "--role", role, "--ttl", "1h"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string t = r.out;
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())))
      t.pop_back();
    return t;
  }

  // Writes the member's config and starts `edge-agent run` (not enrolled: no edge stream).
  // `tls`: the compute.tls map (default: TLS trusting the controller's CA); `preamble`: more
  // top-level keys.
  void StartAgent(const std::string& extra = "", int max_calls = 4, std::string tls = "",
                  const std::string& preamble = "") {
    if (tls.empty()) tls = "{ mode: tls, ca_file: " + ctl_->data_dir() + "/ca/ca.crt }";
    WriteText(dir_ / "compute.token", Token() + "\n");
    WriteText(dir_ / "agent.yaml",
              "node_id: member-01\ndata_dir: " + (dir_ / "agent") +
                  "\nedge:\n  enabled: false\nsandbox:\n  kill_grace: 500ms\nlog:\n  level: "
                  "debug\n" +
                  preamble + kTools + "compute:\n  enabled: true\n  address: " + ctl_->advertise() +
                  "\n  tls: " + tls + "\n  token_file: " + (dir_ / "compute.token") +
                  "\n  tags: [approval, fast]\n  legal_entity_id: acme\n"
                  "  max_concurrent_calls: " +
                  std::to_string(max_calls) + "\n" + kHandlers + extra);
    agent_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{AgentBin(), "--config", dir_ / "agent.yaml", "run"}, dir_.path());
  }

  json Members() {
    auto r = ctl_->Cli({"compute", "members", "--format", "json"});
    if (r.exit_code != 0) return json::array();
    return json::parse(r.out)["members"];
  }
  // Waits until exactly one member is joined (other than `not_id`); returns its id.
  std::string WaitMember(const std::string& not_id = "", std::chrono::seconds t = 60s) {
    std::string id;
    WaitUntil(
        [&] {
          json m = Members();
          if (m.size() != 1 || m[0]["member_id"] == not_id) return false;
          id = m[0]["member_id"];
          return true;
        },
        t);
    return id;
  }
  json AgentStatus() {
    auto r =
        RunCommand({AgentBin(), "--config", dir_ / "agent.yaml", "status", "--format", "json"});
    return json::parse(r.out, nullptr, false);
  }
  std::map<std::string, std::string> ComputeDetails() {
    json s = AgentStatus();
    if (!s.is_object()) return {};
    for (const auto& svc : s["services"]) {
      if (svc["name"] == "compute") return svc["details"].get<std::map<std::string, std::string>>();
    }
    return {};
  }

  CommandResult Dispatch(std::vector<std::string> args, const json& entity = json::object()) {
    WriteText(dir_ / "entity.json", entity.dump());
    std::vector<std::string> all = {"compute",  "dispatch", "--entity", dir_ / "entity.json",
                                    "--tenant", "acme",     "--format", "json"};
    all.insert(all.end(), args.begin(), args.end());
    return ctl_->Cli(all);
  }
  static json Out(const CommandResult& r) { return json::parse(r.out, nullptr, false); }

  // A hand-driven startStreaming call to the controller.
  struct RawStream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<ce::CloudEvent, ce::CloudEvent>> rw;
  };
  std::unique_ptr<RawStream> Open(const std::string& bearer) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadText(ctl_->data_dir() + "/ca/ca.crt");
    channel_ = grpc::CreateChannel(ctl_->advertise(), grpc::SslCredentials(o));
    stub_ = cyoda::CloudEventsService::NewStub(channel_);
    auto s = std::make_unique<RawStream>();
    if (!bearer.empty()) s->ctx.AddMetadata("authorization", "Bearer " + bearer);
    s->ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    s->rw = stub_->startStreaming(&s->ctx);
    return s;
  }
  static ce::CloudEvent Event(const std::string& type, const json& body) {
    ce::CloudEvent ev;
    ev.set_id(body.value("id", "e-1"));
    ev.set_source("client");
    ev.set_spec_version("1.0");
    ev.set_type(type);
    ev.set_text_data(body.dump());
    return ev;
  }
  // Sends `first`, reads until the end, returns the final status.
  static grpc::Status SendAndFinish(RawStream& s, const ce::CloudEvent& first,
                                    std::vector<ce::CloudEvent>* got = nullptr) {
    s.rw->Write(first);
    ce::CloudEvent in;
    while (s.rw->Read(&in)) {
      if (got) got->push_back(in);
      if (in.type() == "CalculationMemberGreetEvent") s.rw->WritesDone();
    }
    return s.rw->Finish();
  }

  TempDir dir_;
  std::unique_ptr<ControllerFixture> ctl_;
  std::unique_ptr<ChildProcess> agent_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cyoda::CloudEventsService::Stub> stub_;
};

TEST_F(ComputeTest, JoinGreetAndAProcessorThatRewritesTheEntity) {
  StartAgent();
  const std::string id = WaitMember();
  ASSERT_FALSE(id.empty()) << agent_->Stderr();
  json m = Members()[0];
  EXPECT_EQ(m["tenant"], "acme");
  EXPECT_EQ(m["tags"], json::parse(R"(["approval","fast"])"));
  // The agent's status shows the same member.
  ASSERT_TRUE(WaitUntil([&] { return ComputeDetails()["member_id"] == id; }, 20s))
      << AgentStatus().dump();
  EXPECT_EQ(ComputeDetails()["state"], "joined");

  auto r = Dispatch({"--tags", "approval", "--processor", "approve"},
                    json{{"year", "2025"}, {"category", "physics"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << agent_->Stderr();
  json out = Out(r);
  EXPECT_EQ(out["member_id"], id);
  EXPECT_EQ(out["response"]["success"], true);
  EXPECT_EQ(out["response"]["payload"]["type"], "JSON");
  EXPECT_EQ(out["response"]["payload"]["data"],
            json::parse(R"({"year":"2025","approved":true,"by":"operator","kind":"processor"})"));
  EXPECT_EQ(out["response"]["requestId"], out["request_id"]);

  // Empty output leaves the entity unchanged.
  auto same = Dispatch({"--processor", "keep"}, json{{"k", 1}});
  ASSERT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_EQ(Out(same)["response"]["payload"]["data"], json({{"k", 1}}));
}

// An enrolled node joins over mTLS with its keystore (certs/ca.pem as the trust anchor).
TEST_F(ComputeTest, AnEnrolledNodeJoinsOverMtls) {
  auto [token_id, join_token] = ctl_->CreateToken("member-01");
  StartAgent("", 4, "{ mode: mtls }", "controller:\n  join_token: \"" + join_token + "\"\n");
  ASSERT_FALSE(WaitMember().empty()) << agent_->Stderr();
  auto r = Dispatch({"--processor", "keep"}, json{{"k", 3}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Out(r)["response"]["payload"]["data"], json({{"k", 3}}));
}

TEST_F(ComputeTest, CriteriaByExitCodeAndByJson) {
  StartAgent();
  ASSERT_FALSE(WaitMember().empty()) << agent_->Stderr();
  auto yes = Dispatch({"--criteria", "is-big"}, json{{"size", "big"}});
  ASSERT_EQ(yes.exit_code, 0) << yes.out << yes.err;
  EXPECT_EQ(Out(yes)["response"]["matches"], true);
  auto no = Dispatch({"--criteria", "is-big"}, json{{"size", "small"}});
  ASSERT_EQ(no.exit_code, 0) << no.out << no.err;
  EXPECT_EQ(Out(no)["response"]["matches"], false);
  auto by_json = Dispatch({"--criteria", "says-no"});
  ASSERT_EQ(by_json.exit_code, 0) << by_json.out << by_json.err;
  EXPECT_EQ(Out(by_json)["response"]["matches"], false);
  EXPECT_EQ(Out(by_json)["response"]["reason"], "json says no");
}

TEST_F(ComputeTest, FailuresAreAnsweredSuccessFalse) {
  StartAgent();
  ASSERT_FALSE(WaitMember().empty()) << agent_->Stderr();
  auto failed = Dispatch({"--processor", "fails"});
  EXPECT_EQ(failed.exit_code, kSuccessFalse) << failed.out << failed.err;
  EXPECT_EQ(Out(failed)["response"]["success"], false);
  EXPECT_EQ(Out(failed)["response"]["error"]["code"], "TOOL_FAILED");
  EXPECT_NE(Out(failed)["response"]["error"]["message"].get<std::string>().find("broken"),
            std::string::npos);
  auto chatty = Dispatch({"--processor", "chatty"});
  EXPECT_EQ(chatty.exit_code, kSuccessFalse);
  EXPECT_EQ(Out(chatty)["response"]["error"]["code"], "INVALID_OUTPUT");
  auto timed = Dispatch({"--processor", "short"});
  EXPECT_EQ(timed.exit_code, kSuccessFalse) << timed.out << timed.err;
  EXPECT_EQ(Out(timed)["response"]["error"]["code"], "TIMED_OUT");
  EXPECT_EQ(Out(timed)["response"]["error"]["retryable"], true);
  auto unknown = Dispatch({"--processor", "nope"});
  EXPECT_EQ(unknown.exit_code, kSuccessFalse);
  EXPECT_EQ(Out(unknown)["response"]["error"]["code"], "NOT_FOUND");
  // Dispatch errors of the engine side, each its own exit code.
  auto no_member = Dispatch({"--tags", "nobody-has-this", "--processor", "keep"});
  EXPECT_EQ(no_member.exit_code, kNoMember) << no_member.out << no_member.err;
  EXPECT_EQ(Out(no_member)["error"]["code"], "NO_COMPUTE_MEMBER_FOR_TAG");
  auto timeout = Dispatch({"--processor", "slow", "--timeout", "500ms"});
  EXPECT_EQ(timeout.exit_code, kTimeout) << timeout.out << timeout.err;
  EXPECT_EQ(Out(timeout)["error"]["code"], "DISPATCH_TIMEOUT");
}

TEST_F(ComputeTest, OverTheConcurrencyCapTheCallIsRetryable) {
  StartAgent("", 1);
  ASSERT_FALSE(WaitMember().empty()) << agent_->Stderr();
  auto first = std::async(std::launch::async, [&] {
    return ctl_->Cli({"compute", "dispatch", "--tenant", "acme", "--processor", "slow", "--timeout",
                      "3s", "--format", "json"});
  });
  ASSERT_TRUE(WaitUntil(
      [&] {
        json m = Members();
        return m.size() == 1 && m[0]["calls_in_flight"] == 1;
      },
      30s));
  auto second = Dispatch({"--processor", "keep"});
  EXPECT_EQ(second.exit_code, kSuccessFalse) << second.out << second.err;
  EXPECT_EQ(Out(second)["response"]["error"]["code"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(Out(second)["response"]["error"]["retryable"], true);
  EXPECT_EQ(first.get().exit_code, kTimeout);
}

TEST_F(ComputeTest, KeepAliveHoldsTheMemberAndASilentOneIsEnded) {
  ctl_.reset();
  StartController("  keepalive_interval: 200ms\n  keepalive_timeout: 1500ms\n");
  StartAgent();
  const std::string id = WaitMember();
  ASSERT_FALSE(id.empty()) << agent_->Stderr();
  // Held beyond several timeouts by its acks of the server's keep-alives (its own keep-alive
  // comes only every 10 s): for 5 s the member never changes.
  const bool changed = WaitUntil(
      [&] {
        json m = Members();
        return m.size() != 1 || m[0]["member_id"] != id;
      },
      5s);
  EXPECT_FALSE(changed) << Members().dump();
  // A member that stops answering (stopped process) is ended by the server...
  agent_->Signal(SIGSTOP);
  EXPECT_TRUE(WaitUntil([&] { return Members().empty(); }, 20s));
  // ...and joins again as a new member once it runs again.
  agent_->Signal(SIGCONT);
  EXPECT_FALSE(WaitMember(id).empty()) << agent_->Stderr();
}

TEST_F(ComputeTest, ControllerRestartTheMemberRejoins) {
  StartAgent();
  const std::string id = WaitMember();
  ASSERT_FALSE(id.empty()) << agent_->Stderr();
  ctl_->Kill();
  ctl_->Restart();
  const std::string again = WaitMember(id, 90s);
  EXPECT_FALSE(again.empty()) << agent_->Stderr();
  auto r = Dispatch({"--processor", "keep"}, json{{"k", 2}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(ComputeTest, MemberDisconnectsMidCall) {
  StartAgent();
  ASSERT_FALSE(WaitMember().empty()) << agent_->Stderr();
  auto call = std::async(std::launch::async, [&] {
    return ctl_->Cli(
        {"compute", "dispatch", "--tenant", "acme", "--processor", "slow", "--format", "json"});
  });
  ASSERT_TRUE(WaitUntil(
      [&] {
        json m = Members();
        return m.size() == 1 && m[0]["calls_in_flight"] == 1;
      },
      30s));
  agent_->Signal(SIGKILL);
  auto r = call.get();
  EXPECT_EQ(r.exit_code, kDisconnected) << r.out << r.err;
  EXPECT_EQ(Out(r)["error"]["code"], "COMPUTE_MEMBER_DISCONNECTED");
}

TEST_F(ComputeTest, AuthFailuresGetTheContractsStatusCodes) {
  const std::string good = Token();
  // No token.
  {
    auto s = Open("");
    auto st = SendAndFinish(*s, Event("CalculationMemberJoinEvent", {{"id", "j"}, {"tags", {}}}));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  }
  // A token that is not the controller's.
  {
    auto s = Open("eyJhbGciOiJFUzI1NiJ9.e30.AAAA");
    auto st = SendAndFinish(*s, Event("CalculationMemberJoinEvent", {{"id", "j"}}));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // A token without ROLE_M2M.
  {
    auto s = Open(Token("acme", "ROLE_USER"));
    auto st = SendAndFinish(*s, Event("CalculationMemberJoinEvent", {{"id", "j"}}));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  }
  // Another tenant's legal entity.
  {
    auto s = Open(good);
    auto st =
        SendAndFinish(*s, Event("CalculationMemberJoinEvent",
                                {{"id", "j"}, {"tags", {"x"}}, {"joinedLegalEntityId", "globex"}}));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  }
  // First message not a join; a malformed join.
  {
    auto s = Open(good);
    auto st = SendAndFinish(*s, Event("CalculationMemberKeepAliveEvent", {{"id", "k"}}));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  }
  {
    auto s = Open(good);
    auto st = SendAndFinish(*s, Event("CalculationMemberJoinEvent", {{"id", "j"}, {"tags", "x"}}));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  }
  // The good token joins and is greeted with a member id and the token's tenant.
  {
    auto s = Open(good);
    std::vector<ce::CloudEvent> got;
    auto st = SendAndFinish(
        *s,
        Event("CalculationMemberJoinEvent",
              {{"id", "j"}, {"tags", {"x"}}, {"joinedLegalEntityId", "acme"}, {"success", true}}),
        &got);
    ASSERT_FALSE(got.empty()) << st.error_message();
    EXPECT_EQ(got[0].type(), "CalculationMemberGreetEvent");
    json greet = json::parse(got[0].text_data());
    EXPECT_EQ(greet["joinedLegalEntityId"], "acme");
    EXPECT_EQ(greet["success"], true);
    EXPECT_FALSE(greet["memberId"].get<std::string>().empty());
  }
}

}  // namespace
}  // namespace edge::testing
