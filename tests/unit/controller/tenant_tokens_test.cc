// User tokens (wire.md §5.1) on TenantTokens: aud "edge-api", sub and exp required, tokens of
// trusted issuers (http.trusted_issuers) verified with their own keys; compute tokens are the
// same class with their own audience and stay apart. A ManualClock; keys generated per test.
#include "controller/tenant_tokens.h"

#include <gtest/gtest.h>

#include "common/atomic_file.h"
#include "controller/compute_tokens.h"
#include "controller/user_tokens.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int64_t kNowS = 1'800'000'000;

class UserTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.SetWall(Clock::WallTime(std::chrono::seconds(kNowS)));
    auto k = identity::EcSigningKey::Generate();
    auto idp = identity::EcSigningKey::Generate();
    ASSERT_TRUE(k && idp);
    key_.emplace(std::move(*k));
    idp_.emplace(std::move(*idp));
  }
  json Claims(const std::string& iss) const {
    return {{"iss", iss},   {"aud", "edge-api"},   {"sub", "alice"}, {"tid", "acme"},
            {"iat", kNowS}, {"exp", kNowS + 3600}, {"jti", "x-1"}};
  }
  // The idp's public key in a PEM file, loaded as http.trusted_issuers would be.
  TrustedIssuers TrustIdp() {
    const std::string file = tmp_.path() + "/idp.pub.pem";
    EXPECT_TRUE(WriteFileAtomic(file, *idp_->PublicPem(), {.mode = 0644}));
    auto t = LoadTrustedIssuers({{"https://idp", file}}, "http.trusted_issuers");
    EXPECT_TRUE(t) << t.error().ToString();
    return t ? std::move(*t) : TrustedIssuers{};
  }

  ManualClock clock_;
  std::optional<identity::EcSigningKey> key_, idp_;
  edge::testing::TempDir tmp_{"user-tokens"};
};

TEST_F(UserTokensTest, MintedTokenVerifiesWithItsClaims) {
  UserTokens users(*key_, clock_, "ctl");
  TenantTokenClaims minted;
  auto t = users.Mint("acme", {}, 8h, "alice", &minted);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_TRUE(minted.jti.starts_with("ut-")) << minted.jti;
  EXPECT_EQ(minted.expires_at_ms, (kNowS + 8 * 3600) * 1000);
  auto c = users.Verify(*t);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->subject, "alice");
  EXPECT_EQ(c->tenant_id, "acme");
  EXPECT_EQ(c->issuer, "ctl");
  EXPECT_EQ(c->jti, minted.jti);
  auto parts = identity::DecodeJwtUnverified(*t);
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->claims["aud"], "edge-api");
  EXPECT_FALSE(parts->claims.contains("roles"));
}

TEST_F(UserTokensTest, MintRefusesMissingUserTenantOrBadTtl) {
  UserTokens users(*key_, clock_, "ctl");
  EXPECT_EQ(users.Mint("acme", {}, 1h, "").error().message, "--user is required");
  EXPECT_EQ(users.Mint("", {}, 1h, "alice").error().message, "--tenant is required");
  EXPECT_EQ(users.Mint("acme", {}, 0s, "alice").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(users.Mint("acme", {}, 367 * 24h, "alice").error().code, ErrorCode::kInvalidArgument);
}

TEST_F(UserTokensTest, RefusesOtherAudiencesExpiryOtherKeysAndGarbage) {
  UserTokens users(*key_, clock_, "ctl");
  ComputeTokens compute(*key_, clock_, "ctl");
  auto ct = compute.Mint("acme", {"ROLE_M2M"}, 1h, "svc");
  ASSERT_TRUE(ct);
  auto refused = users.Verify(*ct);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnauthenticated);
  EXPECT_TRUE(refused.error().message.starts_with("user token: ")) << refused.error().message;
  // …and a user token is no compute token.
  auto ut = users.Mint("acme", {}, 1h, "alice");
  ASSERT_TRUE(ut);
  EXPECT_FALSE(compute.Verify(*ut));

  // Node-ish tokens: no aud, or another one.
  auto c = Claims("ctl");
  c["aud"] = "edge-invoke";
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(c, *key_)));
  c.erase("aud");
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(c, *key_)));
  // No sub, no tid, no exp.
  for (const char* claim : {"sub", "tid", "exp"}) {
    auto d = Claims("ctl");
    d.erase(claim);
    auto r = users.Verify(*identity::SignJwtEs256(d, *key_));
    ASSERT_FALSE(r) << claim;
    EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  }
  // Signed by a key the controller does not trust, or claiming another issuer.
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(Claims("ctl"), *idp_)));
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(Claims("https://idp"), *idp_)));
  // Expired (5 s leeway).
  clock_.Advance(1h + 6s);
  EXPECT_FALSE(users.Verify(*ut));
  // Garbage, not UTF-8, empty.
  EXPECT_FALSE(users.Verify("not.a.jwt"));
  EXPECT_FALSE(users.Verify("\xff\xfe.\x80\x81.\xc0"));
  EXPECT_FALSE(users.Verify(""));
}

TEST_F(UserTokensTest, TrustedIssuerTokensVerifyWithTheirOwnKey) {
  UserTokens users(*key_, clock_, "ctl", TrustIdp());
  auto c = users.Verify(*identity::SignJwtEs256(Claims("https://idp"), *idp_));
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->issuer, "https://idp");
  EXPECT_EQ(c->tenant_id, "acme");
  // Own tokens still verify with the own key.
  auto own = users.Mint("acme", {}, 1h, "bob");
  ASSERT_TRUE(own);
  EXPECT_TRUE(users.Verify(*own));
  // The idp's iss with the controller's key, the controller's iss with the idp's key, and the
  // idp's token for another audience: all refused.
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(Claims("https://idp"), *key_)));
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(Claims("ctl"), *idp_)));
  auto other_aud = Claims("https://idp");
  other_aud["aud"] = "something-else";
  EXPECT_FALSE(users.Verify(*identity::SignJwtEs256(other_aud, *idp_)));
}

TEST_F(UserTokensTest, LoadTrustedIssuersNamesTheBadFile) {
  auto missing = LoadTrustedIssuers({{"idp", tmp_.path() + "/nope.pem"}}, "http.trusted_issuers");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("http.trusted_issuers.idp"), std::string::npos)
      << missing.error().message;
  const std::string junk = tmp_.path() + "/junk.pem";
  ASSERT_TRUE(WriteFileAtomic(junk, "not a key", {.mode = 0644}));
  auto bad = LoadTrustedIssuers({{"idp", junk}}, "http.trusted_issuers");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not a PEM public key"), std::string::npos);
}

}  // namespace
}  // namespace edge::controller
