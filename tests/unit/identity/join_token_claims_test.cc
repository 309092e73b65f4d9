#include "agent/identity/join_token_claims.h"

#include <gtest/gtest.h>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/encoding.h"
#include "agent/identity/jwt.h"

namespace edge::identity {
namespace {

const std::string kPin = "sha256:" + std::string(64, 'a');

TEST(JoinTokenClaims, RoundTripsThroughAnEs256Token) {
  JoinTokenClaims c;
  c.jti = "j-1";
  c.tid = "tenant";
  c.sub = "rack 4";
  c.iss = "ctl";
  c.iat = 100;
  c.nbf = 100;
  c.exp = 3700;
  c.cep = "ctl.example:50056";
  c.cah = kPin;
  auto j = c.ToJson();
  EXPECT_EQ(j["aud"], "edge-enrollment");
  auto key = EcSigningKey::Generate();
  auto token = SignJwtEs256(j, *key);
  ASSERT_TRUE(token);
  auto back = JoinTokenClaims::FromTokenUnverified(*token);
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(back->jti, "j-1");
  EXPECT_EQ(back->tid, "tenant");
  EXPECT_EQ(back->sub, "rack 4");
  EXPECT_EQ(back->aud, "edge-enrollment");
  EXPECT_EQ(back->iss, "ctl");
  EXPECT_EQ(back->iat, 100);
  EXPECT_EQ(back->nbf, 100);
  EXPECT_EQ(back->exp, 3700);
  EXPECT_EQ(back->cep, "ctl.example:50056");
  EXPECT_EQ(back->cah, kPin);
  // cep / cah are omitted when not set.
  c.cep.clear();
  c.cah.clear();
  EXPECT_FALSE(c.ToJson().contains("cep"));
  EXPECT_FALSE(c.ToJson().contains("cah"));
}

TEST(JoinTokenClaims, BadClaimsNameTheClaimAndRule) {
  struct Case {
    const char* json;
    const char* words;
  };
  const Case cases[] = {
      {R"([])", "must be a JSON object"},
      {R"({"exp":1})", "no jti claim"},
      {R"({"jti":"j"})", "no exp claim"},
      {R"({"jti":5,"exp":1})", "jti must be a string"},
      {R"({"jti":"j","exp":"1"})", "exp must be an integer"},
      {R"({"jti":"j","exp":1.5})", "exp must be an integer"},
      {R"({"jti":"j","exp":1,"cep":["a"]})", "cep must be a string"},
      {R"({"jti":"j","exp":1,"aud":7})", "aud must be a string or an array"},
      {R"({"jti":"j","exp":1,"cah":"md5:abc"})", "is not sha256:<64 hex digits>"},
  };
  for (const auto& c : cases) {
    auto r = JoinTokenClaims::FromJson(nlohmann::json::parse(c.json));
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.words), std::string::npos) << r.error().message;
  }
  auto arr = JoinTokenClaims::FromJson(
      nlohmann::json::parse(R"({"jti":"j","exp":1,"aud":["edge-enrollment","x"]})"));
  ASSERT_TRUE(arr);
  EXPECT_EQ(arr->aud, "edge-enrollment");
  EXPECT_EQ(JoinTokenClaims::FromTokenUnverified("not.a-token").error().code,
            ErrorCode::kInvalidArgument);
}

// The pin is SHA-256 over the certificate's DER; the expected value here is computed from the
// DER bytes with the independent SHA-256 primitive (pinned by FIPS vectors in encoding_test).
TEST(CaPin, IsSha256OfTheDer) {
  EXPECT_EQ(CaPinOfDer("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto ca = CertificateAuthority::Create("pin CA", std::chrono::system_clock::now());
  ASSERT_TRUE(ca);
  auto cert = CertFromPem(ca->cert_pem());
  ASSERT_TRUE(cert);
  EXPECT_EQ(CaPin(cert->get()), ca->Pin());
  EXPECT_EQ(CaPin(cert->get()), CaPinOfDer(CertToDer(cert->get())));
  EXPECT_TRUE(ValidateCaPin(CaPin(cert->get())));
  EXPECT_TRUE(ValidateCaPin("sha256:" + std::string(64, 'F')));
  for (const std::string& bad : std::vector<std::string>{
           "", "sha256:", "sha256:" + std::string(63, 'a'), "sha256:" + std::string(64, 'g'),
           "SHA256:" + std::string(64, 'a')}) {
    auto r = ValidateCaPin(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace edge::identity
