// The controller as the workers' control plane (issue 10), through the real binaries on
// loopback: `edge-controller serve` with http.listen and `edge-agent --listen` heartbeating to
// it. Every worker method through `edge-controller worker call` / `sandbox …`; the lease's
// generation rising across acquire, the worker's own renew_lease (through the controller) and
// destroy; draining and stale workers in `edge-controller workers`; every auth failure of the
// control-plane endpoints (signed tokens made here with `openssl dgst -sha256 -hmac`); lease
// renewals refused for each rule; bad bodies.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "http/client.h"
#include "tests/integration/controller_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/worker_tokens.h"

namespace edge::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kWorker = "worker-a";
constexpr const char* kKey = "control-plane-key-ffffffffffff";
constexpr const char* kShared = "shared-cp-token-gggggggggggg";
constexpr const char* kPerWorker = "per-worker-cp-token-hhhhhhhh";
constexpr const char* kAud = "worker:control-plane";

class WorkerControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override { StartController("http: {listen: 127.0.0.1:0}\n"); }
  void StartController(const std::string& http_yaml) {
    WriteText(dir_ / "cp.key", std::string(kKey) + "\n");
    ctl_ = std::make_unique<ControllerFixture>(
        dir_, "ctl",
        http_yaml +
            "worker:\n"
            "  heartbeat_interval: 1s\n"
            "  lease_ttl: 2m\n"
            "  auth:\n"
            "    worker_signing_key_file: " +
            dir_.path() + "/cp.key\n" + "    worker_token: " + kShared + "\n" +
            "    worker_tokens: {worker-p: " + kPerWorker + "}\n" +
            "    worker_revoked_token_ids: [revoked-jti]\n");
    http_port_ = ctl_->WaitForHttpPort();
    ASSERT_NE(http_port_, 0) << ctl_->process().Stderr();
  }
  void TearDown() override {
    if (agent_ && agent_->Running()) {
      agent_->Signal(SIGTERM);
      EXPECT_TRUE(agent_->Wait(30s).has_value());
    }
    if (HasFailure()) {
      if (agent_) std::cerr << "agent stderr:\n" << agent_->Stderr() << "\n";
      std::cerr << "controller stderr:\n" << ctl_->process().Stderr() << "\n";
    }
  }

  // `edge-agent --listen` heartbeating every second to the controller, with the same signing
  // key (it mints its aud=worker:control-plane tokens, and verifies the controller's
  // aud=worker:rpc ones, with it).
  void StartAgent(const std::string& scheme = "http", const std::string& extra = "") {
    WriteText(dir_ / "agent.yaml",
              "node_id: " + std::string(kWorker) + "\ndata_dir: " + dir_.path() +
                  "/agent\nedge: {enabled: false}\nsandbox: {kill_grace: 1s}\nworker:\n"
                  "  heartbeat_interval: 1s\n  control_plane_url: " +
                  scheme + "://127.0.0.1:" + std::to_string(http_port_) +
                  "\n  auth: {worker_signing_key_file: " + dir_.path() + "/cp.key}\n" + extra);
    agent_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{AgentBin(), "--listen", "127.0.0.1:0", "--config",
                                 dir_ / "agent.yaml"},
        dir_.path());
    ASSERT_TRUE(WaitUntil([&] { return WorkerState(kWorker) == "online"; }, 60s))
        << ctl_->Cli({"workers"}).out;
  }

  json Workers() {
    auto r = ctl_->Cli({"workers", "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }
  std::string WorkerState(const std::string& id) {
    json w = Workers();
    if (!w.is_object()) return "";
    for (const auto& x : w["workers"])
      if (x["worker_id"] == id) return x["state"];
    return "";
  }
  // `worker call`; the answer envelope parsed from stdout.
  std::pair<CommandResult, json> Call(const std::string& method, const json& params,
                                      std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"worker",   "call", "--worker", kWorker,
                                     "--method", method, "--params", params.dump()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = ctl_->Cli(args);
    return {r, json::parse(r.out, nullptr, false)};
  }

  // POST to the controller's HTTP endpoints.
  http::Response Post(const std::string& target, const std::string& body, http::Headers headers) {
    auto c = http::Client::Connect("127.0.0.1", http_port_, {.timeout = 30s});
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
    if (!c) return {.status = 0};
    auto r = (*c)->Send({.method = "POST", .target = target, .headers = headers, .body = body});
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : http::Response{.status = 0};
  }
  static http::Headers As(const std::string& id, const std::string& token) {
    return {{"X-Worker-ID", id}, {"X-Worker-Token", token}, {"X-Request-ID", "req-42"}};
  }
  std::string Signed(const std::string& worker = kWorker) {
    return OpensslWorkerToken(WorkerClaims(worker, kAud), kKey);
  }

  TempDir dir_;
  std::unique_ptr<ControllerFixture> ctl_;
  std::unique_ptr<ChildProcess> agent_;
  uint16_t http_port_ = 0;
};

TEST_F(WorkerControlPlaneTest, EveryMethodThroughWorkerCallWithTheLeaseAcrossItsLife) {
  StartAgent();
  json w = Workers()["workers"][0];
  EXPECT_EQ(w["worker_id"], kWorker);
  EXPECT_EQ(w["reported_status"], "online");
  EXPECT_NE(w["rpc_url"].get<std::string>().find("http://127.0.0.1:"), std::string::npos);
  EXPECT_EQ(w["providers"], json::array({"local"}));
  EXPECT_GE(w["capacity"]["max_sandboxes"].get<int>(), 1);

  // spawn under a lease the controller acquires for the worker: generation 1.
  auto spawn = ctl_->Cli({"sandbox", "spawn", "--worker", kWorker, "--sandbox", "sb-1"});
  ASSERT_EQ(spawn.exit_code, 0) << spawn.err;
  EXPECT_NE(spawn.err.find("generation 1 "), std::string::npos) << spawn.err;
  EXPECT_EQ(json::parse(spawn.out)["result"]["state"], "running");

  // exec: the command's output and exit code are the CLI's own.
  auto exec = ctl_->Cli({"sandbox", "exec", "--worker", kWorker, "--sandbox", "sb-1", "--",
                         "/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  EXPECT_EQ(exec.exit_code, 7);
  EXPECT_EQ(exec.out, "out\n");
  EXPECT_NE(exec.err.find("err\n"), std::string::npos);

  // Every other method by name through `worker call`.
  const json sb = {{"sandbox_id", "sb-1"}};
  auto with = [&](json extra) {
    json p = sb;
    p.update(extra);
    return p;
  };
  struct Case {
    const char* method;
    json params;
    std::function<void(const json& result)> check;
  };
  std::vector<Case> cases = {
      {"status", sb, [](const json& r) { EXPECT_EQ(r["state"], "running"); }},
      {"exec", with({{"command", "echo"}, {"args", {"a b"}}, {"mode", "argv"}}),
       [](const json& r) {
         EXPECT_EQ(r["stdout"], "a b\n");
         EXPECT_EQ(r["exit_code"], 0);
       }},
      {"exec_stream", with({{"command", "printf x"}, {"mode", "shell"}}),
       [](const json& r) { EXPECT_EQ(r["chunks"][0]["data"], "x"); }},
      {"file_write", with({{"path", "d/a.txt"}, {"content", "aGk="}, {"mode", "0640"}}),
       [](const json&) {}},
      {"file_read", with({{"path", "d/a.txt"}}),
       [](const json& r) { EXPECT_EQ(r["content"], "aGk="); }},
      {"file_stat", with({{"path", "d/a.txt"}}),
       [](const json& r) { EXPECT_EQ(r["file"]["mode"], "0640"); }},
      {"file_chmod", with({{"path", "d/a.txt"}, {"mode", "0600"}}), [](const json&) {}},
      {"file_list", with({{"path", "d"}}), [](const json& r) { EXPECT_EQ(r["files"].size(), 1u); }},
      {"file_move", with({{"old_path", "d/a.txt"}, {"new_path", "d/b.txt"}}), [](const json&) {}},
      {"file_glob", with({{"pattern", "d/*.txt"}}),
       [](const json& r) { EXPECT_EQ(r["matches"], json::array({"d/b.txt"})); }},
      {"file_delete", with({{"path", "d/b.txt"}}), [](const json&) {}},
      {"logs", with({{"lines", 10}}), [](const json& r) { EXPECT_TRUE(r["lines"].is_array()); }},
  };
  for (const auto& c : cases) {
    auto [r, answer] = Call(c.method, c.params);
    EXPECT_EQ(r.exit_code, 0) << c.method << ": " << r.err << r.out;
    ASSERT_TRUE(answer.is_object()) << c.method << ": " << r.out;
    EXPECT_FALSE(answer.contains("error")) << c.method << ": " << answer.dump();
    EXPECT_EQ(answer["worker_id"], kWorker);
    c.check(answer["result"]);
  }

  // NDJSON, live: one full response per line, the last one says done.
  auto stream =
      ctl_->Cli({"worker", "call", "--worker", kWorker, "--method", "exec_stream", "--stream",
                 "--params", with({{"command", "echo 1; echo 2"}, {"mode", "shell"}}).dump()});
  ASSERT_EQ(stream.exit_code, 0) << stream.err;
  std::vector<json> lines;
  std::istringstream in(stream.out);
  for (std::string line; std::getline(in, line);)
    lines.push_back(json::parse(line));
  ASSERT_GE(lines.size(), 2u) << stream.out;
  std::string data;
  for (size_t i = 0; i + 1 < lines.size(); ++i)
    data += lines[i]["result"]["data"].get<std::string>();
  EXPECT_EQ(data, "1\n2\n");
  EXPECT_EQ(lines.back()["result"]["done"], true);

  // The worker's own renew_lease goes to the controller: the controller acquired generation 2
  // for this call, the worker renews it to 3.
  auto [renew, renewed] =
      Call("renew_lease", {{"resource_id", "sb-1"}, {"ttl", "10m"}}, {"--lease", "sb-1"});
  ASSERT_EQ(renew.exit_code, 0) << renew.err << renew.out;
  EXPECT_EQ(renewed["result"]["lease"]["generation"], 3) << renewed.dump();
  EXPECT_EQ(renewed["result"]["lease"]["holder_id"], kWorker);

  // destroy under the lease (generation 4), then the lease is released.
  auto destroy = ctl_->Cli({"sandbox", "destroy", "--worker", kWorker, "--sandbox", "sb-1"});
  ASSERT_EQ(destroy.exit_code, 0) << destroy.err;
  EXPECT_NE(destroy.err.find("generation 4 "), std::string::npos) << destroy.err;
  EXPECT_NE(destroy.err.find("released"), std::string::npos);

  // A worker error is exit 1 with the worker's message.
  auto [gone, gone_answer] = Call("status", {{"sandbox_id", "sb-never"}});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("404"), std::string::npos) << gone.err;
  EXPECT_EQ(json::parse(ctl_->Cli({"worker", "call", "--worker", kWorker, "--method", "status",
                                   "--params", sb.dump()})
                            .out)["result"]["state"],
            "destroyed");

  // Drain: the next heartbeats say so; after the worker stops, two missed intervals → stale.
  auto [drain, drained] = Call("shutdown", json::object());
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_TRUE(WaitUntil([&] { return WorkerState(kWorker) == "draining"; }, 30s));
  agent_->Signal(SIGKILL);
  agent_->Wait(30s);
  EXPECT_TRUE(WaitUntil([&] { return WorkerState(kWorker) == "stale"; }, 30s));
  // An unreachable worker is exit 69.
  auto [down, down_answer] = Call("status", sb);
  EXPECT_EQ(down.exit_code, 69) << down.err;
}

TEST_F(WorkerControlPlaneTest, LeaseHeldByAnotherWorkerIsRefusedBeforeAnyCall) {
  // worker-b heartbeats by hand (a shared token) and the operator leases sb-x to it...
  auto hb = Post("/api/v1/worker/worker-b/heartbeat",
                 json{{"hostname", "b"}, {"capacity", {{"rpc_url", "http://127.0.0.1:9"}}}}.dump(),
                 As("worker-b", kShared));
  ASSERT_EQ(hb.status, 200u) << hb.body;
  auto lease_b = ctl_->Cli({"worker", "call", "--worker", "worker-b", "--method", "status",
                            "--lease", "sb-x", "--timeout", "2s"});
  EXPECT_EQ(lease_b.exit_code, 69) << lease_b.err;  // nobody listens at :9, but it is leased
  // ...so worker-a cannot get it.
  StartAgent();
  auto r = ctl_->Cli({"sandbox", "spawn", "--worker", kWorker, "--sandbox", "sb-x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("held by worker-b"), std::string::npos) << r.err;
  // Unknown workers and bad ids are refused by the controller.
  auto unknown = ctl_->Cli({"worker", "call", "--worker", "nope", "--method", "status"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("never sent a heartbeat"), std::string::npos);
  auto bad = ctl_->Cli({"worker", "call", "--worker", "w/../x", "--method", "status"});
  EXPECT_EQ(bad.exit_code, 2);
  auto params =
      ctl_->Cli({"worker", "call", "--worker", kWorker, "--method", "status", "--params", "[1]"});
  EXPECT_EQ(params.exit_code, 2);
  EXPECT_NE(params.err.find("--params must be a JSON object"), std::string::npos);
}

TEST_F(WorkerControlPlaneTest, EveryAuthFailureIs401NamingTheRuleAndNeverTheToken) {
  const std::string target = "/api/v1/worker/worker-a/heartbeat";
  const std::string body = R"({"hostname":"a","status":"online"})";
  auto expect401 = [&](const http::Headers& h, const std::string& rule, const std::string& tok) {
    auto r = Post(target, body, h);
    EXPECT_EQ(r.status, 401u) << rule << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.value("code", ""), "UNAUTHORIZED") << r.body;
    EXPECT_NE(r.body.find(rule), std::string::npos) << rule << ": " << r.body;
    if (!tok.empty()) {
      EXPECT_EQ(r.body.find(tok), std::string::npos) << "token echoed";
    }
    EXPECT_EQ(std::string(http::FindHeader(r.headers, "X-Request-ID").value_or("")), "req-42");
  };
  expect401({{"X-Worker-Token", kShared}, {"X-Request-ID", "req-42"}}, "missing X-Worker-ID",
            kShared);
  expect401({{"X-Worker-ID", kWorker}, {"X-Request-ID", "req-42"}}, "missing worker token", "");
  expect401(As(kWorker, "wrong-token-value-iiiiiiii"), "does not match auth.worker_token",
            "wrong-token-value-iiiiiiii");
  auto c = WorkerClaims(kWorker, kAud);
  c["exp"] = NowSecs() - 5;
  c["iat"] = NowSecs() - 100;
  std::string t = OpensslWorkerToken(c, kKey);
  expect401(As(kWorker, t), "expired", t);
  c = WorkerClaims(kWorker, kAud);
  c["nbf"] = NowSecs() + 120;
  t = OpensslWorkerToken(c, kKey);
  expect401(As(kWorker, t), "not valid before", t);
  c = WorkerClaims(kWorker, kAud);
  c["exp"] = NowSecs() + 16 * 60;
  t = OpensslWorkerToken(c, kKey);
  expect401(As(kWorker, t), "lifetime", t);
  t = OpensslWorkerToken(WorkerClaims(kWorker, "worker:rpc"), kKey);
  expect401(As(kWorker, t), "audience", t);
  c = WorkerClaims(kWorker, kAud);
  c["jti"] = "revoked-jti";
  t = OpensslWorkerToken(c, kKey);
  expect401(As(kWorker, t), "revoked", t);
  // A token for worker-b presented as worker-a.
  t = Signed("worker-b");
  expect401(As(kWorker, t), "worker", t);
  t = OpensslWorkerToken(WorkerClaims(kWorker, kAud), "another-key-jjjjjjjjjjjj");
  expect401(As(kWorker, t), "signature", t);
  std::string tampered = Signed();
  tampered[tampered.size() - 3] = tampered[tampered.size() - 3] == 'A' ? 'B' : 'A';
  expect401(As(kWorker, tampered), "signature", tampered);
  // worker-p has a per-worker token: the shared one is refused for it.
  auto r = Post("/api/v1/worker/worker-p/heartbeat", body, As("worker-p", kShared));
  EXPECT_EQ(r.status, 401u);
  EXPECT_NE(r.body.find("per-worker token is configured"), std::string::npos) << r.body;
  EXPECT_EQ(Post("/api/v1/worker/worker-p/heartbeat", body, As("worker-p", kPerWorker)).status,
            200u);

  // Authenticated, but for another worker's path: 403.
  r = Post("/api/v1/worker/worker-b/heartbeat", body, As(kWorker, Signed()));
  EXPECT_EQ(r.status, 403u) << r.body;
  EXPECT_NE(r.body.find("may not act for worker"), std::string::npos);
  // The good ones: a signed token and the shared token.
  EXPECT_EQ(Post(target, body, As(kWorker, Signed())).status, 200u);
  EXPECT_EQ(Post(target, body, As(kWorker, kShared)).status, 200u);
  EXPECT_EQ(Post(target, body,
                 {{"X-Worker-ID", kWorker}, {"Authorization", std::string("Bearer ") + kShared}})
                .status,
            200u);
}

TEST_F(WorkerControlPlaneTest, RenewalsAreRefusedForEachLeaseRule) {
  auto hb = [&](const std::string& id) {
    return Post("/api/v1/worker/" + id + "/heartbeat",
                json{{"capacity", {{"rpc_url", "http://127.0.0.1:9"}}}}.dump(), As(id, kShared));
  };
  ASSERT_EQ(hb("worker-a").status, 200u);
  ASSERT_EQ(hb("worker-b").status, 200u);
  // The operator leases sb-1 to worker-a (generation 1) and sb-2 to worker-b.
  for (auto [w, sb] : {std::pair{"worker-a", "sb-1"}, std::pair{"worker-b", "sb-2"}}) {
    auto r = ctl_->Cli({"worker", "call", "--worker", w, "--method", "status", "--lease", sb,
                        "--ttl", "1m", "--timeout", "2s"});
    ASSERT_EQ(r.exit_code, 69) << r.err;  // leased; nobody listens at :9
  }
  auto renew = [&](const std::string& sb, json lease, const std::string& as = "worker-a") {
    return Post("/api/v1/worker/" + as + "/leases/" + sb + "/renew",
                json{{"resource_id", sb}, {"ttl", "5m"}, {"lease", lease}}.dump(), As(as, kShared));
  };
  auto lease = [](const std::string& sb, int gen, const std::string& holder = "worker-a") {
    return json{{"resource_id", sb},
                {"holder_id", holder},
                {"generation", gen},
                {"expires_at", "2099-01-01T00:00:00Z"}};
  };
  auto expect = [](const http::Response& r, unsigned status, const std::string& words) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_NE(r.body.find(words), std::string::npos) << r.body;
  };
  // Foreign holder: worker-a renewing worker-b's lease.
  expect(renew("sb-2", lease("sb-2", 1)), 409, "held by worker-b");
  // Stale generation.
  expect(renew("sb-1", lease("sb-1", 0)), 409, "stale");
  // The presented lease names another resource or another holder.
  expect(renew("sb-1", lease("sb-2", 1)), 400, "lease.resource_id");
  expect(renew("sb-1", lease("sb-1", 1, "worker-b")), 400, "lease.holder_id");
  // No lease at all on that resource.
  expect(renew("sb-9", lease("sb-9", 1)), 404, "no lease on sb-9");
  // Over the maximum ttl.
  auto r = Post("/api/v1/worker/worker-a/leases/sb-1/renew",
                json{{"ttl", "48h"}, {"lease", lease("sb-1", 1)}}.dump(), As("worker-a", kShared));
  expect(r, 400, "max_lease_ttl");
  // The good one: generation 2, then the old generation is stale.
  r = renew("sb-1", lease("sb-1", 1));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body)["lease"]["generation"], 2);
  expect(renew("sb-1", lease("sb-1", 1)), 409, "stale");
}

TEST_F(WorkerControlPlaneTest, BadBodiesPathsAndMethodsGetPreciseErrors) {
  const std::string target = "/api/v1/worker/worker-a/heartbeat";
  auto as = As(kWorker, kShared);
  auto expect = [&](const std::string& body, unsigned status, const std::string& words) {
    auto r = Post(target, body, as);
    EXPECT_EQ(r.status, status) << body << " → " << r.body;
    EXPECT_NE(r.body.find(words), std::string::npos) << body << " → " << r.body;
  };
  expect("{not json", 400, "heartbeat body");
  expect("[]", 400, "must be a JSON object");
  expect(R"({"status":"sleeping"})", 400, "status sleeping: must be online or draining");
  expect(R"({"hostname":7})", 400, "hostname 7: must be a string");
  expect(R"({"providers":"local"})", 400, "providers");
  expect(R"({"capacity":{"max_sandboxes":-1}})", 400, "capacity.max_sandboxes");
  expect(R"({"capacity":{"rpc_url":"ftp://x"}})", 400, "capacity.rpc_url");
  expect(std::string(2 << 20, ' '), 413, "");
  auto r = Post("/api/v1/worker/worker-a/nothing", "{}", as);
  EXPECT_EQ(r.status, 404u) << r.body;
  r = Post("/api/v1/worker/worker-a/leases/%zz/renew", "{}", as);
  EXPECT_EQ(r.status, 400u) << r.body;
  auto c = http::Client::Connect("127.0.0.1", http_port_, {.timeout = 30s});
  ASSERT_TRUE(c);
  auto get = (*c)->Send({.method = "GET", .target = target});
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405u);
  EXPECT_EQ(std::string(http::FindHeader(get->headers, "Allow").value_or("")), "POST");
  // Nothing of that was recorded.
  EXPECT_EQ(Workers()["workers"].size(), 0u);
}

class WorkerControlPlaneTlsTest : public WorkerControlPlaneTest {
 protected:
  void SetUp() override { StartController("http: {listen: 127.0.0.1:0, tls: {enabled: true}}\n"); }
};

TEST_F(WorkerControlPlaneTlsTest, HeartbeatsOverTlsVerifiedWithTheControllersCa) {
  // The controller's own CA-issued server certificate; the worker verifies it with the CA.
  StartAgent("https", "  control_plane_tls: {ca_file: " + ctl_->data_dir() + "/ca/ca.crt}\n");
  EXPECT_EQ(WorkerState(kWorker), "online");
  // Plain HTTP on the TLS port gets no answer; TLS without the CA fails verification.
  auto plain = http::Client::Connect("127.0.0.1", http_port_, {.timeout = 5s});
  if (plain) {
    auto r = (*plain)->Send({.method = "POST", .target = "/api/v1/worker/x/heartbeat"});
    EXPECT_FALSE(r && r->status == 200u);
  }
  auto unverified = http::Client::Connect(
      "127.0.0.1", http_port_,
      {.timeout = 5s,
       .tls = http::ClientTls{.ca_file = dir_ / "cp.key", .server_name = "127.0.0.1"}});
  EXPECT_FALSE(unverified) << "a certificate not from the given CA was accepted";
  // systemctl reload (SIGHUP) reloads the certificates and keeps serving.
  ctl_->process().Signal(SIGHUP);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return ctl_->process().Stderr().find("HTTP certificates reloaded") != std::string::npos;
      },
      10s));
  EXPECT_TRUE(ctl_->process().Running());
  EXPECT_EQ(ctl_->Cli({"status"}).exit_code, 0);
}

}  // namespace
}  // namespace edge::testing
