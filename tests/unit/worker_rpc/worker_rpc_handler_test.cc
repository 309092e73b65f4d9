// The worker RPC door against the FakeExecutor, through a fake http::Exchange (no sockets):
// routing, auth, envelope errors, every method's mapping to the executor and back, the
// error table, NDJSON framing, cancel on a client that goes away, drain.
#include <gtest/gtest.h>

#include <mutex>

#include "agent/identity/worker_authenticator.h"
#include "agent/identity/worker_token.h"
#include "agent/worker_rpc/worker_rpc_handler.h"
#include "tests/support/fake_executor.h"
#include "tests/support/manual_clock.h"
#include "tests/support/wait_until.h"

namespace edge::workerrpc {
namespace {

using edge::testing::WaitUntil;
using identity::WorkerAuthenticator;
using nlohmann::json;
using sandbox::InvokeResult;
using sandbox::Outcome;

constexpr const char* kShared = "shared-token-0123456789";

class FakeExchange final : public http::Exchange {
 public:
  explicit FakeExchange(http::Request r) : req_(std::move(r)) {}
  const http::Request& request() const override { return req_; }
  void Respond(http::Response r) override {
    std::lock_guard lock(mu_);
    response_ = std::move(r);
  }
  void BeginStream(unsigned status, http::Headers h, std::string ctype) override {
    std::lock_guard lock(mu_);
    stream_status_ = status;
    stream_headers_ = std::move(h);
    stream_type_ = std::move(ctype);
  }
  void WriteChunk(std::string data, std::function<void(bool)> written) override {
    bool gone;
    {
      std::lock_guard lock(mu_);
      chunks_.push_back(std::move(data));
      gone = gone_;
    }
    if (written) written(!gone);
  }
  void EndStream() override {
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  void OnClientGone(std::function<void()> cb) override {
    {
      std::lock_guard lock(mu_);
      if (!gone_) {
        gone_cbs_.push_back(std::move(cb));
        return;
      }
    }
    cb();
  }
  bool client_gone() const override {
    std::lock_guard lock(mu_);
    return gone_;
  }
  void Disconnect() {
    std::vector<std::function<void()>> cbs;
    {
      std::lock_guard lock(mu_);
      gone_ = true;
      cbs.swap(gone_cbs_);
    }
    for (auto& cb : cbs)
      cb();
  }

  bool answered() const {
    std::lock_guard lock(mu_);
    return response_.has_value() || ended_;
  }
  http::Response response() const {
    std::lock_guard lock(mu_);
    return *response_;
  }
  json body() const { return json::parse(response().JoinedBody()); }
  std::vector<std::string> chunks() const {
    std::lock_guard lock(mu_);
    return chunks_;
  }
  unsigned stream_status() const {
    std::lock_guard lock(mu_);
    return stream_status_;
  }
  http::Headers stream_headers() const {
    std::lock_guard lock(mu_);
    return stream_headers_;
  }
  bool ended() const {
    std::lock_guard lock(mu_);
    return ended_;
  }

 private:
  http::Request req_;
  mutable std::mutex mu_;
  std::optional<http::Response> response_;
  unsigned stream_status_ = 0;
  http::Headers stream_headers_;
  std::string stream_type_;
  std::vector<std::string> chunks_;
  bool ended_ = false;
  bool gone_ = false;
  std::vector<std::function<void()>> gone_cbs_;
};

// Forwards to the FakeExecutor and keeps each invocation's cancel token.
class RecordingExecutor final : public sandbox::ExecutorApi {
 public:
  edge::testing::FakeExecutor fake;
  std::mutex mu;
  std::vector<sandbox::CancelToken> tokens;

  void Invoke(sandbox::InvokeRequest r, sandbox::CancelToken c, sandbox::ChunkSink s,
              DoneCallback d) override {
    {
      std::lock_guard lock(mu);
      tokens.push_back(c);
    }
    fake.Invoke(std::move(r), std::move(c), std::move(s), std::move(d));
  }
  Result<std::optional<InvokeResult>> StoredResult(const std::string& id) const override {
    return fake.StoredResult(id);
  }
  bool IsRunning(const std::string& id) const override { return fake.IsRunning(id); }
  bool Cancel(const std::string& id, const std::string& r) override { return fake.Cancel(id, r); }
  std::vector<InvokeResult> TakeInterrupted(const std::string& door) override {
    return fake.TakeInterrupted(door);
  }
  edge::Status ConfirmInterrupted(const std::string& id) override {
    return fake.ConfirmInterrupted(id);
  }
  void Drain() override { fake.Drain(); }
  bool draining() const override { return fake.draining(); }
  void DrainSpawns() override { fake.DrainSpawns(); }
  bool spawns_draining() const override { return fake.spawns_draining(); }
  void Shutdown(std::chrono::milliseconds g, std::function<void()> d) override {
    fake.Shutdown(g, std::move(d));
  }
  std::vector<std::string> Tools() const override { return fake.Tools(); }
  size_t running(const std::string& door) const override { return fake.running(door); }
  edge::Status Reconfigure(
      const std::map<std::string, sandbox::ToolConfig>& t,
      const std::map<std::string, sandbox::SecurityContextConfig>& s) override {
    return fake.Reconfigure(t, s);
  }
  Result<sandbox::SandboxInfo> Spawn(const sandbox::SpawnRequest& r,
                                     const sandbox::Lease* l) override {
    return fake.Spawn(r, l);
  }
  void Destroy(std::string_view id, const sandbox::Lease* l, DestroyCallback done) override {
    fake.Destroy(id, l, std::move(done));
  }
  Result<sandbox::SandboxInfo> Status(std::string_view id) const override {
    return fake.Status(id);
  }
  Result<std::vector<sandbox::SandboxInfo>> List() const override { return fake.List(); }
  Result<sandbox::Lease> RenewLease(const sandbox::Lease& l) override { return fake.RenewLease(l); }
  Result<std::vector<std::string>> Logs(std::string_view id, size_t n) override {
    return fake.Logs(id, n);
  }
};

class WorkerRpcHandlerTest : public ::testing::Test {
 protected:
  WorkerRpcHandlerTest() {
    cfg_.worker_token = kShared;
    cfg_.worker_signing_key = "signing-key-aaaaaaaaaaaaaaaa";
    cfg_.worker_tokens["worker-b"] = "per-worker-b-token";
    cfg_.worker_revoked_token_ids = {"revoked-jti"};
    Rebuild();
  }
  void Rebuild(WorkerRpcOptions o = {}) {
    handler_.reset();
    auth_ = std::make_unique<WorkerAuthenticator>("worker-a", cfg_, clock_);
    o.worker_id = "worker-a";
    handler_ = std::make_unique<WorkerRpcHandler>(exec_, *auth_, std::move(o));
  }

  std::shared_ptr<FakeExchange> Send(std::string method, std::string target, std::string body,
                                     http::Headers headers) {
    auto ex = std::make_shared<FakeExchange>(http::Request{.method = std::move(method),
                                                           .target = std::move(target),
                                                           .headers = std::move(headers),
                                                           .body = std::move(body)});
    handler_->Handle(ex);
    return ex;
  }
  http::Headers Auth(std::string token = kShared, std::string id = "worker-a") {
    return {{"X-Worker-ID", id}, {"X-Worker-Token", token}};
  }
  std::shared_ptr<FakeExchange> Rpc(const json& envelope, http::Headers headers = {}) {
    if (headers.empty()) headers = Auth();
    return Send("POST", "/rpc", envelope.dump(), headers);
  }
  // worker.exec_stream of `x` in sb-1 with `id`, answered as NDJSON.
  std::shared_ptr<FakeExchange> NdjsonExecStream(const std::string& id) {
    auto h = Auth();
    h.emplace_back("X-Worker-Stream", "ndjson");
    return Rpc({{"id", id},
                {"method", "worker.exec_stream"},
                {"params", {{"sandbox_id", "sb-1"}, {"command", "x"}}}},
               h);
  }
  std::shared_ptr<FakeExchange> Call(const std::string& method, json params,
                                     std::optional<json> lease = std::nullopt) {
    json env = {{"id", "req-1"},
                {"method", method},
                {"worker_id", "worker-a"},
                {"params", std::move(params)}};
    if (lease) env["lease"] = *lease;
    return Rpc(env);
  }
  void AwaitAnswer(const std::shared_ptr<FakeExchange>& ex) {
    ASSERT_TRUE(WaitUntil([&] { return ex->answered(); }));
  }
  json Lease(std::string resource = "sb-1", int64_t gen = 3, std::string holder = "worker-a") {
    return {{"resource_id", resource},
            {"holder_id", holder},
            {"generation", gen},
            {"expires_at", "2099-01-01T00:00:00Z"}};
  }
  std::string Signed(identity::WorkerTokenClaims c, std::string key = "") {
    return *identity::WorkerToken::Issue(c, key.empty() ? cfg_.worker_signing_key : key);
  }

  ManualClock clock_;
  config::WorkerAuth cfg_;
  RecordingExecutor exec_;
  std::unique_ptr<WorkerAuthenticator> auth_;
  std::unique_ptr<WorkerRpcHandler> handler_;
};

TEST_F(WorkerRpcHandlerTest, HealthSaysOkThenDrainingAfterShutdown) {
  auto h = Send("GET", "/health", "", {});
  EXPECT_EQ(h->response().status, 200u);
  EXPECT_EQ(h->body(), json({{"status", "ok"}, {"worker_id", "worker-a"}}));
  auto s = Call("worker.shutdown", json::object());
  EXPECT_EQ(s->response().status, 200u);
  EXPECT_EQ(s->body()["result"]["status"], "draining");
  EXPECT_TRUE(exec_.spawns_draining());
  EXPECT_FALSE(exec_.draining());  // commands on existing sandboxes keep working
  EXPECT_EQ(Send("GET", "/health", "", {})->body()["status"], "draining");
  // New spawns are refused with 503 (the executor's drain).
  auto sp = Call("worker.spawn", {{"sandbox_id", "sb-1"}}, Lease());
  AwaitAnswer(sp);
  EXPECT_EQ(sp->response().status, 503u);
  EXPECT_EQ(sp->body()["code"], "DRAINING");
}

TEST_F(WorkerRpcHandlerTest, PathsAndMethods) {
  EXPECT_EQ(Send("GET", "/nope", "", Auth())->response().status, 404u);
  auto r = Send("GET", "/rpc", "", Auth());
  EXPECT_EQ(r->response().status, 405u);
  EXPECT_EQ(http::FindHeader(r->response().headers, "Allow").value_or(""), "POST");
  EXPECT_EQ(Send("POST", "/health", "", {})->response().status, 405u);
}

TEST_F(WorkerRpcHandlerTest, AuthFailuresAre401NamingTheRuleWithoutTheToken) {
  auto expect401 = [&](http::Headers h, std::string_view fragment) -> std::string {
    auto ex = Send("POST", "/rpc", R"({"method":"worker.status"})", std::move(h));
    EXPECT_EQ(ex->response().status, 401u) << fragment;
    auto b = ex->body();
    EXPECT_EQ(b["code"], "UNAUTHORIZED");
    const std::string msg = b.value("message", "");
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    return msg;
  };
  expect401({{"X-Worker-Token", kShared}}, "missing X-Worker-ID");
  expect401({{"X-Worker-ID", "worker-a"}}, "missing worker token");
  auto m = expect401(Auth("wrong-token-value-xyz"), "does not match auth.worker_token");
  EXPECT_EQ(m.find("wrong-token-value-xyz"), std::string::npos);
  expect401(Auth(kShared, "worker-z"), "is not this worker");
  expect401({{"X-Worker-ID", "worker-a"}, {"Authorization", "Basic abc"}}, "Bearer");

  auto now = clock_.Now();
  auto claims = [&](std::string id = "worker-a") {
    return identity::WorkerToken::NewClaims(id, std::chrono::minutes(5), now, "worker:rpc");
  };
  auto expired = claims();
  expired.exp = *expired.iat - 1;
  expect401(Auth(Signed(expired)), "expired");
  auto future = claims();
  future.nbf = *future.iat + 31;
  expect401(Auth(Signed(future)), "not valid before");
  auto longlived = claims();
  longlived.exp = *longlived.iat + 15 * 60 + 1;
  expect401(Auth(Signed(longlived)), "lifetime");
  auto aud = claims();
  aud.aud = "worker:control-plane";
  expect401(Auth(Signed(aud)), "audience");
  auto revoked = claims();
  revoked.jti = "revoked-jti";
  expect401(Auth(Signed(revoked)), "revoked");
  expect401(Auth(Signed(claims("worker-b"))), "not this worker");
  expect401(Auth(Signed(claims(), "another-key-bbbbbbbbbbbb")), "signature");
  std::string tampered = Signed(claims());
  tampered.back() = tampered.back() == 'A' ? 'B' : 'A';
  expect401(Auth(tampered), "signature");
}

TEST_F(WorkerRpcHandlerTest, AcceptedCredentials) {
  auto ok = [&](http::Headers h) {
    auto ex = Send("POST", "/rpc", R"({"id":"1","method":"worker.heartbeat"})", std::move(h));
    return ex->response().status;
  };
  // worker.heartbeat is refused with 400 *after* auth: 400 means the credential passed.
  EXPECT_EQ(ok(Auth()), 400u);
  EXPECT_EQ(ok({{"X-Worker-ID", "worker-a"}, {"Authorization", std::string("Bearer ") + kShared}}),
            400u);
  auto c = identity::WorkerToken::NewClaims("worker-a", std::chrono::minutes(5), clock_.Now(),
                                            "worker:rpc");
  EXPECT_EQ(ok(Auth(Signed(c))), 400u);
  c.aud.clear();  // a token without aud passes
  EXPECT_EQ(ok(Auth(Signed(c))), 400u);
  // A rotation key verifies too.
  cfg_.worker_signing_keys = {"old-key-cccccccccccccccc"};
  Rebuild();
  EXPECT_EQ(ok(Auth(Signed(c, "old-key-cccccccccccccccc"))), 400u);
}

TEST_F(WorkerRpcHandlerTest, ASignedTokensScopesLimitItsMethods) {
  auto scoped = [&](std::vector<std::string> scopes) {
    return Auth(Signed(identity::WorkerToken::NewClaims(
        "worker-a", std::chrono::minutes(5), clock_.Now(), "worker:rpc", std::move(scopes))));
  };
  auto call = [&](const std::string& method, http::Headers h) {
    json env = {{"id", "req-1"},
                {"method", method},
                {"worker_id", "worker-a"},
                {"params", {{"sandbox_id", "sb-1"}, {"command", "true"}, {"path", "f"}}}};
    return Rpc(env, std::move(h));
  };
  // A monitoring token: worker.status only.
  const auto status_only = scoped({"worker:status"});
  auto st = call("worker.status", status_only);
  AwaitAnswer(st);
  EXPECT_EQ(st->response().status, 404u) << st->response().body;  // past the scope: no sandbox
  const std::vector<std::pair<std::string, std::string>> needs = {
      {"worker.exec", "worker:exec"},        {"worker.exec_stream", "worker:exec"},
      {"worker.spawn", "worker:spawn"},      {"worker.destroy", "worker:destroy"},
      {"worker.shutdown", "worker:destroy"}, {"worker.file_read", "worker:files"},
      {"worker.file_write", "worker:files"}, {"worker.logs", "worker:logs"},
      {"worker.renew_lease", "worker:lease"}};
  for (const auto& [method, need] : needs) {
    auto ex = call(method, status_only);
    AwaitAnswer(ex);
    EXPECT_EQ(ex->response().status, 403u) << method;
    const std::string& body = ex->response().body;
    EXPECT_NE(body.find(method + " needs the token scope " + need +
                        "; this token's scopes are [worker:status]"),
              std::string::npos)
        << body;
  }
  // Nothing reached the executor: no command, no spawn, no lease given to it.
  EXPECT_EQ(exec_.fake.requests().size(), 0u);
  EXPECT_TRUE(exec_.fake.spawns().empty());
  EXPECT_TRUE(exec_.fake.leases().empty());
  EXPECT_FALSE(exec_.spawns_draining());  // the refused shutdown did not drain
  // Scopes that are not the worker's grant nothing.
  auto other = call("worker.status", scoped({"admin", "worker:unknown"}));
  AwaitAnswer(other);
  EXPECT_EQ(other->response().status, 403u);
  // The scope that grants it, and a token that lists no scopes, run the command.
  call("worker.exec", scoped({"worker:status", "worker:exec"}));
  EXPECT_EQ(exec_.fake.requests().size(), 1u);
  call("worker.exec", scoped({}));
  EXPECT_EQ(exec_.fake.requests().size(), 2u);
}

TEST_F(WorkerRpcHandlerTest, ASpawnTtlIsRoundedUpToWholeSecondsSoAShortOneStillExpires) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"500ms", 1}, {"1500ms", 2}, {"2s", 2}, {"0s", 0}};
  for (const auto& [ttl, secs] : cases) {
    auto sp = Call("worker.spawn", {{"sandbox_id", "sb-" + ttl}, {"ttl", ttl}}, Lease("sb-" + ttl));
    AwaitAnswer(sp);
    ASSERT_EQ(sp->response().status, 200u) << sp->response().body;
    ASSERT_FALSE(exec_.fake.spawns().empty());
    EXPECT_EQ(exec_.fake.spawns().back().ttl.count(), secs) << ttl;  // "500ms" was 0: no ttl
  }
}

TEST_F(WorkerRpcHandlerTest, TheScreenRefusesFromTheHeadersAloneBeforeAnyBody) {
  http::Request head;
  head.method = "POST";
  head.target = "/rpc";
  head.remote = "127.0.0.1:40000";
  head.headers = {{"X-Request-ID", "r-1"}};
  auto r = handler_->Screen(head);  // no credential: answered before its body is read
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401u);
  EXPECT_NE(r->body.find("missing"), std::string::npos) << r->body;
  EXPECT_EQ(http::FindHeader(r->headers, "X-Request-ID"), "r-1");
  head.headers = Auth(Signed(identity::WorkerToken::NewClaims("worker-a", std::chrono::minutes(5),
                                                              clock_.Now(), "worker:rpc")));
  EXPECT_FALSE(handler_->Screen(head));  // a good credential: the body is read, then Handle
  head.target = "/other";
  ASSERT_TRUE(handler_->Screen(head));
  EXPECT_EQ(handler_->Screen(head)->status, 404u);
  head.target = "/rpc";
  head.method = "PUT";
  EXPECT_EQ(handler_->Screen(head)->status, 405u);
  head = http::Request{.method = "GET", .target = "/health"};
  EXPECT_FALSE(handler_->Screen(head));  // answered by Handle
  EXPECT_EQ(exec_.fake.requests().size(), 0u);
}

TEST_F(WorkerRpcHandlerTest, PerWorkerTokenTakesPrecedenceOverTheSharedOne) {
  auth_ = std::make_unique<WorkerAuthenticator>("worker-b", cfg_, clock_);
  handler_ =
      std::make_unique<WorkerRpcHandler>(exec_, *auth_, WorkerRpcOptions{.worker_id = "worker-b"});
  auto send = [&](std::string token) {
    return Send("POST", "/rpc", R"({"method":"worker.heartbeat"})",
                {{"X-Worker-ID", "worker-b"}, {"X-Worker-Token", token}});
  };
  EXPECT_EQ(send("per-worker-b-token")->response().status, 400u);
  auto refused = send(kShared);
  EXPECT_EQ(refused->response().status, 401u);
  EXPECT_NE(refused->body()["message"].get<std::string>().find("shared token is refused"),
            std::string::npos);
}

TEST_F(WorkerRpcHandlerTest, EnvelopeErrors) {
  auto bad = Send("POST", "/rpc", "{not json", Auth());
  EXPECT_EQ(bad->response().status, 400u);
  EXPECT_EQ(bad->body()["code"], "BAD_REQUEST");
  for (std::string body :
       {R"([1,2])", R"({"method":5})", R"({"id":1,"method":"worker.status"})",
        R"({"method":"worker.status","params":[]})",
        R"({"method":"worker.status","lease":{"generation":"x"}})",
        R"({"method":"worker.status","lease":{"expires_at":"yesterday"}})", R"({})"}) {
    auto ex = Send("POST", "/rpc", body, Auth());
    EXPECT_EQ(ex->response().status, 400u) << body;
    EXPECT_EQ(ex->body()["code"], "BAD_REQUEST") << body;
  }
  auto unknown = Call("worker.teleport", json::object());
  EXPECT_EQ(unknown->response().status, 400u);
  EXPECT_EQ(unknown->body()["error"], "unknown worker method: worker.teleport");
  EXPECT_EQ(unknown->body()["id"], "req-1");
  auto other = Rpc({{"id", "x"}, {"method", "worker.status"}, {"worker_id", "worker-b"}});
  EXPECT_EQ(other->response().status, 403u);
  auto hb = Call("worker.heartbeat", json::object());
  EXPECT_EQ(hb->response().status, 400u);
}

TEST_F(WorkerRpcHandlerTest, RequestIdIsEchoed) {
  auto h = Auth();
  h.emplace_back("X-Request-ID", "trace-42");
  auto ex = Send("POST", "/rpc", R"({"method":"worker.heartbeat"})", h);
  EXPECT_EQ(http::FindHeader(ex->response().headers, "X-Request-ID").value_or(""), "trace-42");
}

TEST_F(WorkerRpcHandlerTest, SpawnStatusLogsDestroyCarryTheLease) {
  auto sp = Call("worker.spawn",
                 {{"sandbox_id", "sb-1"},
                  {"owner_id", "o"},
                  {"ttl", "1h"},
                  {"metadata", {{"k", "v"}}},
                  {"image", "ubuntu"},
                  {"memory_mb", 512}},
                 Lease());
  AwaitAnswer(sp);
  ASSERT_EQ(sp->response().status, 200u) << sp->response().body;
  auto r = sp->body()["result"];
  EXPECT_EQ(r["sandbox_id"], "sb-1");
  EXPECT_EQ(r["state"], "running");
  EXPECT_EQ(r["worker_id"], "worker-a");
  EXPECT_EQ(r["metadata"]["k"], "v");
  EXPECT_FALSE(r["runtime_id"].get<std::string>().empty());
  ASSERT_EQ(exec_.fake.leases().size(), 1u);
  EXPECT_EQ(exec_.fake.leases()[0].generation, 3);
  EXPECT_EQ(exec_.fake.leases()[0].holder_id, "worker-a");

  auto st = Call("worker.status", {{"sandbox_id", "sb-1"}});
  AwaitAnswer(st);
  EXPECT_EQ(st->body()["result"]["state"], "running");
  exec_.fake.SetLogs({"one", "two", "three"});
  auto lg = Call("worker.logs", {{"sandbox_id", "sb-1"}, {"lines", 2}});
  AwaitAnswer(lg);
  EXPECT_EQ(lg->body()["result"]["lines"], json({"two", "three"}));
  auto bad_lines = Call("worker.logs", {{"sandbox_id", "sb-1"}, {"lines", "many"}});
  AwaitAnswer(bad_lines);
  EXPECT_EQ(bad_lines->response().status, 400u);

  auto de = Call("worker.destroy", {{"sandbox_id", "sb-1"}}, Lease());
  AwaitAnswer(de);
  EXPECT_EQ(de->body()["result"]["state"], "destroyed");
  auto missing = Call("worker.status", {{"sandbox_id", "sb-1"}});
  AwaitAnswer(missing);
  EXPECT_EQ(missing->response().status, 404u);
  EXPECT_EQ(missing->body()["code"], "NOT_FOUND");
  auto no_id = Call("worker.status", json::object());
  AwaitAnswer(no_id);
  EXPECT_EQ(no_id->response().status, 400u);
}

TEST_F(WorkerRpcHandlerTest, RenewLeaseChecksThenAsksTheControlPlane) {
  auto r = Call("worker.renew_lease", {{"resource_id", "sb-1"}, {"ttl", "5m"}}, Lease());
  AwaitAnswer(r);
  EXPECT_EQ(r->response().status, 409u);
  EXPECT_NE(r->body()["error"].get<std::string>().find("control_plane_url"), std::string::npos);
  auto mismatch = Call("worker.renew_lease", {{"resource_id", "sb-2"}}, Lease());
  AwaitAnswer(mismatch);
  EXPECT_EQ(mismatch->response().status, 403u);
  EXPECT_EQ(mismatch->body()["code"], "LEASE_REJECTED");
  auto none = Call("worker.renew_lease", {{"resource_id", "sb-1"}});
  AwaitAnswer(none);
  EXPECT_EQ(none->response().status, 403u);

  WorkerRpcOptions o;
  o.renew_upstream = [](const sandbox::Lease& l, std::string_view ttl) -> Result<sandbox::Lease> {
    EXPECT_EQ(ttl, "5m");
    sandbox::Lease n = l;
    n.generation += 1;
    return n;
  };
  Rebuild(o);
  auto ok = Call("worker.renew_lease", {{"resource_id", "sb-1"}, {"ttl", "5m"}}, Lease());
  AwaitAnswer(ok);
  ASSERT_EQ(ok->response().status, 200u) << ok->response().body;
  EXPECT_EQ(ok->body()["result"]["lease"]["generation"], 4);
  EXPECT_EQ(ok->body()["result"]["lease"]["expires_at"], "2099-01-01T00:00:00Z");
}

TEST_F(WorkerRpcHandlerTest, ExecMapsParamsAndResult) {
  auto ex = Call("worker.exec", {{"sandbox_id", "sb-1"},
                                 {"command", "echo"},
                                 {"args", {"a b"}},
                                 {"mode", "shell"},
                                 {"workdir", "sub"},
                                 {"env", {{"X", "1"}}},
                                 {"timeout", "5s"},
                                 {"provider", "local"},
                                 {"runtime_id", "local-sb-1"}});
  ASSERT_EQ(exec_.fake.pending(), 1u);
  auto req = exec_.fake.requests().back();
  EXPECT_EQ(req.tool, "exec");
  EXPECT_EQ(req.sandbox_id, "sb-1");
  EXPECT_EQ(req.args, json({{"command", "echo"},
                            {"args", {"a b"}},
                            {"mode", "shell"},
                            {"cwd", "sub"},
                            {"env", {{"X", "1"}}},
                            {"timeout", "5s"}}));
  EXPECT_TRUE(req.collect_output);
  InvokeResult r;
  r.exit_code = 3;
  r.payload = {{"exit_code", 3}, {"signal", 0}, {"stdout", "out"}, {"stderr", "err"}};
  exec_.fake.Finish("", r);
  AwaitAnswer(ex);
  EXPECT_EQ(ex->response().status, 200u);
  auto res = ex->body()["result"];
  EXPECT_EQ(res["sandbox_id"], "sb-1");
  EXPECT_EQ(res["exit_code"], 3);
  EXPECT_EQ(res["stdout"], "out");
  EXPECT_EQ(res["stderr"], "err");
  EXPECT_EQ(handler_->in_flight(), 0u);
}

TEST_F(WorkerRpcHandlerTest, WorkerMaxConcurrentTravelsAsTheDoorLimit) {
  // Unlimited by default: only the executor-wide caps.
  Call("worker.exec", {{"sandbox_id", "sb-1"}, {"command", "true"}});
  ASSERT_EQ(exec_.fake.pending(), 1u);
  EXPECT_FALSE(exec_.fake.requests().back().door_limit.has_value());
  exec_.fake.Finish("", InvokeResult{});
  Rebuild({.max_concurrent = 3});
  for (const char* m : {"worker.exec", "worker.exec_stream", "worker.file_read"}) {
    Call(m, {{"sandbox_id", "sb-1"}, {"command", "true"}, {"path", "a"}});
    auto req = exec_.fake.requests().back();
    ASSERT_TRUE(req.door_limit.has_value()) << m;
    EXPECT_EQ(req.door_limit->door, "worker");
    EXPECT_EQ(req.door_limit->key, "worker.max_concurrent");
    EXPECT_EQ(req.door_limit->max_concurrent, 3u);
  }
  while (exec_.fake.pending() > 0)
    exec_.fake.Finish("", InvokeResult{});
  // The executor's refusal past the cap is 429.
  InvokeResult refused;
  refused.outcome = Outcome::kError;
  refused.error = {ErrorCode::kResourceExhausted, "worker.max_concurrent (3) reached"};
  auto ex = Call("worker.exec", {{"sandbox_id", "sb-1"}, {"command", "true"}});
  exec_.fake.Finish("", refused);
  AwaitAnswer(ex);
  EXPECT_EQ(ex->response().status, 429u);
  EXPECT_NE(ex->body()["error"].get<std::string>().find("worker.max_concurrent"),
            std::string::npos);
}

TEST_F(WorkerRpcHandlerTest, ErrorTableMapsExecutorCodes) {
  const std::vector<std::pair<ErrorCode, unsigned>> table = {
      {ErrorCode::kInvalidArgument, 400},  {ErrorCode::kNotFound, 404},
      {ErrorCode::kLeaseRejected, 403},    {ErrorCode::kPathOutsideRoot, 403},
      {ErrorCode::kPermissionDenied, 403}, {ErrorCode::kTimedOut, 504},
      {ErrorCode::kDraining, 503},         {ErrorCode::kResourceExhausted, 429},
      {ErrorCode::kInternal, 500},         {ErrorCode::kCancelled, 500}};
  for (const auto& [code, status] : table) {
    exec_.fake.RefuseNext({code, "because"});
    auto ex = Call("worker.file_read", {{"sandbox_id", "sb-1"}, {"path", "../x"}});
    AwaitAnswer(ex);
    EXPECT_EQ(ex->response().status, status) << ErrorCodeName(code);
    EXPECT_EQ(ex->body()["code"], ErrorCodeName(code));
    EXPECT_EQ(ex->body()["error"], "because");
    EXPECT_EQ(ex->body()["id"], "req-1");
    EXPECT_FALSE(ex->body().contains("result"));
  }
}

TEST_F(WorkerRpcHandlerTest, FileMethodsAreExecutorTools) {
  struct Case {
    std::string method, tool;
    json params, args, payload;
  };
  const std::vector<Case> cases = {
      {"worker.file_write",
       "file.write",
       {{"path", "a.txt"}, {"content", "aGk="}, {"mode", "0600"}},
       {{"path", "a.txt"}, {"content", "aGk="}, {"mode", "0600"}},
       {{"path", "a.txt"}, {"size", 2}}},
      {"worker.file_read",
       "file.read",
       {{"path", "a.txt"}},
       {{"path", "a.txt"}},
       {{"path", "a.txt"}, {"size", 2}, {"content", "aGk="}}},
      {"worker.file_list",
       "file.list",
       {{"path", "."}},
       {{"path", "."}},
       {{"files", json::array()}}},
      {"worker.file_delete",
       "file.delete",
       {{"path", "d"}, {"recursive", true}},
       {{"path", "d"}, {"recursive", true}},
       {{"path", "d"}, {"deleted", true}}},
      {"worker.file_move",
       "file.move",
       {{"old_path", "a"}, {"new_path", "b"}},
       {{"old_path", "a"}, {"new_path", "b"}},
       {{"old_path", "a"}, {"new_path", "b"}}},
      {"worker.file_chmod",
       "file.chmod",
       {{"path", "a"}, {"mode", "0755"}},
       {{"path", "a"}, {"mode", "0755"}},
       {{"path", "a"}, {"mode", "0755"}}},
      {"worker.file_stat",
       "file.stat",
       {{"path", "a"}},
       {{"path", "a"}},
       {{"file", {{"path", "a"}}}}},
      {"worker.file_glob",
       "file.glob",
       {{"pattern", "*.txt"}},
       {{"pattern", "*.txt"}},
       {{"matches", {"a.txt"}}}},
  };
  for (const auto& c : cases) {
    json params = c.params;
    params["sandbox_id"] = "sb-1";
    auto ex = Call(c.method, params, Lease());
    ASSERT_EQ(exec_.fake.pending(), 1u) << c.method;
    auto req = exec_.fake.requests().back();
    EXPECT_EQ(req.tool, c.tool);
    EXPECT_EQ(req.args, c.args) << c.method;
    EXPECT_EQ(req.sandbox_id, "sb-1");
    ASSERT_TRUE(req.lease.has_value());  // carried to the executor, which fences
    EXPECT_EQ(req.lease->generation, 3);
    InvokeResult r;
    r.payload = c.payload;
    exec_.fake.Finish("", r);
    AwaitAnswer(ex);
    ASSERT_EQ(ex->response().status, 200u) << c.method;
    json expected = c.payload;
    expected["sandbox_id"] = "sb-1";
    EXPECT_EQ(ex->body()["result"], expected) << c.method;
  }
}

// file_read's text of 8 MiB or more goes into the answer as a piece of its own, between the
// envelope's two halves, moved rather than copied into one text; the pieces are the answer.
TEST_F(WorkerRpcHandlerTest, AFileReadsLargeTextIsAPieceOfTheAnswerOfItsOwn) {
  auto ex = Call("worker.file_read", {{"sandbox_id", "sb-1"}, {"path", "big.bin"}}, Lease());
  ASSERT_EQ(exec_.fake.pending(), 1u);
  const std::string text(8u << 20, 'Q');
  InvokeResult r;
  r.payload = {{"path", "big.bin"}, {"size", 6u << 20}, {"content", text}};
  exec_.fake.Finish("", r);
  AwaitAnswer(ex);
  const http::Response answer = ex->response();
  ASSERT_EQ(answer.status, 200u);
  EXPECT_EQ(answer.body, R"({"id":"req-1","result":{"content":")");
  ASSERT_EQ(answer.more_body.size(), 2u);
  EXPECT_TRUE(answer.more_body[0] == text);
  EXPECT_EQ(answer.more_body[1],
            R"(","path":"big.bin","sandbox_id":"sb-1","size":6291456},"worker_id":"worker-a"})");
  EXPECT_EQ(ex->body()["result"]["content"], text);
}

TEST_F(WorkerRpcHandlerTest, ExecStreamBuffered) {
  auto ex = Call("worker.exec_stream", {{"sandbox_id", "sb-1"}, {"command", "x"}});
  EXPECT_FALSE(exec_.fake.requests().back().collect_output);
  bool acked = false;
  ASSERT_TRUE(exec_.fake.Chunk("", {sandbox::OutputStream::kStdout, "a"}, [&] { acked = true; }));
  EXPECT_TRUE(acked);
  exec_.fake.Chunk("", {sandbox::OutputStream::kStderr, "b"});
  exec_.fake.Finish("", InvokeResult{});
  AwaitAnswer(ex);
  auto res = ex->body()["result"];
  EXPECT_EQ(res["chunks"],
            json::parse(R"([{"stream":"stdout","data":"a"},{"stream":"stderr","data":"b"}])"));
  EXPECT_EQ(res["sandbox_id"], "sb-1");
}

TEST_F(WorkerRpcHandlerTest, ExecStreamNdjsonFramesEveryChunkAndEndsWithTheExitCode) {
  auto ex = NdjsonExecStream("s1");
  bool acked = false;
  exec_.fake.Chunk("", {sandbox::OutputStream::kStdout, "hello\n"}, [&] { acked = true; });
  EXPECT_TRUE(acked);
  EXPECT_EQ(ex->stream_status(), 200u);
  EXPECT_EQ(http::FindHeader(ex->stream_headers(), "X-Worker-Stream").value_or(""), "ndjson");
  exec_.fake.Chunk("", {sandbox::OutputStream::kStderr, std::string("\xff", 1)});
  InvokeResult r;
  r.exit_code = 7;
  exec_.fake.Finish("", r);
  ASSERT_TRUE(ex->ended());
  auto lines = ex->chunks();
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& l : lines) {
    ASSERT_TRUE(l.ends_with("\n"));
    EXPECT_EQ(l.find('\n'), l.size() - 1);  // one JSON document per line
  }
  EXPECT_EQ(json::parse(lines[0]), json::parse(R"({"id":"s1","worker_id":"worker-a",
            "result":{"stream":"stdout","data":"hello\n"}})"));
  EXPECT_EQ(json::parse(lines[1])["result"]["data_base64"], "/w==");
  EXPECT_EQ(json::parse(lines[2])["result"], json({{"exit_code", 7}, {"done", true}}));
}

// A character split across two chunks arrives whole, as text: the start of it is held back
// and put in front of its stream's next chunk (per stream); a chunk that is nothing but the
// start of a character sends nothing; what is still held when the command ends is sent then,
// as the bytes it is (data_base64), before the last line. Hand-written: é = C3 A9,
// € = E2 82 AC; base64 of E2 82 is "4oI=".
TEST_F(WorkerRpcHandlerTest, ExecStreamKeepsACharacterSplitAcrossChunksWhole) {
  auto ex = NdjsonExecStream("s1");
  using sandbox::OutputStream;
  int acks = 0;
  auto count = [&] { ++acks; };
  exec_.fake.Chunk("", {OutputStream::kStdout, "caf\xc3"}, count);
  exec_.fake.Chunk("", {OutputStream::kStderr, "x\xe2\x82"}, count);
  exec_.fake.Chunk("", {OutputStream::kStdout, "\xa9!\n"}, count);
  exec_.fake.Chunk("", {OutputStream::kStdout, "\xe2"}, count);  // all of it held
  exec_.fake.Chunk("", {OutputStream::kStdout, "\x82\xac"}, count);
  EXPECT_EQ(acks, 5);
  exec_.fake.Finish("", InvokeResult{});
  ASSERT_TRUE(ex->ended());
  std::vector<json> got;
  for (const auto& l : ex->chunks())
    got.push_back(json::parse(l)["result"]);
  const std::vector<json> want = {
      {{"stream", "stdout"}, {"data", "caf"}},
      {{"stream", "stderr"}, {"data", "x"}},
      {{"stream", "stdout"}, {"data", "\xc3\xa9!\n"}},
      {{"stream", "stdout"}, {"data", "\xe2\x82\xac"}},
      {{"stream", "stderr"}, {"data", "\xef\xbf\xbd"}, {"data_base64", "4oI="}},
      {{"exit_code", 0}, {"done", true}}};
  EXPECT_EQ(got, want);
}

// The same in the buffered answer's "chunks".
TEST_F(WorkerRpcHandlerTest, ExecStreamBufferedKeepsACharacterSplitAcrossChunksWhole) {
  auto ex = Call("worker.exec_stream", {{"sandbox_id", "sb-1"}, {"command", "x"}});
  exec_.fake.Chunk("", {sandbox::OutputStream::kStdout, "caf\xc3"});
  exec_.fake.Chunk("", {sandbox::OutputStream::kStdout, "\xa9"});
  exec_.fake.Chunk("", {sandbox::OutputStream::kStdout, "\xe2\x82"});
  exec_.fake.Finish("", InvokeResult{});
  AwaitAnswer(ex);
  EXPECT_EQ(ex->body()["result"]["chunks"],
            json::parse(R"([{"stream":"stdout","data":"caf"},{"stream":"stdout","data":"é"},)"
                        R"({"stream":"stdout","data":"\ufffd","data_base64":"4oI="}])"));
}

TEST_F(WorkerRpcHandlerTest, ExecStreamNdjsonTimeoutEndsWithAnErrorLine) {
  auto h = Auth();
  h.emplace_back("X-Worker-Stream", "ndjson");
  auto ex = Rpc({{"id", "s2"},
                 {"method", "worker.exec_stream"},
                 {"params", {{"sandbox_id", "sb-1"}, {"command", "x"}}}},
                h);
  exec_.fake.Chunk("", {sandbox::OutputStream::kStdout, "partial"});
  InvokeResult r;
  r.outcome = Outcome::kTimedOut;
  r.error = {ErrorCode::kTimedOut, "command exceeded its timeout of 100 ms"};
  exec_.fake.Finish("", r);
  auto lines = ex->chunks();
  ASSERT_EQ(lines.size(), 2u);
  auto last = json::parse(lines[1]);
  EXPECT_EQ(last["id"], "s2");
  EXPECT_EQ(last["code"], "TIMED_OUT");
  EXPECT_FALSE(last.contains("result"));
  // Refused before any output: a plain error answer with its status.
  exec_.fake.RefuseNext({ErrorCode::kNotFound, "sandbox 'sb-9' not found"});
  auto nf = Rpc({{"id", "s3"},
                 {"method", "worker.exec_stream"},
                 {"params", {{"sandbox_id", "sb-9"}, {"command", "x"}}}},
                h);
  EXPECT_EQ(nf->response().status, 404u);
}

TEST_F(WorkerRpcHandlerTest, ClientGoingAwayCancelsTheCommandOrFileMethod) {
  auto stream = Auth();
  stream.emplace_back("X-Worker-Stream", "ndjson");
  const std::vector<std::pair<json, http::Headers>> calls = {
      {{{"id", "s4"},
        {"method", "worker.exec_stream"},
        {"params", {{"sandbox_id", "sb-1"}, {"command", "sleep 100"}}}},
       stream},
      {{{"id", "f1"},
        {"method", "worker.file_delete"},
        {"params", {{"sandbox_id", "sb-1"}, {"path", "big"}, {"recursive", true}}}},
       Auth()},
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    SCOPED_TRACE(calls[i].first["method"].get<std::string>());
    auto ex = Rpc(calls[i].first, calls[i].second);
    sandbox::CancelToken token;
    {
      std::lock_guard lock(exec_.mu);
      ASSERT_EQ(exec_.tokens.size(), i + 1);
      token = exec_.tokens[i];
    }
    EXPECT_FALSE(token.cancelled());
    ex->Disconnect();
    EXPECT_TRUE(token.cancelled());
    EXPECT_EQ(token.reason(), "the client disconnected");
    InvokeResult r;
    r.outcome = Outcome::kCancelled;
    r.error = {ErrorCode::kCancelled, "cancelled: the client disconnected"};
    exec_.fake.Finish("", r);
    EXPECT_EQ(handler_->in_flight(), 0u);
  }
}

TEST_F(WorkerRpcHandlerTest, CancelAllCancelsRunningCommands) {
  Call("worker.exec", {{"sandbox_id", "sb-1"}, {"command", "sleep 100"}});
  sandbox::CancelToken token;
  {
    std::lock_guard lock(exec_.mu);
    token = exec_.tokens.back();
  }
  handler_->CancelAll("stopping");
  EXPECT_TRUE(token.cancelled());
  exec_.fake.Finish("", InvokeResult{});
}

}  // namespace
}  // namespace edge::workerrpc
