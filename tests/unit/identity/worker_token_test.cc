#include "agent/identity/worker_token.h"

#include <gtest/gtest.h>

#include "agent/identity/encoding.h"

namespace edge::identity {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kNow = 1'700'000'000;
const Clock::WallTime kNowTime = Clock::WallTime(std::chrono::seconds(kNow));
const std::string kKey = "k3y-for-tests";

// Assembles a token by hand from the contract: prefix, b64url(JSON), b64url(HMAC).
std::string HandToken(const std::string& json, const std::string& key = kKey) {
  const std::string input = "stacyvm-worker-v1." + Base64UrlEncode(json);
  return input + "." + Base64UrlEncode(HmacSha256(key, input));
}

WorkerTokenVerifyOptions Opts() {
  WorkerTokenVerifyOptions o;
  o.worker_id = "worker-a";
  o.audience = "worker:rpc";
  o.keys = {kKey};
  return o;
}

void ExpectUnauth(const std::string& token, const WorkerTokenVerifyOptions& o, const char* words,
                  Clock::WallTime now = kNowTime) {
  auto r = WorkerToken::Verify(token, o, now);
  ASSERT_FALSE(r) << words;
  EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated) << r.error().message;
  EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
}

TEST(WorkerToken, HmacPrimitiveMatchesRfc4231Case1And2) {
  EXPECT_EQ(HexEncode(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// A complete token computed outside this code base (Python's hmac module) from the contract:
// key "Jefe", claims {"worker_id":"w","exp":1700000300}.
TEST(WorkerToken, FixedVectorVerifies) {
  const std::string token =
      "stacyvm-worker-v1.eyJ3b3JrZXJfaWQiOiJ3IiwiZXhwIjoxNzAwMDAwMzAwfQ."
      "cRDa4cZPzpgOFEorrH6ipbPNFzxdWQrNN79Kg3gNXMg";
  WorkerTokenVerifyOptions o;
  o.worker_id = "w";
  o.keys = {"Jefe"};
  auto v = WorkerToken::Verify(token, o, kNowTime);
  ASSERT_TRUE(v) << v.error().ToString();
  EXPECT_EQ(v->exp, 1700000300);
  o.keys = {"jefe"};
  EXPECT_FALSE(WorkerToken::Verify(token, o, kNowTime));
}

TEST(WorkerToken, IssueHasTheContractShape) {
  WorkerTokenClaims c;
  c.worker_id = "worker-a";
  c.jti = "id-1";
  c.aud = "worker:rpc";
  c.scopes = {"worker:exec"};
  c.iat = kNow;
  c.exp = kNow + 300;
  auto t = WorkerToken::Issue(c, kKey);
  ASSERT_TRUE(t) << t.error().ToString();
  ASSERT_EQ(t->rfind("stacyvm-worker-v1.", 0), 0u);
  const std::string rest = t->substr(18);
  const size_t dot = rest.find('.');
  ASSERT_NE(dot, std::string::npos);
  auto json = Base64UrlDecode(rest.substr(0, dot));
  ASSERT_TRUE(json) << "payload is base64url without padding";
  auto j = nlohmann::json::parse(*json);
  EXPECT_EQ(j["worker_id"], "worker-a");
  EXPECT_EQ(j["jti"], "id-1");
  EXPECT_EQ(j["aud"], "worker:rpc");
  EXPECT_EQ(j["scopes"], nlohmann::json::array({"worker:exec"}));
  EXPECT_EQ(j["iat"], kNow);
  EXPECT_EQ(j["exp"], kNow + 300);
  EXPECT_FALSE(j.contains("nbf"));
  // The signature is HMAC-SHA256 over "stacyvm-worker-v1." + payload.
  EXPECT_EQ(rest.substr(dot + 1),
            Base64UrlEncode(HmacSha256(kKey, "stacyvm-worker-v1." + rest.substr(0, dot))));
  auto v = WorkerToken::Verify(*t, Opts(), kNowTime);
  ASSERT_TRUE(v) << v.error().ToString();
  EXPECT_EQ(v->scopes, std::vector<std::string>{"worker:exec"});

  EXPECT_EQ(WorkerToken::Issue(c, "").error().code, ErrorCode::kInvalidArgument);
  c.worker_id = "  ";
  EXPECT_EQ(WorkerToken::Issue(c, kKey).error().code, ErrorCode::kInvalidArgument);
}

TEST(WorkerToken, HandAssembledTokenVerifies) {
  auto t = HandToken(
      R"({"worker_id":"worker-a","jti":"j1","aud":"worker:rpc","exp":1700000300,"iat":1700000000})");
  auto v = WorkerToken::Verify(t, Opts(), kNowTime);
  ASSERT_TRUE(v) << v.error().ToString();
  EXPECT_EQ(v->jti, "j1");
  EXPECT_EQ(v->iat, kNow);
}

TEST(WorkerToken, NewClaimsAreFreshAndShortLived) {
  auto a = WorkerToken::NewClaims("worker-a", 300s, kNowTime, "worker:rpc");
  auto b = WorkerToken::NewClaims("worker-a", 300s, kNowTime);
  EXPECT_NE(a.jti, b.jti);
  EXPECT_EQ(a.iat, kNow);
  EXPECT_EQ(a.exp, kNow + 300);
  EXPECT_TRUE(WorkerToken::Verify(*WorkerToken::Issue(a, kKey), Opts(), kNowTime));
}

TEST(WorkerToken, EachRuleHasItsOwnMessage) {
  auto o = Opts();
  auto ok = [](std::string extra) {
    return HandToken(R"({"worker_id":"worker-a","jti":"j1","exp":1700000300)" + extra + "}");
  };
  ExpectUnauth(ok("") + "x", o, "signature");
  ExpectUnauth(HandToken(R"({"worker_id":"worker-a","exp":1700000300})", "other-key"), o,
               "does not verify under any configured key");
  ExpectUnauth(HandToken(R"({"worker_id":" ","exp":1700000300})"), o, "worker_id is blank");
  ExpectUnauth(HandToken(R"({"exp":1700000300})"), o, "worker_id is blank");
  ExpectUnauth(HandToken(R"({"worker_id":"worker-b","exp":1700000300})"), o,
               "is for worker \"worker-b\"");
  // now < exp: at exp exactly the token is expired.
  ExpectUnauth(ok(""), o, "expired at 1700000300", kNowTime + 300s);
  EXPECT_TRUE(WorkerToken::Verify(ok(""), o, kNowTime + 299s));
  ExpectUnauth(HandToken(R"({"worker_id":"worker-a","jti":"j"})"), o, "no exp claim");
  // nbf/iat at most 30 s in the future.
  EXPECT_TRUE(WorkerToken::Verify(ok(R"(,"nbf":1700000030)"), o, kNowTime));
  ExpectUnauth(ok(R"(,"nbf":1700000031)"), o, "not valid before 1700000031");
  EXPECT_TRUE(WorkerToken::Verify(ok(R"(,"iat":1700000030)"), o, kNowTime));
  ExpectUnauth(ok(R"(,"iat":1700000031)"), o, "issued in the future");
  // exp - iat <= 15 min when iat is present; without iat there is no cap.
  EXPECT_TRUE(WorkerToken::Verify(
      HandToken(R"({"worker_id":"worker-a","exp":1700000900,"iat":1700000000})"), o, kNowTime));
  ExpectUnauth(HandToken(R"({"worker_id":"worker-a","exp":1700000901,"iat":1700000000})"), o,
               "lifetime exp - iat exceeds the 900 s maximum");
  EXPECT_TRUE(
      WorkerToken::Verify(HandToken(R"({"worker_id":"worker-a","exp":1800000000})"), o, kNowTime));
  // Audience: must match when present; absent passes.
  ExpectUnauth(ok(R"(,"aud":"worker:control-plane")"), o,
               "audience \"worker:control-plane\" is not \"worker:rpc\"");
  EXPECT_TRUE(WorkerToken::Verify(ok(R"(,"aud":"worker:rpc")"), o, kNowTime));
  EXPECT_TRUE(WorkerToken::Verify(ok(""), o, kNowTime));
  // Revocation.
  o.revoked_jtis = {"j1"};
  ExpectUnauth(ok(""), o, "\"j1\" is revoked");
}

TEST(WorkerToken, RotationKeysAndMissingKey) {
  auto o = Opts();
  o.keys = {"new-key", kKey};
  EXPECT_TRUE(
      WorkerToken::Verify(HandToken(R"({"worker_id":"worker-a","exp":1700000300})"), o, kNowTime));
  o.keys = {"", ""};
  auto r =
      WorkerToken::Verify(HandToken(R"({"worker_id":"worker-a","exp":1700000300})"), o, kNowTime);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("worker_signing_key"), std::string::npos);
}

TEST(WorkerToken, MalformedTokensAndClaims) {
  auto o = Opts();
  ExpectUnauth("", o, "does not start with");
  ExpectUnauth("Bearer abc", o, "does not start with");
  ExpectUnauth("stacyvm-worker-v1.abc", o, "stacyvm-worker-v1.<payload>.<signature>");
  ExpectUnauth("stacyvm-worker-v1.a.b.c", o, "stacyvm-worker-v1.<payload>.<signature>");
  ExpectUnauth("stacyvm-worker-v1..sig", o, "payload is empty");
  ExpectUnauth("stacyvm-worker-v1.e30.", o, "signature is empty");
  ExpectUnauth("stacyvm-worker-v1.e30.c2ln", o, "not a base64url HMAC-SHA256");
  ExpectUnauth("stacyvm-worker-v1." + std::string(20000, 'A') + ".x", o, "16 KiB");
  // Correctly signed but not decodable claims.
  const std::string bad_b64 = "stacyvm-worker-v1.e30=";
  ExpectUnauth(bad_b64 + "." + Base64UrlEncode(HmacSha256(kKey, bad_b64)), o, "not base64url");
  ExpectUnauth(HandToken("[1,2]"), o, "not a JSON object");
  ExpectUnauth(HandToken("{nope"), o, "not a JSON object");
  // Issue 15 #9: the unauthenticated payload is bounded before it is parsed (17 levels).
  ExpectUnauth(HandToken(R"({"worker_id":"w1","exp":1,"x":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]})"), o,
               "worker token payload");
  ExpectUnauth(HandToken(R"({"worker_id":"worker-a","exp":"soon"})"), o, "exp must be an integer");
  ExpectUnauth(HandToken(R"({"worker_id":7,"exp":1700000300})"), o, "worker_id must be a string");
  ExpectUnauth(HandToken(R"({"worker_id":"worker-a","exp":1700000300,"scopes":"all"})"), o,
               "scopes must be an array");
  ExpectUnauth(HandToken(R"({"worker_id":"worker-a","exp":18446744073709551615})"), o,
               "out of range");
  // Extreme times do not overflow (UBSan would abort).
  ExpectUnauth(
      HandToken(R"({"worker_id":"worker-a","exp":9223372036854775807,"iat":-9223372036854775808})"),
      o, "lifetime");
  ExpectUnauth(
      HandToken(R"({"worker_id":"worker-a","exp":9223372036854775807,"nbf":9223372036854775807})"),
      o, "not valid before");
}

TEST(WorkerToken, DecodeUnverifiedReadsClaimsOnly) {
  auto t = HandToken(R"({"worker_id":"worker-a","jti":"j9","exp":1})", "any-key");
  auto c = WorkerToken::DecodeUnverified(t);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->jti, "j9");
  EXPECT_EQ(c->exp, 1);
  auto bad = WorkerToken::DecodeUnverified("garbage");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace edge::identity
