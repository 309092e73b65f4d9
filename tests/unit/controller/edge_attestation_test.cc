// AttestNode / ChallengeNode over real mTLS on loopback (wire.md §2.3 steps 1–3): the happy
// path and every refusal — key size, role, certificate, signature, expired/reused/foreign
// challenge, rate limit, enrollment-token replay, token of another node, bad audience /
// issuer / expiry, re-attestation with and without a registered key.
#include <nlohmann/json.hpp>

#include "agent/identity/encoding.h"
#include "agent/identity/join_token_claims.h"
#include "controller/sqlite_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/controller/edge_test_support.h"

namespace edge::controller::testing {
namespace {

class EdgeAttestationTest : public ControllerHarness {};

TEST_F(EdgeAttestationTest, EnrollsWithTheJoinTokenAndIssuesANodeSecurityToken) {
  auto node = NewNode("edge-01", "tenant-a");
  pb::AttestNodeResponse ch;
  ASSERT_TRUE(node->Attest(&ch, node->key->public_key()).ok());
  EXPECT_EQ(ch.challenge_nonce().size(), 32u);
  EXPECT_FALSE(ch.challenge_id().empty());
  pb::ChallengeNodeResponse resp;
  auto st = node->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), node->join_token, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();

  // The token: ES256 by the controller's token key, the claims of wire.md §2.3.
  auto key = TokenKey();
  auto parts = identity::VerifyJwtEs256(resp.node_security_token(), key.get(), clock_.Now());
  ASSERT_TRUE(parts) << parts.error().ToString();
  const auto& c = parts->claims;
  EXPECT_EQ(c["iss"], "edge-controller");
  EXPECT_EQ(c["sub"], "edge-01");
  EXPECT_EQ(c["role"], "edge");
  EXPECT_EQ(c["tid"], "tenant-a");
  EXPECT_TRUE(c["jti"].is_string() && !c["jti"].get<std::string>().empty());
  EXPECT_EQ(c["exp"].get<int64_t>() - c["iat"].get<int64_t>(), 3600);
  EXPECT_EQ(resp.expires_at().seconds(), c["exp"].get<int64_t>());

  auto info = NodeInfo("edge-01");
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->edge_enrolled());
  EXPECT_EQ(info->tenant_id(), "tenant-a");
  EXPECT_EQ(info->state(), "enrolled");
  EXPECT_FALSE(info->connected());
  EXPECT_EQ(info->public_key_sha256(),
            identity::HexEncode(identity::Sha256(node->key->public_key())));

  // Later attestations need no proof: the registered key is enough.
  EXPECT_TRUE(node->Handshake(std::nullopt).ok());
}

TEST_F(EdgeAttestationTest, AttestRefusesBadKeysRolesAndCertificates) {
  auto node = NewNode("edge-01");
  pb::AttestNodeResponse ch;
  auto st = node->Attest(&ch, std::string(31, 'k'));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("32-byte"), std::string::npos) << st.error_message();
  st = node->Attest(&ch, std::string(33, 'k'));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  st = node->Attest(&ch, node->key->public_key(), pb::NODE_ROLE_WORKER);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("NODE_ROLE_EDGE"), std::string::npos) << st.error_message();
  // The certificate is edge-01's: claiming another node id is refused.
  st = node->Attest(&ch, node->key->public_key(), pb::NODE_ROLE_EDGE, "edge-02");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Without a client certificate nothing but the bootstrap is served.
  auto anon = pb::NodeClusterService::NewStub(
      identity::ChannelFactory::TlsNoClientCert(target_, controller_->ca_pem()));
  pb::AttestNodeRequest req;
  req.set_node_id("edge-01");
  req.set_role(pb::NODE_ROLE_EDGE);
  req.set_public_key(node->key->public_key());
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  st = anon->AttestNode(&ctx, req, &ch);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(EdgeAttestationTest, ChallengeRefusals) {
  auto node = NewNode("edge-01");
  pb::ChallengeNodeResponse resp;

  // Signed by another key than the one given in AttestNode.
  pb::AttestNodeResponse ch;
  ASSERT_TRUE(node->Attest(&ch, node->key->public_key()).ok());
  auto other = identity::NodeKey::Generate();
  auto st = node->Challenge(ch, *other->Sign(ch.challenge_nonce()), node->join_token, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("does not verify"), std::string::npos) << st.error_message();
  // … which spent the challenge: the right signature now finds nothing.
  st = node->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), node->join_token, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);

  // Expired: valid for 300 s.
  ASSERT_TRUE(node->Attest(&ch, node->key->public_key()).ok());
  clock_.Advance(300s);
  st = node->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), node->join_token, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("expired"), std::string::npos) << st.error_message();

  // Reused after success.
  ASSERT_TRUE(node->Attest(&ch, node->key->public_key()).ok());
  ASSERT_TRUE(
      node->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), node->join_token, &resp).ok());
  st = node->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), std::nullopt, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("already used"), std::string::npos) << st.error_message();

  // A challenge issued to edge-01 answered by edge-02 (with edge-02's certificate).
  clock_.Advance(61s);  // past the attest rate limit
  auto node2 = NewNode("edge-02");
  ASSERT_TRUE(node->Attest(&ch, node->key->public_key()).ok());
  st = node2->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), std::nullopt, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("issued to node \"edge-01\""), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(node->Challenge(ch, *node->key->Sign(ch.challenge_nonce()), std::nullopt, &resp).ok())
      << "the foreign attempt did not spend edge-01's challenge";
}

TEST_F(EdgeAttestationTest, AttestIsRateLimitedPerPeerAddress) {
  auto node = NewNode("edge-01");
  pb::AttestNodeResponse ch;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(node->Attest(&ch, node->key->public_key()).ok()) << i;
  auto st = node->Attest(&ch, node->key->public_key());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("5 per minute"), std::string::npos) << st.error_message();
  clock_.Advance(59s);
  EXPECT_EQ(node->Attest(&ch, node->key->public_key()).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  clock_.Advance(1s);
  EXPECT_TRUE(node->Attest(&ch, node->key->public_key()).ok()) << "the window moved on";
}

// Issue 15 #10: the limit was keyed by IP alone, so one locked-out node behind a NAT blocked
// its neighbours. Now per IP + node id, with a looser ceiling per IP; driven by a ManualClock.
TEST(EdgeAttestationLimits, KeyedByAddressAndNodeWithAPerAddressCeiling) {
  edge::testing::TempDir tmp("attest");
  const std::string dir = tmp.path();
  {
    ManualClock clock;
    auto store = std::move(*SqliteStore::Open(dir + "/c.db"));
    auto key = *identity::EcSigningKey::Generate();
    NodeTokenAuthority tokens(*store, key, clock, NodeTokenSettings{});
    EdgeAttestation attest(
        *store, tokens, key, clock,
        AttestationSettings{.attest_per_minute = 3, .attest_per_ip_per_minute = 7});
    const std::string pub(32, 'k');
    auto call = [&](const std::string& ip, const std::string& node) {
      return attest.Attest(ip, node, pb::NODE_ROLE_EDGE, pub);
    };
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(call("ipv4:10.0.0.1", "locked-out")) << i;
    auto refused = call("ipv4:10.0.0.1", "locked-out");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
    EXPECT_NE(
        refused.error().message.find("3 per minute for node \"locked-out\" from ipv4:10.0.0.1"),
        std::string::npos)
        << refused.error().message;
    // Its neighbour behind the same address is not blocked, nor are the refused calls counted
    // against the address.
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(call("ipv4:10.0.0.1", "locked-out").error().code, ErrorCode::kResourceExhausted);
    EXPECT_TRUE(call("ipv4:10.0.0.1", "neighbour"));
    EXPECT_TRUE(call("ipv4:10.0.0.1", "neighbour"));
    // The per-address ceiling (7): 3 + 2 so far; two more node ids, then refused.
    EXPECT_TRUE(call("ipv4:10.0.0.1", "spray-1"));
    EXPECT_TRUE(call("ipv4:10.0.0.1", "spray-2"));
    auto ceiling = call("ipv4:10.0.0.1", "spray-3");
    ASSERT_FALSE(ceiling);
    EXPECT_NE(ceiling.error().message.find("7 per minute from ipv4:10.0.0.1 (all node ids)"),
              std::string::npos)
        << ceiling.error().message;
    EXPECT_TRUE(call("ipv4:10.0.0.2", "locked-out")) << "another address has its own budget";
    clock.Advance(std::chrono::seconds(59));
    EXPECT_FALSE(call("ipv4:10.0.0.1", "spray-3"));
    clock.Advance(std::chrono::seconds(1));
    EXPECT_TRUE(call("ipv4:10.0.0.1", "spray-3")) << "the window moved on";
    EXPECT_TRUE(call("ipv4:10.0.0.1", "locked-out"));
  }
}

TEST_F(EdgeAttestationTest, EnrollmentTokenIsRedeemedOnce) {
  auto node = EnrolledNode("edge-01");
  auto st = node->Handshake(node->join_token);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("already redeemed"), std::string::npos) << st.error_message();
}

TEST_F(EdgeAttestationTest, EnrollmentTokenOfAnotherNodeIsRefused) {
  auto a = NewNode("edge-01");
  auto b = NewNode("edge-02");
  // edge-02's token (bound to edge-02, consumed by it) presented by edge-01.
  auto st = a->Handshake(b->join_token);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("edge-02"), std::string::npos) << st.error_message();
  // An unbound token consumed by (new) edge-03 at bootstrap, presented by edge-01.
  const std::string unbound = CreateJoinToken("");
  {
    me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse resp;
    ASSERT_TRUE(Exchange(unbound, "edge-03", &resp).ok());
  }
  st = a->Handshake(unbound);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("redeemed by node \"edge-03\""), std::string::npos)
      << st.error_message();
  // The refusals left edge-01 able to enroll with its own token.
  clock_.Advance(61s);
  EXPECT_TRUE(a->Handshake(a->join_token).ok());
}

TEST_F(EdgeAttestationTest, EnrollmentTokenThatDoesNotVerifyIsUnauthenticated) {
  auto node = NewNode("edge-01");
  auto key = TokenKey();
  auto claims = identity::JoinTokenClaims::FromTokenUnverified(node->join_token);
  ASSERT_TRUE(claims);
  auto forge = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = claims->ToJson();
    change(j);
    return *identity::SignJwtEs256(j, key);
  };
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  struct Case {
    const char* what;
    std::string token;
    std::string words;
  } cases[] = {
      {"audience", forge([](auto& j) { j["aud"] = "edge-invoke"; }), "audience"},
      {"issuer", forge([](auto& j) { j["iss"] = "someone-else"; }), "issuer"},
      {"expired", forge([&](auto& j) { j["exp"] = now - 120; }), "expired"},
      {"not yet valid", forge([&](auto& j) { j["nbf"] = now + 3600; }), "not valid before"},
      {"foreign key",
       *identity::SignJwtEs256(claims->ToJson(), *identity::EcSigningKey::Generate()), "signature"},
  };
  int attempts = 0;
  for (const auto& c : cases) {
    if (++attempts % 5 == 0) clock_.Advance(61s);  // stay under the attest rate limit
    auto st = node->Handshake(c.token);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << c.what;
    EXPECT_NE(st.error_message().find(c.words), std::string::npos)
        << c.what << ": " << st.error_message();
  }
  // Well-formed but missing its tenant.
  clock_.Advance(61s);
  auto st = node->Handshake(forge([](auto& j) { j.erase("tid"); }));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  // Signed correctly, but a token this controller never issued (unknown hash).
  st = node->Handshake(forge([](auto& j) { j["nonce"] = "different"; }));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_TRUE(node->Handshake(node->join_token).ok()) << "none of that spent the real token";
}

// Issue 15 #3 through gRPC: neither ExchangeJoinToken nor ChallengeNode's enrollment proof
// lets an unbound token take over an enrolled node or revive a revoked one; a token created
// with replace for that node does, and locks the old identity out.
TEST_F(EdgeAttestationTest, AnUnboundTokenCannotTakeOverOrReviveANode) {
  auto n2 = EnrolledNode("n2");
  const std::string unbound = CreateJoinToken("");
  me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse resp;
  auto st = Exchange(unbound, "n2", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("token create --node n2 --replace"), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(resp.pkcs12().empty());
  // ChallengeNode's path, with n2's own certificate and a new key: refused as well.
  const identity::NodeKey real_key = *n2->key;
  n2->key.emplace(*identity::NodeKey::Generate());
  st = n2->Handshake(unbound);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  n2->key.emplace(real_key);
  EXPECT_TRUE(n2->Handshake(std::nullopt).ok()) << "the real n2 still attests with its key";

  // The operator's explicit step: a token bound to n2, created with replace.
  auto replacement = NewNode("n2", "t1", CreateJoinToken("n2", "t1", /*replace=*/true));
  clock_.Advance(61s);  // AttestNode's per-IP limit
  ASSERT_TRUE(replacement->Handshake(replacement->join_token).ok());
  st = n2->Handshake(std::nullopt);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << "the old key is gone";

  // Revoked stays revoked, whichever path an unbound token takes.
  auto revoke = [&](const std::string& id) {
    apb::RevokeNodeRequest req;
    req.set_node_id(id);
    apb::RevokeNodeResponse r;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return admin_->RevokeNode(&ctx, req, &r);
  };
  ASSERT_TRUE(revoke("n2").ok());
  clock_.Advance(61s);
  EXPECT_EQ(Exchange(CreateJoinToken(""), "n2", &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(replacement->Handshake(CreateJoinToken("")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(NodeInfo("n2")->state(), "revoked");
  auto revived = NewNode("n2", "t1", CreateJoinToken("n2", "t1", /*replace=*/true));
  ASSERT_TRUE(revived->Handshake(revived->join_token).ok());
  EXPECT_EQ(NodeInfo("n2")->state(), "enrolled");
}

TEST_F(EdgeAttestationTest, ReattestationNeedsEnrollmentAndTheRegisteredKey) {
  auto node = NewNode("edge-01");
  auto st = node->Handshake(std::nullopt);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("bootstrap_proof.enrollment_token"), std::string::npos)
      << st.error_message();
  ASSERT_TRUE(node->Handshake(node->join_token).ok());
  // Another key (say, the node lost its key file) is not the registered one.
  node->key.emplace(*identity::NodeKey::Generate());
  st = node->Handshake(std::nullopt);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("not the registered key"), std::string::npos)
      << st.error_message();
}

}  // namespace
}  // namespace edge::controller::testing
