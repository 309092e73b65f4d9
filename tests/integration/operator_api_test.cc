// The operator ("northbound") API through the real binaries on loopback (wire.md §5.1,
// §5.2): `edge-controller serve` with http.listen, a real enrolled `edge-agent`, user tokens
// minted with `edge-controller user token create`, and GET /v1/edge/nodes with http::Client.
#include <gtest/gtest.h>

#include <regex>

#include "agent/identity/jwt.h"
#include "common/rfc3339.h"
#include "http/client.h"
#include "tests/integration/operator_fixture.h"

namespace edge::testing {
namespace {

using nlohmann::json;

class OperatorApiTest : public OperatorFixture {
 protected:
  void StartController(const std::string& extra_http) { StartControllerWithHttp(extra_http); }
  http::Response Get(const std::string& target, http::Headers headers = {},
                     const std::string& method = "GET") {
    return Http(method, target, "", "", std::move(headers));
  }
  static http::Headers Bearer(const std::string& token) {
    return {{"Authorization", "Bearer " + token}};
  }
  // GET /v1/edge/nodes as `token`: the "nodes" array (null unless 200).
  json Nodes(const std::string& token) {
    auto r = Get("/v1/edge/nodes", Bearer(token));
    EXPECT_EQ(r.status, 200u) << r.body;
    auto j = json::parse(r.body, nullptr, false);
    return r.status == 200 && j.is_object() ? j["nodes"] : json();
  }
};

// 401 UNAUTHENTICATED with WWW-Authenticate: Bearer and a {"code","message"} body.
void Expect401(const http::Response& r, const std::string& what) {
  EXPECT_EQ(r.status, 401u) << what << ": " << r.body;
  EXPECT_EQ(std::string(http::FindHeader(r.headers, "WWW-Authenticate").value_or("")), "Bearer")
      << what;
  auto j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << what << ": " << r.body;
  EXPECT_EQ(j.value("code", ""), "UNAUTHENTICATED") << what;
  EXPECT_FALSE(j.value("message", "").empty()) << what;
}

TEST_F(OperatorApiTest, ListsTheTenantsEnrolledNodeOnlineWithItsTools) {
  EnrollAndStart("edge-01", "labels:\n  agent.device_name: bench-laptop\n");
  const json admin_view = Node("edge-01");
  ASSERT_TRUE(admin_view.is_object());
  const std::string token = UserToken("alice", "default");
  ASSERT_FALSE(token.empty());

  auto r = Get("/v1/edge/nodes", {{"Authorization", "Bearer " + token}, {"X-Request-ID", "op-7"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(std::string(http::FindHeader(r.headers, "X-Request-ID").value_or("")), "op-7");
  auto body = json::parse(r.body);
  ASSERT_EQ(body["nodes"].size(), 1u) << r.body;
  const json n = body["nodes"][0];
  EXPECT_EQ(n["node_id"], "edge-01");
  EXPECT_EQ(n["device_name"], "bench-laptop");
  EXPECT_EQ(n["status"], "online");
  EXPECT_TRUE(ParseRfc3339(n["last_seen"].get<std::string>())) << n["last_seen"];
  ASSERT_TRUE(n["capabilities"].is_array());
  EXPECT_FALSE(n["capabilities"].empty());
  if (admin_view.contains("capabilities") && admin_view["capabilities"].contains("tools")) {
    EXPECT_EQ(n["capabilities"], admin_view["capabilities"]["tools"]);
  }
  EXPECT_EQ(n["active_sessions_count"], 0);
  EXPECT_EQ(n["config_versions"]["limits"], 0);
  EXPECT_EQ(n["config_versions"]["capabilities"], 1) << "the first Hello reported the tools";

  // Another tenant's user sees no node, and its config is 404 as an unknown node's is.
  const std::string mallory = UserToken("mallory", "other-tenant");
  EXPECT_EQ(Nodes(mallory), json::array());
  for (const auto& [who, path] : std::vector<std::pair<std::string, std::string>>{
           {mallory, "/v1/edge/nodes/edge-01/config"}, {token, "/v1/edge/nodes/nope/config"}}) {
    auto nf = Get(path, Bearer(who));
    EXPECT_EQ(nf.status, 404u) << path << ": " << nf.body;
    EXPECT_EQ(json::parse(nf.body, nullptr, false).value("code", ""), "NOT_FOUND") << nf.body;
  }
  Expect401(Get("/v1/edge/nodes/edge-01/config"), "config without a token");

  // The node's config: the default limits at version 0, its tools at version 1.
  auto cfg = Get("/v1/edge/nodes/edge-01/config", Bearer(token));
  ASSERT_EQ(cfg.status, 200u) << cfg.body;
  auto c = json::parse(cfg.body);
  EXPECT_EQ(c["node_id"], "edge-01");
  EXPECT_EQ(c["limits"]["config_version"], 0);
  EXPECT_TRUE(ParseRfc3339(c["limits"]["effective_at"].get<std::string>()));
  EXPECT_EQ(c["limits"]["limits"]["rate_limit"], 20);
  EXPECT_EQ(c["limits"]["limits"]["max_frame_size"], 1 << 20);
  EXPECT_EQ(c["limits"]["limits"]["reattach_window"], 300);
  EXPECT_EQ(c["limits"]["limits"]["max_buffer_size"], 4 << 20);
  EXPECT_EQ(c["limits"]["limits"]["buffer_overflow_policy"], "drop_oldest");
  EXPECT_EQ(c["capabilities"]["config_version"], 1);
  EXPECT_TRUE(ParseRfc3339(c["capabilities"]["effective_at"].get<std::string>()));
  EXPECT_EQ(c["capabilities"]["capabilities"], n["capabilities"]);

  // The plain format prints only the token on stdout.
  auto plain = Ctl({"user", "token", "create", "--user", "bob", "--tenant", "default"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::string bob = plain.out;
  while (!bob.empty() && std::isspace(static_cast<unsigned char>(bob.back())))
    bob.pop_back();
  EXPECT_EQ(Nodes(bob).size(), 1u);

  // The agent goes away: its node is offline, still listed.
  agents_.back()->Signal(SIGTERM);
  EXPECT_TRUE(agents_.back()->Wait(30s).has_value());
  ASSERT_TRUE(WaitConnected("edge-01", false));
  auto after = Nodes(token);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["status"], "offline");
}

TEST_F(OperatorApiTest, RefusesAnythingButAUserTokenWith401) {
  Expect401(Get("/v1/edge/nodes"), "no Authorization");
  Expect401(Get("/v1/edge/nodes", {{"Authorization", "Basic dXNlcjpwYXNz"}}), "Basic");
  Expect401(Get("/v1/edge/nodes", {{"Authorization", "Bearer"}}), "Bearer alone");
  Expect401(Get("/v1/edge/nodes", {{"Authorization", "Bearer a b"}}), "two words");
  Expect401(Get("/v1/edge/nodes", Bearer("garbage")), "garbage");
  Expect401(Get("/v1/edge/nodes", Bearer("e30.e30.e30")), "empty JSON parts");
  Expect401(Get("/v1/edge/nodes", {{"Authorization", "Bearer \xff\xfe\x80.\xc0\xc1.x"}}),
            "not UTF-8");

  // A compute token (aud edge-compute) of the same controller and tenant.
  auto ct = Ctl({"compute", "token", "create", "--tenant", "default", "--role", "ROLE_M2M"});
  ASSERT_EQ(ct.exit_code, 0) << ct.err;
  std::string compute = ct.out;
  while (!compute.empty() && std::isspace(static_cast<unsigned char>(compute.back())))
    compute.pop_back();
  Expect401(Get("/v1/edge/nodes", Bearer(compute)), "compute token");

  // A user token whose signature was tampered with.
  std::string user = UserToken("alice", "default", "1s");
  ASSERT_FALSE(user.empty());
  std::string tampered = user;
  tampered[tampered.size() - 3] = tampered[tampered.size() - 3] == 'A' ? 'B' : 'A';
  Expect401(Get("/v1/edge/nodes", Bearer(tampered)), "bad signature");
  // The same token once expired (1 s ttl + the 5 s leeway).
  std::this_thread::sleep_for(7s);
  Expect401(Get("/v1/edge/nodes", Bearer(user)), "expired");

  // Unknown paths and methods: JSON errors too.
  auto unknown = Get("/v1/edge/nope", Bearer(UserToken("alice", "default")));
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(json::parse(unknown.body, nullptr, false).value("code", ""), "NOT_FOUND");
  auto post = Get("/v1/edge/nodes", {}, "POST");
  EXPECT_EQ(post.status, 405u);
  EXPECT_EQ(json::parse(post.body, nullptr, false).value("code", ""), "METHOD_NOT_ALLOWED");

  // The CLI's own checks.
  EXPECT_EQ(Ctl({"user", "token", "create", "--tenant", "default"}).exit_code, 2);
  EXPECT_EQ(
      Ctl({"user", "token", "create", "--user", "a", "--tenant", "t", "--ttl", "0s"}).exit_code, 2);
}

// Tokens of an issuer in http.trusted_issuers (an OIDC provider's ES256 key) are accepted.
class OperatorApiTrustedIssuerTest : public OperatorApiTest {
 protected:
  void SetUp() override {
    auto key = identity::EcSigningKey::Generate();
    ASSERT_TRUE(key);
    idp_.emplace(std::move(*key));
    const std::string pub = dir_ / "idp.pub.pem";
    WriteText(pub, *idp_->PublicPem());
    StartController("  trusted_issuers:\n    https://idp.example: " + pub + "\n");
  }
  std::string IdpToken(const std::string& tenant, const std::string& aud = "edge-api") {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return *identity::SignJwtEs256({{"iss", "https://idp.example"},
                                    {"aud", aud},
                                    {"sub", "carol@example"},
                                    {"tid", tenant},
                                    {"iat", now},
                                    {"exp", now + 600},
                                    {"jti", "idp-1"}},
                                   *idp_);
  }
  std::optional<identity::EcSigningKey> idp_;
};

TEST_F(OperatorApiTrustedIssuerTest, AcceptsTheTrustedIssuersTokens) {
  EnrollAndStart("edge-01");
  auto nodes = Nodes(IdpToken("default"));
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["node_id"], "edge-01");
  EXPECT_EQ(Nodes(IdpToken("elsewhere")), json::array());
  Expect401(Get("/v1/edge/nodes", Bearer(IdpToken("default", "edge-compute"))), "idp, other aud");
  // The controller's own tokens still work beside it.
  EXPECT_EQ(Nodes(UserToken("alice", "default")).size(), 1u);
}

}  // namespace
}  // namespace edge::testing
