// AttestNode / ChallengeNode over real mTLS on loopback (wire.md §2.3 steps 1–3): the happy
// path and every refusal — key size, role, certificate, signature, expired/reused/foreign
// challenge, rate limit, enrollment-token replay, token of another node, bad audience /
// issuer / expiry, re-attestation with and without a registered key.
#include <nlohmann/json.hpp>

#include "agent/identity/encoding.h"
#include "agent/identity/join_token_claims.h"
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
  // An unbound token consumed by edge-02 at bootstrap, presented by edge-01.
  const std::string unbound = CreateJoinToken("");
  {
    auto boot = me::prexorjustin::prexorcloud::protocol::BootstrapService::NewStub(
        identity::ChannelFactory::TlsNoClientCert(target_, controller_->ca_pem()));
    me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenRequest req;
    req.set_join_token(unbound);
    req.set_node_id("edge-02");
    me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    ASSERT_TRUE(boot->ExchangeJoinToken(&ctx, req, &resp).ok());
  }
  st = a->Handshake(unbound);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("redeemed by node \"edge-02\""), std::string::npos)
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
