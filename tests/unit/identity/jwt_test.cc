#include "agent/identity/jwt.h"

#include <gtest/gtest.h>

#include "agent/identity/encoding.h"

namespace edge::identity {
namespace {

using namespace std::chrono_literals;

Clock::WallTime At(int64_t secs) {
  return Clock::WallTime(std::chrono::seconds(secs));
}

class JwtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto k = EcSigningKey::Generate();
    ASSERT_TRUE(k);
    key_.emplace(std::move(*k));
    auto pub = PublicKeyFromPem(*key_->PublicPem());
    ASSERT_TRUE(pub);
    pub_ = std::move(*pub);
  }
  std::string Sign(nlohmann::json claims) { return *SignJwtEs256(claims, *key_); }
  std::optional<EcSigningKey> key_;
  PkeyPtr pub_;
};

TEST_F(JwtTest, StructureIsCompactEs256WithRawSignature) {
  auto t = Sign({{"sub", "edge-01"}, {"exp", 2000}});
  ASSERT_EQ(std::count(t.begin(), t.end(), '.'), 2);
  auto header = Base64UrlDecode(t.substr(0, t.find('.')));
  ASSERT_TRUE(header);
  EXPECT_EQ(*header, R"({"alg":"ES256","typ":"JWT"})");
  auto sig = Base64UrlDecode(t.substr(t.rfind('.') + 1));
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->size(), 64u) << "JOSE R||S, not DER";
  auto parts = VerifyJwtEs256(t, pub_.get(), At(1000));
  ASSERT_TRUE(parts) << parts.error().ToString();
  EXPECT_EQ(parts->claims["sub"], "edge-01");
}

TEST_F(JwtTest, TamperedPayloadFails) {
  auto t = Sign({{"sub", "edge-01"}, {"exp", 2000}});
  size_t d1 = t.find('.'), d2 = t.rfind('.');
  std::string forged =
      t.substr(0, d1 + 1) + Base64UrlEncode(R"({"sub":"edge-99","exp":2000})") + t.substr(d2);
  auto r = VerifyJwtEs256(forged, pub_.get(), At(1000));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(r.error().message.find("signature"), std::string::npos);
}

TEST_F(JwtTest, AlgNoneAndHs256AreRefused) {
  std::string claims = Base64UrlEncode(R"({"exp":2000})");
  for (const char* hdr : {R"({"alg":"none"})", R"({"alg":"HS256"})"}) {
    std::string t = Base64UrlEncode(hdr) + "." + claims + ".";
    auto r = VerifyJwtEs256(t, pub_.get(), At(1000));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("not accepted"), std::string::npos) << r.error().message;
  }
}

TEST_F(JwtTest, TimeClaimsAndAudience) {
  auto t = Sign(
      {{"exp", 2000}, {"nbf", 1000}, {"iat", 1000}, {"aud", "edge-enrollment"}, {"iss", "ctl"}});
  EXPECT_TRUE(
      VerifyJwtEs256(t, pub_.get(), At(1500), {.audience = "edge-enrollment", .issuer = "ctl"}));
  auto expired = VerifyJwtEs256(t, pub_.get(), At(2060));
  ASSERT_FALSE(expired);
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos);
  auto early = VerifyJwtEs256(t, pub_.get(), At(900));
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message.find("not valid before"), std::string::npos);
  EXPECT_TRUE(VerifyJwtEs256(t, pub_.get(), At(950))) << "within the 60 s leeway";
  auto aud = VerifyJwtEs256(t, pub_.get(), At(1500), {.audience = "other"});
  ASSERT_FALSE(aud);
  EXPECT_NE(aud.error().message.find("audience"), std::string::npos);
  EXPECT_FALSE(VerifyJwtEs256(t, pub_.get(), At(1500), {.issuer = "evil"}));
  EXPECT_FALSE(VerifyJwtEs256(Sign({{"sub", "x"}}), pub_.get(), At(1))) << "exp is required";
}

TEST_F(JwtTest, NonStringAlgAndExtremeTimesAreRefusedCleanly) {
  std::string claims = Base64UrlEncode(R"({"exp":2000})");
  for (const char* hdr : {R"({"alg":1})", R"({"alg":null})", R"({})", R"({"alg":["ES256"]})"}) {
    auto r = VerifyJwtEs256(Base64UrlEncode(hdr) + "." + claims + ".", pub_.get(), At(1000));
    ASSERT_FALSE(r) << hdr;
    EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
    EXPECT_NE(r.error().message.find("only ES256"), std::string::npos) << r.error().message;
  }
  // exp at INT64_MAX must not overflow the leeway arithmetic (UBSan would abort).
  EXPECT_TRUE(VerifyJwtEs256(Sign({{"exp", INT64_MAX}}), pub_.get(), At(1000)));
}

TEST_F(JwtTest, WrongKeyFails) {
  auto other = EcSigningKey::Generate();
  auto other_pub = PublicKeyFromPem(*other->PublicPem());
  EXPECT_FALSE(VerifyJwtEs256(Sign({{"exp", 2000}}), other_pub->get(), At(1000)));
}

TEST(JwtDecode, GarbageIsInvalidArgumentNamingThePart) {
  for (const char* bad : {"", "abc", "a.b", "a.b.c.d", "!!.e30.", "e30.!!.", "W10.e30.x"}) {
    auto r = DecodeJwtUnverified(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(DecodeJwtUnverified("W10.e30.x").error().message.find("header is not a JSON object"),
            std::string::npos);
  auto ok = DecodeJwtUnverified("e30." + Base64UrlEncode(R"({"cep":"127.0.0.1:1"})") + ".sig");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->claims["cep"], "127.0.0.1:1");
}

// Issue 15 #9: a token is read before anything about it is trusted, so its JSON is bounded
// before it is parsed. Hand-encoded: {"alg":"ES256","typ":"JWT"} and {"a":[[…]]} with 17 and
// 15 levels of arrays (18 and 16 with the object).
TEST(JwtDecode, ClaimsNestedDeeperThanSixteenLevelsAreRefusedBeforeParsing) {
  const std::string header = "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9";
  auto deep =
      DecodeJwtUnverified(header + ".eyJhIjpbW1tbW1tbW1tbW1tbW1tbW11dXV1dXV1dXV1dXV1dXV1dfQ.sig");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(deep.error().message.find("JWT claims"), std::string::npos) << deep.error().message;
  EXPECT_NE(deep.error().message.find("16"), std::string::npos) << deep.error().message;
  auto fits = DecodeJwtUnverified(header + ".eyJhIjpbW1tbW1tbW1tbW1tbW1tdXV1dXV1dXV1dXV1dXV19.sig");
  ASSERT_TRUE(fits) << fits.error().message;
  EXPECT_TRUE(fits->claims["a"].is_array());
}

}  // namespace
}  // namespace edge::identity
