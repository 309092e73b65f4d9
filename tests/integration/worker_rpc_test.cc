// Worker RPC through the real `edge-agent --listen 127.0.0.1:0` (wire.md §4): every method,
// every auth failure (signed tokens made here with `openssl dgst -sha256 -hmac`, never by the
// code under test), lease failures, path escapes through the file methods, bad input, NDJSON
// framing line by line, a client that vanishes mid-stream, and drain. No controller: the
// worker door runs without enrollment.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <functional>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "http/client.h"
#include "http/server.h"
#include "tests/integration/harness.h"
#include "tests/integration/worker_tokens.h"

namespace edge::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kWorker = "worker-a";
constexpr const char* kPerWorker = "per-worker-token-aaaaaaaa";
constexpr const char* kShared = "shared-token-bbbbbbbbbbbb";
constexpr const char* kKey = "signing-key-cccccccccccccccc";
constexpr const char* kOldKey = "old-signing-key-dddddddddddd";

std::string OpensslToken(const json& claims, const std::string& key) {
  return OpensslWorkerToken(claims, key);
}

int64_t Now() {
  return NowSecs();
}

json Claims(std::string worker = kWorker, std::string aud = "worker:rpc") {
  return WorkerClaims(worker, aud);
}

class WorkerRpcTest : public ::testing::Test {
 protected:
  void SetUp() override { StartAgent(""); }
  // Starts the agent with `extra` lines added to its worker section.
  void StartAgent(const std::string& extra) {
    WriteText(dir_ / "signing.key", std::string(kKey) + "\n");
    WriteText(dir_ / "agent.yaml",
              "node_id: " + std::string(kWorker) + "\n" + "data_dir: " + dir_.path() + "/data\n" +
                  "edge: {enabled: false}\n"
                  "sandbox: {kill_grace: 1s}\n"
                  "worker:\n"
                  "  auth:\n"
                  "    worker_token: " +
                  kShared + "\n" + "    worker_tokens: {worker-a: " + kPerWorker + "}\n" +
                  "    worker_signing_key_file: " + dir_.path() + "/signing.key\n" +
                  "    worker_signing_keys: [" + kOldKey + "]\n" +
                  "    worker_revoked_token_ids: [revoked-jti]\n" + extra);
    agent_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{AgentBin(), "--listen", "127.0.0.1:0", "--config",
                                 dir_ / "agent.yaml", "--log-level", "debug"},
        dir_.path());
    std::regex re("worker RPC listening on \\S+ \\(port (\\d+)");
    ASSERT_TRUE(WaitUntil(
        [&] {
          std::smatch m;
          std::string err = agent_->Stderr();
          if (!std::regex_search(err, m, re)) return false;
          port_ = static_cast<uint16_t>(std::stoi(m[1]));
          return true;
        },
        60s))
        << agent_->Stderr();
  }
  void TearDown() override {
    if (agent_ && agent_->Running()) {
      agent_->Signal(SIGTERM);
      auto rc = agent_->Wait(30s);
      EXPECT_TRUE(rc.has_value());
    }
    if (HasFailure() && agent_) std::cerr << "agent stderr:\n" << agent_->Stderr() << "\n";
  }

  std::unique_ptr<http::Client> Connect() {
    auto c = http::Client::Connect("127.0.0.1", port_, {.timeout = 60s, .tls = client_tls_});
    EXPECT_TRUE(c) << (c ? "" : c.error().message);
    return c ? std::move(*c) : nullptr;
  }
  http::Headers Auth(std::string token = kPerWorker, std::string id = kWorker) {
    return {{"X-Worker-ID", id}, {"X-Worker-Token", token}, {"Content-Type", "application/json"}};
  }
  http::Response Post(const std::string& body, http::Headers headers = {}) {
    if (headers.empty()) headers = Auth();
    auto c = Connect();
    auto r = c->Send({.method = "POST", .target = "/rpc", .headers = headers, .body = body});
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : http::Response{.status = 0};
  }
  // Calls `method` and returns (status, body as JSON).
  std::pair<unsigned, json> Call(const std::string& method, json params,
                                 std::optional<json> lease = std::nullopt) {
    json env = {{"id", "it-1"}, {"method", method}, {"worker_id", kWorker}, {"params", params}};
    if (lease) env["lease"] = *lease;
    auto r = Post(env.dump());
    return {r.status, json::parse(r.body, nullptr, false)};
  }
  json Lease(std::string resource, int64_t gen, std::string holder = kWorker,
             std::string expires = "2099-01-01T00:00:00Z") {
    return {{"resource_id", resource},
            {"holder_id", holder},
            {"generation", gen},
            {"expires_at", expires}};
  }
  // POST /rpc `worker.exec_stream` as NDJSON (X-Worker-Stream: ndjson, and `extra` headers)
  // on `c`: each piece of the body goes to `on_data`, which returns false to hang up.
  Result<http::Response> ExecStreamNdjson(http::Client& c, const std::string& id, json params,
                                          const std::function<bool(std::string_view)>& on_data,
                                          const http::Headers& extra = {}) {
    http::Headers h = Auth();
    h.emplace_back("X-Worker-Stream", "ndjson");
    h.insert(h.end(), extra.begin(), extra.end());
    json env = {{"id", id}, {"method", "worker.exec_stream"}, {"params", std::move(params)}};
    return c.SendStreaming({.method = "POST", .target = "/rpc", .headers = h, .body = env.dump()},
                           on_data);
  }
  // An on_data for ExecStreamNdjson that keeps the whole body in `all`.
  static std::function<bool(std::string_view)> AppendTo(std::string& all) {
    return [&all](std::string_view d) {
      all += d;
      return true;
    };
  }
  void Spawn(const std::string& id, int64_t gen = 1) {
    auto [st, b] = Call("worker.spawn", {{"sandbox_id", id}}, Lease(id, gen));
    ASSERT_EQ(st, 200u) << b.dump();
  }

  TempDir dir_;
  std::unique_ptr<ChildProcess> agent_;
  uint16_t port_ = 0;
  std::optional<http::ClientTls> client_tls_;
};

TEST_F(WorkerRpcTest, HealthAndEveryMethod) {
  auto c = Connect();
  auto h = c->Send({.method = "GET", .target = "/health"});
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}, {"worker_id", kWorker}}));

  auto [st, spawn] =
      Call("worker.spawn", {{"sandbox_id", "sb-1"}, {"owner_id", "o1"}, {"metadata", {{"k", "v"}}}},
           Lease("sb-1", 1));
  ASSERT_EQ(st, 200u) << spawn.dump();
  EXPECT_EQ(spawn["id"], "it-1");
  EXPECT_EQ(spawn["worker_id"], kWorker);
  EXPECT_FALSE(spawn.contains("error"));
  EXPECT_EQ(spawn["result"]["sandbox_id"], "sb-1");
  EXPECT_EQ(spawn["result"]["state"], "running");
  EXPECT_EQ(spawn["result"]["metadata"]["k"], "v");
  EXPECT_FALSE(spawn["result"]["runtime_id"].get<std::string>().empty());

  auto [s2, status] = Call("worker.status", {{"sandbox_id", "sb-1"}});
  EXPECT_EQ(s2, 200u);
  EXPECT_EQ(status["result"]["state"], "running");

  auto [s3, w] = Call(
      "worker.file_write",
      {{"sandbox_id", "sb-1"}, {"path", "dir/a.txt"}, {"content", "aGVsbG8="}, {"mode", "0640"}});
  ASSERT_EQ(s3, 200u) << w.dump();
  auto [s4, rd] = Call("worker.file_read", {{"sandbox_id", "sb-1"}, {"path", "dir/a.txt"}});
  ASSERT_EQ(s4, 200u) << rd.dump();
  EXPECT_EQ(rd["result"]["content"], "aGVsbG8=");
  EXPECT_EQ(rd["result"]["sandbox_id"], "sb-1");
  auto [s5, st5] = Call("worker.file_stat", {{"sandbox_id", "sb-1"}, {"path", "dir/a.txt"}});
  ASSERT_EQ(s5, 200u) << st5.dump();
  EXPECT_EQ(st5["result"]["file"]["size"], 5);
  EXPECT_EQ(st5["result"]["file"]["mode"], "0640");
  EXPECT_EQ(st5["result"]["file"]["is_dir"], false);
  // 19 bytes, 28 base64 characters: sizes where a fresh string reallocates (libstdc++ 12's
  // resize_and_overwrite once made both 30 bytes long). Vector from Python's base64 module.
  auto [s5w, fox] = Call(
      "worker.file_write",
      {{"sandbox_id", "sb-1"}, {"path", "fox.txt"}, {"content", "VGhlIHF1aWNrIGJyb3duIGZveA=="}});
  ASSERT_EQ(s5w, 200u) << fox.dump();
  EXPECT_EQ(fox["result"]["size"], 19);
  auto [s5r, foxr] = Call("worker.file_read", {{"sandbox_id", "sb-1"}, {"path", "fox.txt"}});
  ASSERT_EQ(s5r, 200u) << foxr.dump();
  EXPECT_EQ(foxr["result"]["content"], "VGhlIHF1aWNrIGJyb3duIGZveA==");
  auto [s6, ch] =
      Call("worker.file_chmod", {{"sandbox_id", "sb-1"}, {"path", "dir/a.txt"}, {"mode", "0600"}});
  EXPECT_EQ(s6, 200u) << ch.dump();
  auto [s7, mv] =
      Call("worker.file_move",
           {{"sandbox_id", "sb-1"}, {"old_path", "dir/a.txt"}, {"new_path", "dir/b.txt"}});
  EXPECT_EQ(s7, 200u) << mv.dump();
  auto [s8, ls] = Call("worker.file_list", {{"sandbox_id", "sb-1"}, {"path", "dir"}});
  ASSERT_EQ(s8, 200u) << ls.dump();
  ASSERT_EQ(ls["result"]["files"].size(), 1u);
  EXPECT_EQ(ls["result"]["files"][0]["mode"], "0600");
  auto [s9, gl] = Call("worker.file_glob", {{"sandbox_id", "sb-1"}, {"pattern", "dir/*.txt"}});
  ASSERT_EQ(s9, 200u) << gl.dump();
  EXPECT_EQ(gl["result"]["matches"], json({"dir/b.txt"}));

  auto [s10, ex] = Call("worker.exec", {{"sandbox_id", "sb-1"},
                                        {"command", "cat dir/b.txt; echo; echo oops >&2; exit 3"}});
  ASSERT_EQ(s10, 200u) << ex.dump();
  EXPECT_EQ(ex["result"]["exit_code"], 3);
  EXPECT_EQ(ex["result"]["stdout"], "hello\n");
  EXPECT_EQ(ex["result"]["stderr"], "oops\n");
  auto [s11, argv] = Call("worker.exec", {{"sandbox_id", "sb-1"},
                                          {"command", "printf"},
                                          {"args", {"%s|", "a b", "it's"}},
                                          {"mode", "argv"}});
  EXPECT_EQ(argv["result"]["stdout"], "a b|it's|");
  auto [s11b, shell] =
      Call("worker.exec",
           {{"sandbox_id", "sb-1"}, {"command", "printf '%s|'"}, {"args", {"a b", "it's"}}});
  EXPECT_EQ(shell["result"]["stdout"], "a b|it's|");

  auto [s12, buf] =
      Call("worker.exec_stream", {{"sandbox_id", "sb-1"}, {"command", "echo one; echo two >&2"}});
  ASSERT_EQ(s12, 200u) << buf.dump();
  std::string out, err;
  for (const auto& chunk : buf["result"]["chunks"]) {
    (chunk["stream"] == "stdout" ? out : err) += chunk["data"].get<std::string>();
  }
  EXPECT_EQ(out, "one\n");
  EXPECT_EQ(err, "two\n");

  auto [s13, logs] = Call("worker.logs", {{"sandbox_id", "sb-1"}, {"lines", 50}});
  ASSERT_EQ(s13, 200u) << logs.dump();
  EXPECT_TRUE(logs["result"]["lines"].is_array());

  auto [s14, del] =
      Call("worker.file_delete", {{"sandbox_id", "sb-1"}, {"path", "dir"}, {"recursive", true}});
  EXPECT_EQ(s14, 200u) << del.dump();
  auto [s15, gone] = Call("worker.file_stat", {{"sandbox_id", "sb-1"}, {"path", "dir"}});
  EXPECT_EQ(s15, 404u) << gone.dump();

  // No control plane is configured: the lease is checked, then renewal fails with 409.
  auto [s16, rn] =
      Call("worker.renew_lease", {{"resource_id", "sb-1"}, {"ttl", "5m"}}, Lease("sb-1", 1));
  EXPECT_EQ(s16, 409u) << rn.dump();
  auto [s17, hb] = Call("worker.heartbeat", json::object());
  EXPECT_EQ(s17, 400u);

  auto [s18, d] = Call("worker.destroy", {{"sandbox_id", "sb-1"}}, Lease("sb-1", 2));
  ASSERT_EQ(s18, 200u) << d.dump();
  EXPECT_EQ(d["result"]["state"], "destroyed");
  auto [s19, st19] = Call("worker.exec", {{"sandbox_id", "sb-nope"}, {"command", "true"}});
  EXPECT_EQ(s19, 404u) << st19.dump();
}

TEST_F(WorkerRpcTest, EveryAuthFailureIs401AndNeverEchoesTheToken) {
  const std::string body = R"({"id":"a","method":"worker.heartbeat"})";
  auto expect = [&](http::Headers h, const std::string& fragment, const std::string& token = "") {
    auto r = Post(body, h);
    EXPECT_EQ(r.status, 401u) << fragment << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_EQ(j["code"], "UNAUTHORIZED");
    EXPECT_NE(r.body.find(fragment), std::string::npos) << r.body;
    if (!token.empty()) {
      EXPECT_EQ(r.body.find(token), std::string::npos) << r.body;
    }
  };
  // Accepted (400 = worker.heartbeat is not served, after auth passed).
  EXPECT_EQ(Post(body).status, 400u);
  std::string good = OpensslToken(Claims(), kKey);
  EXPECT_EQ(Post(body, Auth(good)).status, 400u);
  EXPECT_EQ(Post(body, {{"X-Worker-ID", kWorker}, {"Authorization", "Bearer " + good}}).status,
            400u);
  EXPECT_EQ(Post(body, Auth(OpensslToken(Claims(), kOldKey))).status, 400u);  // rotation key

  expect({{"X-Worker-Token", kPerWorker}}, "missing X-Worker-ID");
  expect({{"X-Worker-ID", kWorker}}, "missing worker token");
  expect(Auth("wrong-token-zzzzzz"), "does not match", "wrong-token-zzzzzz");
  expect(Auth(kShared), "shared token is refused", kShared);
  expect(Auth(kPerWorker, "worker-b"), "is not this worker");
  auto c = Claims();
  c["exp"] = Now() - 5;
  c["iat"] = Now() - 100;
  auto t = OpensslToken(c, kKey);
  expect(Auth(t), "expired", t);
  c = Claims();
  c["nbf"] = Now() + 120;
  expect(Auth(OpensslToken(c, kKey)), "not valid before");
  c = Claims();
  c["iat"] = Now() + 120;
  c["exp"] = Now() + 400;
  expect(Auth(OpensslToken(c, kKey)), "issued in the future");
  c = Claims();
  c["exp"] = Now() + 16 * 60;
  expect(Auth(OpensslToken(c, kKey)), "lifetime");
  expect(Auth(OpensslToken(Claims(kWorker, "worker:control-plane"), kKey)), "audience");
  c = Claims();
  c["jti"] = "revoked-jti";
  expect(Auth(OpensslToken(c, kKey)), "revoked");
  expect(Auth(OpensslToken(Claims("worker-b"), kKey)), "not this worker");
  expect(Auth(OpensslToken(Claims(), "some-other-key-eeeeeeee")), "signature");
  std::string tampered = good;
  tampered[tampered.size() - 3] = tampered[tampered.size() - 3] == 'A' ? 'B' : 'A';
  expect(Auth(tampered), "signature", tampered);
  // The envelope names another worker: 403.
  auto r = Post(R"({"id":"a","method":"worker.status","worker_id":"worker-b"})");
  EXPECT_EQ(r.status, 403u) << r.body;
}

TEST_F(WorkerRpcTest, SigningKeyFileIsReadAgainWhenItChanges) {
  EXPECT_EQ(Post(R"({"method":"worker.heartbeat"})", Auth(OpensslToken(Claims(), kKey))).status,
            400u);
  WriteText(dir_ / "signing.key.new", "a-brand-new-key-ffffffffffff\n");
  ASSERT_EQ(::rename((dir_ / "signing.key.new").c_str(), (dir_ / "signing.key").c_str()), 0);
  EXPECT_EQ(Post(R"({"method":"worker.heartbeat"})",
                 Auth(OpensslToken(Claims(), "a-brand-new-key-ffffffffffff")))
                .status,
            400u);
  EXPECT_EQ(Post(R"({"method":"worker.heartbeat"})", Auth(OpensslToken(Claims(), kKey))).status,
            401u);
}

TEST_F(WorkerRpcTest, LeaseFailuresAre403NamingTheRule) {
  Spawn("sb-l", 5);
  auto expect = [&](const std::string& method, json lease, const std::string& fragment) {
    auto [st, b] = Call(method, {{"sandbox_id", "sb-l"}}, lease);
    EXPECT_EQ(st, 403u) << method << " " << b.dump();
    EXPECT_EQ(b["code"], "LEASE_REJECTED") << b.dump();
    EXPECT_NE(b["error"].get<std::string>().find(fragment), std::string::npos) << b.dump();
  };
  expect("worker.destroy", Lease("sb-l", 6, "worker-other"), "holder");
  expect("worker.destroy", Lease("sb-l", 6, kWorker, "2020-01-01T00:00:00Z"), "expire");
  expect("worker.destroy", Lease("sb-l", 4), "generation");
  expect("worker.destroy", Lease("sb-other", 6), "resource");
  auto [st, b] = Call("worker.destroy", {{"sandbox_id", "sb-l"}});
  EXPECT_EQ(st, 403u) << b.dump();
  auto [sp, spb] = Call("worker.spawn", {{"sandbox_id", "sb-m"}}, Lease("sb-m", 1, "worker-x"));
  EXPECT_EQ(sp, 403u) << spb.dump();
  // A mutating file call that carries a stale lease is refused too.
  auto [fw, fwb] = Call("worker.file_write",
                        {{"sandbox_id", "sb-l"}, {"path", "x"}, {"content", ""}}, Lease("sb-l", 1));
  EXPECT_EQ(fw, 403u) << fwb.dump();
  // The right lease still works.
  auto [ok, okb] = Call("worker.destroy", {{"sandbox_id", "sb-l"}}, Lease("sb-l", 5));
  EXPECT_EQ(ok, 200u) << okb.dump();
}

TEST_F(WorkerRpcTest, PathEscapesThroughEveryFileMethodAreRefused) {
  Spawn("sb-p");
  WriteText(dir_ / "outside.txt", "secret");
  auto [st, b] = Call("worker.exec", {{"sandbox_id", "sb-p"},
                                      {"command", "ln -s " + dir_.path() + " out && ln -s " +
                                                      dir_.path() + "/outside.txt f"}});
  ASSERT_EQ(st, 200u) << b.dump();
  auto refused = [&](const std::string& method, json params) {
    params["sandbox_id"] = "sb-p";
    auto [s, r] = Call(method, params);
    EXPECT_TRUE(s == 403u || s == 400u)
        << method << " " << params.dump() << " -> " << s << " " << r.dump();
    return r;
  };
  for (const std::string& bad :
       std::vector<std::string>{"../x", "a/../../x", "out/outside.txt",
                                "../../../../../../../.." + dir_.path() + "/outside.txt"}) {
    refused("worker.file_read", {{"path", bad}});
    refused("worker.file_write", {{"path", bad}, {"content", "eA=="}});
    refused("worker.file_list", {{"path", bad}});
    refused("worker.file_stat", {{"path", bad}});
    refused("worker.file_delete", {{"path", bad}});
    refused("worker.file_chmod", {{"path", bad}, {"mode", "0777"}});
    refused("worker.file_move", {{"old_path", bad}, {"new_path", "y"}});
    refused("worker.file_move", {{"old_path", "f"}, {"new_path", bad}});
  }
  // An absolute path is taken relative to the root: the host's file is not what is read.
  auto [as, ar] =
      Call("worker.file_read", {{"sandbox_id", "sb-p"}, {"path", dir_.path() + "/outside.txt"}});
  EXPECT_EQ(as, 404u) << ar.dump();
  // A symlink inside the root that points outside is not followed.
  ::chmod((dir_ / "outside.txt").c_str(), 0600);
  refused("worker.file_read", {{"path", "f"}});
  refused("worker.file_chmod", {{"path", "f"}, {"mode", "0777"}});
  refused("worker.file_list", {{"path", "out"}});
  // A write replaces the link itself (atomic rename inside the root), never its target.
  auto [ws, wr] =
      Call("worker.file_write", {{"sandbox_id", "sb-p"}, {"path", "f"}, {"content", "eA=="}});
  EXPECT_TRUE(ws == 200u || ws == 403u) << wr.dump();
  struct stat st_out {};
  ASSERT_EQ(::stat((dir_ / "outside.txt").c_str(), &st_out), 0);
  EXPECT_EQ(st_out.st_mode & 07777, 0600u);
  // A glob never matches outside the root.
  auto [gs, g] = Call("worker.file_glob", {{"sandbox_id", "sb-p"}, {"pattern", "../*"}});
  if (gs == 200u) {
    EXPECT_TRUE(g["result"]["matches"].empty()) << g.dump();
  } else {
    EXPECT_TRUE(gs == 400u || gs == 403u) << g.dump();
  }
  auto [s, r] = Call("worker.file_read", {{"sandbox_id", "sb-p"}, {"path", "../../x"}});
  EXPECT_EQ(r["code"], "PATH_OUTSIDE_ROOT") << r.dump();
  // Nothing outside was read, written or changed.
  EXPECT_EQ(ReadText(dir_ / "outside.txt"), "secret");
}

TEST_F(WorkerRpcTest, BadInput) {
  auto r = Post("{not json");
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(json::parse(r.body)["code"], "BAD_REQUEST");
  r = Post(R"({"method":7})");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("method must be a string"), std::string::npos);
  r = Post(R"({"id":"u","method":"worker.fly"})");
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(json::parse(r.body)["error"], "unknown worker method: worker.fly");
  Spawn("sb-x");
  auto [st, b] = Call("worker.exec", {{"sandbox_id", "sb-x"}, {"command", 5}});
  EXPECT_EQ(st, 400u) << b.dump();
  auto c = Connect();
  auto g = c->Send({.method = "GET", .target = "/rpc", .headers = Auth()});
  EXPECT_EQ(g->status, 405u);
  g = c->Send({.method = "GET", .target = "/elsewhere"});
  EXPECT_EQ(g->status, 404u);

  // A 65 MiB body is refused from its Content-Length, before it is read.
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::socket s(io);
  s.connect({net::ip::make_address("127.0.0.1"), port_});
  std::string head = "POST /rpc HTTP/1.1\r\nHost: x\r\nX-Worker-ID: worker-a\r\nX-Worker-Token: " +
                     std::string(kPerWorker) +
                     "\r\nContent-Length: " + std::to_string(65ull << 20) + "\r\n\r\n";
  net::write(s, net::buffer(head + std::string(1 << 20, 'x')));
  std::string answer;
  char buf[4096];
  boost::system::error_code ec;
  while (answer.find("\r\n\r\n") == std::string::npos) {
    size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    answer.append(buf, n);
  }
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 413")) << answer.substr(0, 100);
}

// A file of tens of MB through the real door both ways: its request body is read straight
// into place, and file_read's answer is written as pieces — the envelope's halves around the
// base64 text (DumpJsonPieces). The text is OpenSSL's encoding, not the door's.
TEST_F(WorkerRpcTest, AFileOfTensOfMegabytesGoesThereAndBackWhole) {
  Spawn("sb-big");
  std::string bytes((12u << 20) + 1, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  std::string text(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  text.resize(static_cast<size_t>(EVP_EncodeBlock(
      reinterpret_cast<unsigned char*>(text.data()),
      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()))));
  ASSERT_GE(text.size(), 16u << 20);  // past the 8 MiB from which the answer is in pieces
  auto [sw, w] =
      Call("worker.file_write", {{"sandbox_id", "sb-big"}, {"path", "big.bin"}, {"content", text}},
           Lease("sb-big", 1));
  ASSERT_EQ(sw, 200u) << w.dump().substr(0, 300);
  EXPECT_EQ(w["result"]["size"], bytes.size());
  auto [sr, r] = Call("worker.file_read", {{"sandbox_id", "sb-big"}, {"path", "big.bin"}});
  ASSERT_EQ(sr, 200u) << r.dump().substr(0, 300);
  EXPECT_EQ(r["result"]["size"], bytes.size());
  EXPECT_EQ(r["result"]["path"], "big.bin");
  EXPECT_EQ(r["result"]["sandbox_id"], "sb-big");
  EXPECT_EQ(r["id"], "it-1");
  EXPECT_TRUE(r["result"]["content"] == text) << "the text read back differs";
}

// Issue 14: a fast producer's output goes out in few large NDJSON lines (the door's 1 MiB
// output window, a 2 ms linger and a 1 MiB stdout pipe) instead of one line per 32 KiB pipe
// read, and every byte arrives in order.
TEST_F(WorkerRpcTest, NdjsonStreamOfAFastProducerGoesOutInLargeLines) {
  Spawn("sb-big");
  auto c = Connect();
  constexpr size_t kBytes = 4u << 20;
  std::string all;
  auto r = ExecStreamNdjson(
      *c, "big-1",
      {{"sandbox_id", "sb-big"}, {"command", "yes abcdefghij | head -c " + std::to_string(kBytes)}},
      AppendTo(all));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200u);
  std::istringstream lines(all);
  std::string line, out;
  size_t stdout_lines = 0;
  json last;
  while (std::getline(lines, line)) {
    last = json::parse(line, nullptr, false);
    ASSERT_FALSE(last.is_discarded()) << "not one JSON document per line";
    if (last["result"].contains("stream")) {
      ASSERT_EQ(last["result"]["stream"], "stdout");
      out += last["result"]["data"].get<std::string>();
      ++stdout_lines;
    }
  }
  EXPECT_EQ(last["result"], json({{"exit_code", 0}, {"done", true}}));
  std::string expected;
  while (expected.size() < kBytes)
    expected += "abcdefghij\n";
  expected.resize(kBytes);
  ASSERT_EQ(out.size(), kBytes);
  EXPECT_TRUE(out == expected) << "the output arrived changed or out of order";
  // One line per 32 KiB pipe read would be 128 lines or more. Joined, a line waits up to
  // 2 ms to fill the 1 MiB window, so an idle machine sends 4 to 10; 100 leaves room for a
  // loaded one (a producer slower than 20 MB/s) without letting one line per read pass.
  EXPECT_LE(stdout_lines, 100u);
  EXPECT_GE(stdout_lines, 4u) << "no line may exceed the 1 MiB window";
}

TEST_F(WorkerRpcTest, NdjsonStreamLineByLineAndTimeout) {
  Spawn("sb-s");
  const http::Headers trace = {{"X-Request-ID", "trace-9"}};
  auto c = Connect();
  std::string all;
  auto r = ExecStreamNdjson(
      *c, "st-1",
      {{"sandbox_id", "sb-s"},
       {"command", "for i in 1 2 3; do echo line$i; sleep 0.05; done; echo e >&2"}},
      AppendTo(all), trace);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->content_type, "application/x-ndjson");
  EXPECT_EQ(http::FindHeader(r->headers, "X-Worker-Stream").value_or(""), "ndjson");
  EXPECT_EQ(http::FindHeader(r->headers, "X-Request-ID").value_or(""), "trace-9");
  ASSERT_TRUE(all.ends_with("\n"));
  std::istringstream lines(all);
  std::string line, out, err;
  std::vector<json> docs;
  while (std::getline(lines, line)) {
    auto j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not one JSON document per line: " << line;
    EXPECT_EQ(j["id"], "st-1");
    EXPECT_EQ(j["worker_id"], kWorker);
    docs.push_back(j);
  }
  ASSERT_GE(docs.size(), 3u);
  for (size_t i = 0; i + 1 < docs.size(); ++i) {
    const auto& res = docs[i]["result"];
    (res["stream"] == "stdout" ? out : err) += res["data"].get<std::string>();
  }
  EXPECT_EQ(out, "line1\nline2\nline3\n");
  EXPECT_EQ(err, "e\n");
  EXPECT_EQ(docs.back()["result"], json({{"exit_code", 0}, {"done", true}}));

  // A timeout after some output: the last line is the error.
  all.clear();
  r = ExecStreamNdjson(
      *c, "st-2", {{"sandbox_id", "sb-s"}, {"command", "echo start; sleep 30"}, {"timeout", "1s"}},
      AppendTo(all), trace);
  ASSERT_TRUE(r);
  auto last = all.substr(all.rfind('\n', all.size() - 2) + 1);
  auto lj = json::parse(last);
  EXPECT_EQ(lj["code"], "TIMED_OUT") << all;
  EXPECT_TRUE(lj.contains("error"));
  // Non-streaming exec past its timeout: 504.
  auto [st, b] =
      Call("worker.exec", {{"sandbox_id", "sb-s"}, {"command", "sleep 30"}, {"timeout", "500ms"}});
  EXPECT_EQ(st, 504u) << b.dump();
}

TEST_F(WorkerRpcTest, ClientVanishingMidStreamKillsTheCommand) {
  Spawn("sb-v");
  auto c = Connect();
  std::string first;
  auto r =
      ExecStreamNdjson(*c, "v-1", {{"sandbox_id", "sb-v"}, {"command", "echo $$; exec sleep 120"}},
                       [&](std::string_view d) {
                         first += d;
                         // hang up after the first line
                         return first.find('\n') == std::string::npos;
                       });
  ASSERT_TRUE(r);
  auto j = json::parse(first.substr(0, first.find('\n')));
  const pid_t pid = std::stoi(j["result"]["data"].get<std::string>());
  ASSERT_GT(pid, 1);
  // The process is gone (killed, and reaped by the agent) within the kill grace.
  EXPECT_TRUE(WaitUntil([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; }, 20s))
      << "pid " << pid << " still exists";
}

TEST_F(WorkerRpcTest, DestroyAnswersOnlyOnceTheSandboxsCommandsAreGone) {
  Spawn("sb-d");
  // Ignores SIGTERM (and so does every child it starts) and keeps writing into its workspace
  // by absolute path until the kill grace (1 s) ends it with SIGKILL.
  const std::string command =
      "trap '' TERM; echo $$; while :; do echo x >> \"$PWD/out\"; sleep 0.05; done";
  std::atomic<pid_t> pid{0};
  std::string all;
  std::thread streamer([&] {
    auto c = Connect();
    if (!c) return;
    (void)ExecStreamNdjson(*c, "d-1", {{"sandbox_id", "sb-d"}, {"command", command}},
                           [&](std::string_view d) {
                             all += d;
                             if (pid == 0 && all.find('\n') != std::string::npos) {
                               auto first = json::parse(all.substr(0, all.find('\n')));
                               pid = std::stoi(first["result"]["data"].get<std::string>());
                             }
                             return true;
                           });
  });
  ASSERT_TRUE(WaitUntil([&] { return pid.load() > 1; }, 30s));
  const std::string sandbox_dir = dir_.path() + "/data/sandboxes/sb-d";
  ASSERT_TRUE(std::filesystem::exists(sandbox_dir + "/root/out"));
  auto [st, b] = Call("worker.destroy", {{"sandbox_id", "sb-d"}}, Lease("sb-d", 1));
  ASSERT_EQ(st, 200u) << b.dump();
  EXPECT_EQ(b["result"]["state"], "destroyed") << b.dump();
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1) << "pid " << pid << " outlived the destroy's answer";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(std::filesystem::exists(sandbox_dir));
  streamer.join();
  EXPECT_NE(all.find("\"CANCELLED\""), std::string::npos) << all.substr(0, 2000);
  // Spawned again under the id, the sandbox starts empty and stays so.
  auto [st2, b2] = Call("worker.spawn", {{"sandbox_id", "sb-d"}}, Lease("sb-d", 2));
  ASSERT_EQ(st2, 200u) << b2.dump();
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(std::filesystem::is_empty(sandbox_dir + "/root"));
}

TEST_F(WorkerRpcTest, ShutdownDrains) {
  Spawn("sb-d");
  auto [st, b] = Call("worker.shutdown", json::object());
  ASSERT_EQ(st, 200u);
  EXPECT_EQ(b["result"]["status"], "draining");
  auto c = Connect();
  auto h = c->Send({.method = "GET", .target = "/health"});
  EXPECT_EQ(json::parse(h->body)["status"], "draining");
  auto [sp, spb] = Call("worker.spawn", {{"sandbox_id", "sb-e"}}, Lease("sb-e", 1));
  EXPECT_EQ(sp, 503u) << spb.dump();
  // Existing sandboxes keep working.
  auto [s2, b2] = Call("worker.status", {{"sandbox_id", "sb-d"}});
  EXPECT_EQ(s2, 200u) << b2.dump();
}

// systemctl reload (SIGHUP): the config file is read again; what cannot change live is named,
// a broken file changes nothing, and the agent keeps serving throughout.
TEST_F(WorkerRpcTest, SighupReloadsTheConfigAndKeepsServing) {
  auto original = ReadFile(dir_ / "agent.yaml", 1 << 20);
  ASSERT_TRUE(original);
  WriteText(dir_ / "agent.yaml", *original + "  max_body_bytes: 2097152\n");  // under worker:
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return agent_->Stderr().find("changes in worker take effect at the next restart") !=
               std::string::npos;
      },
      20s))
      << agent_->Stderr();
  WriteText(dir_ / "agent.yaml", "node_id: [not, a, string\n");
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(WaitUntil(
      [&] { return agent_->Stderr().find("config not reloaded") != std::string::npos; }, 20s))
      << agent_->Stderr();
  EXPECT_TRUE(agent_->Running());
  auto c = Connect();
  auto h = c->Send({.method = "GET", .target = "/health"});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200u);
  WriteText(dir_ / "agent.yaml", *original);  // TearDown's SIGTERM stops it as usual
}

// A control plane on loopback (in this process): records heartbeats, renews leases.
class FakeControlPlane : public http::Handler {
 public:
  FakeControlPlane() : server_(io_, {}, *this) {
    EXPECT_TRUE(server_.Listen("127.0.0.1:0"));
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeControlPlane() override {
    server_.Stop();
    work_.reset();
    io_.stop();
    thread_.join();
  }
  void Handle(std::shared_ptr<http::Exchange> ex) override {
    const auto& r = ex->request();
    std::lock_guard lock(mu_);
    requests_.push_back(r);
    auto body = json::parse(r.body, nullptr, false);
    if (r.target.ends_with("/renew")) {
      json lease = body["lease"];
      lease["generation"] = lease["generation"].get<int64_t>() + 1;
      ex->Respond({.body = json({{"lease", lease}}).dump()});
      return;
    }
    ex->Respond({.body = "{}"});
  }
  uint16_t port() const { return server_.port(); }
  std::vector<http::Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  http::Server server_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<http::Request> requests_;
};

class WorkerRpcControlPlaneTest : public WorkerRpcTest {
 protected:
  void SetUp() override {
    StartAgent("  control_plane_url: http://127.0.0.1:" + std::to_string(cp_.port()) +
               "\n  heartbeat_interval: 1s\n");
  }
  FakeControlPlane cp_;
};

TEST_F(WorkerRpcControlPlaneTest, HeartbeatsAndLeaseRenewalThroughTheControlPlane) {
  // Heartbeats carry the static per-worker token (configured, so nothing is minted).
  ASSERT_TRUE(WaitUntil([&] { return cp_.requests().size() >= 2; }, 20s));
  auto hb = cp_.requests()[0];
  EXPECT_EQ(hb.method, "POST");
  EXPECT_EQ(hb.target, "/api/v1/worker/worker-a/heartbeat");
  EXPECT_EQ(http::FindHeader(hb.headers, "X-Worker-ID").value_or(""), kWorker);
  EXPECT_EQ(http::FindHeader(hb.headers, "X-Worker-Token").value_or(""), kPerWorker);
  auto body = json::parse(hb.body);
  EXPECT_EQ(body["status"], "online");
  EXPECT_EQ(body["capacity"]["rpc_url"], "http://127.0.0.1:" + std::to_string(port_));
  EXPECT_TRUE(body["capabilities"].is_array());
  EXPECT_EQ(body["providers"], json({"local"}));

  Spawn("sb-r", 3);
  auto [st, r] =
      Call("worker.renew_lease", {{"resource_id", "sb-r"}, {"ttl", "5m"}}, Lease("sb-r", 3));
  ASSERT_EQ(st, 200u) << r.dump();
  EXPECT_EQ(r["result"]["lease"]["generation"], 4);
  EXPECT_EQ(r["result"]["lease"]["holder_id"], kWorker);
  bool renewed = false;
  for (const auto& req : cp_.requests()) {
    if (req.target == "/api/v1/worker/worker-a/leases/sb-r/renew") {
      renewed = true;
      auto b = json::parse(req.body);
      EXPECT_EQ(b["ttl"], "5m");
      EXPECT_EQ(b["lease"]["generation"], 3);
    }
  }
  EXPECT_TRUE(renewed);
  // The renewed generation is now the highest: the old one is stale.
  auto [d, db] = Call("worker.destroy", {{"sandbox_id", "sb-r"}}, Lease("sb-r", 3));
  EXPECT_EQ(d, 403u) << db.dump();

  // After worker.shutdown the heartbeats say draining.
  Call("worker.shutdown", json::object());
  const size_t before = cp_.requests().size();
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto all = cp_.requests();
        for (size_t i = before; i < all.size(); ++i) {
          if (all[i].target.ends_with("/heartbeat") &&
              json::parse(all[i].body)["status"] == "draining") {
            return true;
          }
        }
        return false;
      },
      20s));
}

class WorkerRpcTlsTest : public WorkerRpcTest {
 protected:
  void SetUp() override {
    const std::string d = dir_.path();
    auto sh = [&](const std::string& cmd) {
      auto r = RunCommand({"/bin/sh", "-c", "cd '" + d + "' && " + cmd + " >/dev/null 2>&1"});
      ASSERT_EQ(r.exit_code, 0) << cmd << r.err;
    };
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    for (std::string ca : {"ca", "other"}) {
      sh("/usr/bin/openssl req -x509 " + ec + " -keyout " + ca + ".key -out " + ca +
         ".pem -days 2 -subj /CN=" + ca);
    }
    for (auto [name, ca] : std::vector<std::pair<std::string, std::string>>{
             {"server", "ca"}, {"client", "ca"}, {"stranger", "other"}}) {
      sh("/usr/bin/openssl req " + ec + " -keyout " + name + ".key -out " + name +
         ".csr -subj /CN=" + name + " && printf 'subjectAltName=IP:127.0.0.1\\n' > " + name +
         ".ext && /usr/bin/openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
         ".key -CAcreateserial -out " + name + ".pem -days 2 -extfile " + name + ".ext");
    }
    client_tls_ = http::ClientTls{
        .ca_file = d + "/ca.pem", .cert_file = d + "/client.pem", .key_file = d + "/client.key"};
    StartAgent("  rpc_tls:\n    enabled: true\n    server_cert_file: " + d +
               "/server.pem\n    server_key_file: " + d + "/server.key\n    client_ca_file: " + d +
               "/ca.pem\n");
  }
};

TEST_F(WorkerRpcTlsTest, MutualTlsRequiredAndRefused) {
  auto [st, b] = Call("worker.status", {{"sandbox_id", "none"}});
  EXPECT_EQ(st, 404u) << b.dump();  // through mTLS, authenticated, answered
  auto send = [&](http::ClientTls tls) -> bool {
    auto c = http::Client::Connect("127.0.0.1", port_, {.timeout = 10s, .tls = tls});
    if (!c) return false;
    auto r = (*c)->Send({.method = "GET", .target = "/health"});
    return r.has_value() && r->status == 200u;
  };
  const std::string d = dir_.path();
  EXPECT_TRUE(send(*client_tls_));
  EXPECT_FALSE(send({.ca_file = d + "/ca.pem"}));  // no client certificate
  EXPECT_FALSE(send({.ca_file = d + "/ca.pem",
                     .cert_file = d + "/stranger.pem",
                     .key_file = d + "/stranger.key"}));
  // Plain HTTP gets nothing.
  auto plain = http::Client::Connect("127.0.0.1", port_, {.timeout = 10s});
  ASSERT_TRUE(plain);
  EXPECT_FALSE((*plain)->Send({.method = "GET", .target = "/health"}));
}

TEST_F(WorkerRpcTlsTest, SighupReloadsTheServerCertificate) {
  const std::string d = dir_.path();
  auto health = [&](const std::string& ca) {
    auto c = http::Client::Connect("127.0.0.1", port_,
                                   {.timeout = 10s,
                                    .tls = http::ClientTls{.ca_file = d + "/" + ca,
                                                           .cert_file = d + "/client.pem",
                                                           .key_file = d + "/client.key"}});
    if (!c) return false;
    auto r = (*c)->Send({.method = "GET", .target = "/health"});
    return r.has_value() && r->status == 200u;
  };
  ASSERT_TRUE(health("ca.pem"));
  // A new server certificate, from the other CA, replaces the files.
  auto r = RunCommand(
      {"/bin/sh", "-c",
       "cd '" + d +
           "' && /usr/bin/openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout new.key -out new.csr -subj /CN=new >/dev/null 2>&1 && /usr/bin/openssl x509 "
           "-req -in new.csr -CA other.pem -CAkey other.key -CAcreateserial -out new.pem -days 2 "
           "-extfile server.ext >/dev/null 2>&1 && mv new.key server.key && mv new.pem "
           "server.pem"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(health("ca.pem"));  // not reloaded yet
  agent_->Signal(SIGHUP);
  EXPECT_TRUE(WaitUntil([&] { return health("other.pem"); }, 20s)) << agent_->Stderr();
  EXPECT_FALSE(health("ca.pem"));
  EXPECT_TRUE(agent_->Running());  // SIGHUP reloads, it does not stop the agent
  EXPECT_NE(agent_->Stderr().find("TLS certificates reloaded"), std::string::npos);
}

TEST(WorkerRpcCli, TokenCommandsAndListenUsage) {
  TempDir dir;
  WriteText(dir / "key", "cli-signing-key-gggggggggggg\n");
  auto issue = RunCommand({AgentBin(), "token", "issue", "worker-q", "--ttl", "5m", "--audience",
                           "worker:rpc", "--signing-key-file", dir / "key", "--format", "json"});
  ASSERT_EQ(issue.exit_code, 0) << issue.err;
  auto j = json::parse(issue.out);
  const std::string token = j["token"];
  EXPECT_EQ(j["worker_id"], "worker-q");
  EXPECT_EQ(j["aud"], "worker:rpc");
  EXPECT_EQ(j["exp"].get<int64_t>() - j["iat"].get<int64_t>(), 300);
  EXPECT_FALSE(j["jti"].get<std::string>().empty());
  // The issued token verifies with the openssl HMAC of its signing input.
  const std::string input = token.substr(0, token.rfind('.'));
  auto mac = RunCommand(
      {"/usr/bin/openssl", "dgst", "-sha256", "-hmac", "cli-signing-key-gggggggggggg", "-binary"},
      {}, 30s, input);
  EXPECT_EQ(token.substr(token.rfind('.') + 1), B64Url(mac.out));

  auto inspect = RunCommand({AgentBin(), "token", "inspect", token});
  EXPECT_EQ(inspect.exit_code, 0);
  EXPECT_NE(inspect.out.find("UNVERIFIED"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find(j["jti"].get<std::string>()), std::string::npos);

  auto ok = RunCommand({AgentBin(), "token", "verify", token, "--worker-id", "worker-q",
                        "--audience", "worker:rpc", "--signing-key-file", dir / "key"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("valid"), std::string::npos);
  auto other = RunCommand({AgentBin(), "token", "verify", token, "--worker-id", "worker-z",
                           "--signing-key-file", dir / "key"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("not this worker"), std::string::npos) << other.err;
  auto aud = RunCommand({AgentBin(), "token", "verify", token, "--worker-id", "worker-q",
                         "--audience", "worker:control-plane", "--signing-key-file", dir / "key"});
  EXPECT_EQ(aud.exit_code, 1);
  EXPECT_NE(aud.err.find("audience"), std::string::npos) << aud.err;
  auto too_long = RunCommand({AgentBin(), "token", "issue", "worker-q", "--ttl", "16m",
                              "--signing-key-file", dir / "key"});
  EXPECT_EQ(too_long.exit_code, 2);
  auto plan = RunCommand({AgentBin(), "token", "rotation-plan", "--ttl", "5m"});
  EXPECT_EQ(plan.exit_code, 0);
  EXPECT_NE(plan.out.find("worker_signing_keys"), std::string::npos);
  EXPECT_EQ(plan.out.find("cli-signing-key"), std::string::npos);

  auto bad_listen = RunCommand({AgentBin(), "--listen", "nonsense"});
  EXPECT_EQ(bad_listen.exit_code, 2);
  EXPECT_NE(bad_listen.err.find("--listen"), std::string::npos);
  auto nothing = RunCommand({AgentBin()});
  EXPECT_EQ(nothing.exit_code, 2);
}

}  // namespace
}  // namespace edge::testing
