// NodeToken: the claims of the NodeSecurityToken read without verification, the renewal
// schedule (70–90 % of the lifetime, jittered by the injected Random, never before now), and
// clear errors — never a crash — for malformed tokens. Every token here is written by hand:
// base64url of hand-written JSON with arbitrary signature bytes.
#include "agent/edge/node_token.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/clock.h"
#include "common/random.h"

namespace edge::agentedge {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::WallTime kReceived{seconds(1'700'000'100)};

// Test-side base64url without padding (RFC 4648 §5), checked against a literal vector below.
std::string B64Url(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 0x3F];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 0x3F];
  return out;
}

const std::string kHeader = R"({"alg":"ES256","typ":"JWT"})";

std::string Jwt(const std::string& claims_json, const std::string& header_json = kHeader) {
  return B64Url(header_json) + "." + B64Url(claims_json) + "." + B64Url("not-a-real-signature");
}

// {"alg":"ES256","typ":"JWT"} .
// {"sub":"edge-01","tid":"tenant-a","jti":"tok-1","iat":1700000000,"exp":1700003600} . "sig"
const std::string kLiteralToken =
    "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiJlZGdlLTAxIiwidGlkIjoidGVuYW50LWEiLCJqdGkiOiJ0b2stMSIsImlhdCI6MTcwMDAwMDAwMCwiZXhw"
    "IjoxNzAwMDAzNjAwfQ.c2ln";

TEST(NodeTokenTest, TestEncoderMatchesTheLiteralVector) {
  EXPECT_EQ(Jwt(R"({"sub":"edge-01","tid":"tenant-a","jti":"tok-1","iat":1700000000,)"
                R"("exp":1700003600})")
                .substr(0, kLiteralToken.rfind('.')),
            kLiteralToken.substr(0, kLiteralToken.rfind('.')));
  EXPECT_EQ(B64Url("sig"), "c2ln");
  EXPECT_EQ(B64Url("ab"), "YWI");
  EXPECT_EQ(B64Url("\xfb\xff"), "-_8");
}

TEST(NodeTokenTest, ParsesClaimsWithoutVerifying) {
  auto t = NodeToken::Parse(kLiteralToken, "edge-01", kReceived);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_EQ(t->token, kLiteralToken);
  EXPECT_EQ(t->node_id, "edge-01");
  EXPECT_EQ(t->tenant_id, "tenant-a");
  EXPECT_EQ(t->jti, "tok-1");
  EXPECT_EQ(t->issued_at, Clock::WallTime(seconds(1'700'000'000)));
  EXPECT_EQ(t->expires_at, Clock::WallTime(seconds(1'700'003'600)));
  EXPECT_EQ(t->Lifetime(), milliseconds(3'600'000));
}

TEST(NodeTokenTest, MissingIatUsesTheReceiptTime) {
  auto t = NodeToken::Parse(Jwt(R"({"sub":"edge-01","tid":"t","exp":1700000700})"), "edge-01",
                            kReceived);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_EQ(t->issued_at, kReceived);
  EXPECT_EQ(t->Lifetime(), milliseconds(600'000));
  EXPECT_EQ(t->jti, "");
}

TEST(NodeTokenTest, FreshAtHonoursTheMargin) {
  auto t = NodeToken::Parse(kLiteralToken, "edge-01", kReceived);
  ASSERT_TRUE(t);
  const Clock::WallTime exp{seconds(1'700'003'600)};
  EXPECT_TRUE(t->FreshAt(exp - 61s, 60s));
  EXPECT_FALSE(t->FreshAt(exp - 60s, 60s));
  EXPECT_FALSE(t->FreshAt(exp + 1s, 0s));
}

// The error is INVALID_ARGUMENT, says what is wrong (`needle`) and does not echo the token.
void ExpectRejected(const std::string& token, const std::string& needle,
                    const std::string& node_id = "edge-01") {
  auto t = NodeToken::Parse(token, node_id, kReceived);
  ASSERT_FALSE(t) << "accepted: " << token;
  EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument) << t.error().ToString();
  EXPECT_NE(t.error().message.find(needle), std::string::npos)
      << "expected \"" << needle << "\" in: " << t.error().message;
  if (token.size() > 8) {
    EXPECT_EQ(t.error().message.find(token), std::string::npos) << "the token leaks";
  }
}

TEST(NodeTokenTest, ClaimErrorsNameTheClaim) {
  ExpectRejected(Jwt(R"({"sub":"edge-02","tid":"t","exp":1700003600})"), "sub");
  ExpectRejected(Jwt(R"({"sub":"edge-02","tid":"t","exp":1700003600})"), "edge-01");
  ExpectRejected(Jwt(R"({"tid":"t","exp":1700003600})"), "sub");
  ExpectRejected(Jwt(R"({"sub":7,"tid":"t","exp":1700003600})"), "sub");
  ExpectRejected(Jwt(R"({"sub":"edge-01","exp":1700003600})"), "tid");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":["t"],"exp":1700003600})"), "tid");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t"})"), "exp");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t","exp":"1700003600"})"), "exp");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t","exp":1700003600.5})"), "exp");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t","exp":null})"), "exp");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t","exp":1700003600,"iat":"now"})"), "iat");
  // Expires before (or when) it was issued.
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t","exp":1700000000,"iat":1700000000})"), "exp");
  ExpectRejected(Jwt(R"({"sub":"edge-01","tid":"t","exp":1600000000})"), "exp");
}

TEST(NodeTokenTest, MalformedTokensAreClearErrors) {
  const std::string claims = B64Url(R"({"sub":"edge-01","tid":"t","exp":1700003600})");
  ExpectRejected("", "empty");
  ExpectRejected("not-a-jwt-at-all", "three");
  ExpectRejected(B64Url(kHeader) + "." + claims, "three");
  ExpectRejected(B64Url(kHeader) + "." + claims + ".c2ln.c2ln", "three");
  ExpectRejected("..", "JSON");
  ExpectRejected("!!!!." + claims + ".c2ln", "base64url");
  ExpectRejected(B64Url(kHeader) + ".e30*e30.c2ln", "base64url");
  ExpectRejected(B64Url(kHeader) + "." + B64Url("this is not json") + ".c2ln", "JSON");
  ExpectRejected(B64Url(kHeader) + "." + B64Url(R"({"sub":"edge-01",)") + ".c2ln", "JSON");
  ExpectRejected(B64Url(kHeader) + "." + B64Url(R"(["sub","edge-01"])") + ".c2ln", "JSON");
  ExpectRejected(B64Url(kHeader) + "." + B64Url(std::string("\xff\xfe\x00\x01", 4)) + ".c2ln",
                 "JSON");
  ExpectRejected(B64Url("not json") + "." + claims + ".c2ln", "header");
}

// exp/iat are seconds since 1970 converted to a nanosecond clock: a value it cannot hold
// (beyond ±9e9 s) is an INVALID_ARGUMENT naming the claim, never an overflow (UBSan would
// abort the agent) nor a wrapped expiry.
TEST(NodeTokenTest, OutOfRangeExpOrIatIsAnErrorNamingTheClaim) {
  auto parse = [](const std::string& iat, const std::string& exp) {
    return NodeToken::Parse(
        Jwt(R"({"sub":"edge-01","tid":"t","iat":)" + iat + R"(,"exp":)" + exp + "}"), "edge-01",
        kReceived);
  };
  for (const char* exp :
       {"1000000000000", "9223372036854775807", "18446744073709551615", "-1000000000000"}) {
    auto t = parse("1700000000", exp);
    ASSERT_FALSE(t) << exp;
    EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(t.error().message.find("'exp'"), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find("out of range"), std::string::npos) << t.error().message;
  }
  auto bad_iat = parse("-9223372036854775807", "1700003600");
  ASSERT_FALSE(bad_iat);
  EXPECT_NE(bad_iat.error().message.find("'iat'"), std::string::npos) << bad_iat.error().message;
  // The edge of the range is still a time.
  auto far = parse("1700000000", "9000000000");
  ASSERT_TRUE(far) << far.error().message;
  EXPECT_EQ(far->expires_at, Clock::WallTime(std::chrono::seconds(9'000'000'000)));
}

// A Random that returns a set value (clamped into [0, bound)) and records the bound.
class SetRandom final : public Random {
 public:
  explicit SetRandom(uint64_t value) : value_(value) {}
  uint64_t Uniform(uint64_t bound) override {
    last_bound_ = bound;
    if (bound == 0) return 0;
    return std::min(value_, bound - 1);
  }
  uint64_t last_bound_ = 0;

 private:
  uint64_t value_;
};

TEST(RenewalDelayTest, BothEndsAreSeventyAndNinetyPercent) {
  SetRandom low(0);
  EXPECT_EQ(RenewalDelay(milliseconds(3'600'000), low), milliseconds(2'520'000));
  SetRandom high(UINT64_MAX);
  EXPECT_EQ(RenewalDelay(milliseconds(3'600'000), high), milliseconds(3'240'000));
  // The jitter spans the whole 20 %: the bound asked for covers 70 %..90 % inclusive.
  EXPECT_EQ(high.last_bound_, 720'001u);
  SetRandom mid(360'000);
  EXPECT_EQ(RenewalDelay(milliseconds(3'600'000), mid), milliseconds(2'880'000));
}

TEST(RenewalDelayTest, JitteredDelaysStayInsideTheWindow) {
  DefaultRandom random(42);
  const milliseconds lifetime(15 * 60 * 1000);
  milliseconds lowest = lifetime, highest{0};
  for (int i = 0; i < 2000; ++i) {
    const auto d = RenewalDelay(lifetime, random);
    ASSERT_GE(d, lifetime * 7 / 10);
    ASSERT_LE(d, lifetime * 9 / 10);
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
  }
  // Actually jittered, not one fixed point.
  EXPECT_LT(lowest, lifetime * 75 / 100);
  EXPECT_GT(highest, lifetime * 85 / 100);
}

TEST(RenewalDelayTest, NeverBeforeNowAndAtLeastOneSecond) {
  SetRandom low(0);
  SetRandom high(UINT64_MAX);
  for (milliseconds lifetime :
       {milliseconds(0), milliseconds(-5000), milliseconds(1), milliseconds(999)}) {
    EXPECT_EQ(RenewalDelay(lifetime, low), 1s) << lifetime.count();
    EXPECT_EQ(RenewalDelay(lifetime, high), 1s) << lifetime.count();
  }
  // 1.4 s: 70 % (980 ms) is raised to the floor, 90 % (1260 ms) is above it.
  EXPECT_EQ(RenewalDelay(milliseconds(1400), low), 1s);
  EXPECT_EQ(RenewalDelay(milliseconds(1400), high), milliseconds(1260));
  // Above the floor the window applies again.
  EXPECT_EQ(RenewalDelay(10s, low), 7s);
  EXPECT_EQ(RenewalDelay(10s, high), 9s);
}

TEST(RenewalDelayTest, FromAParsedTokenRenewsWithinItsLifetime) {
  auto t = NodeToken::Parse(kLiteralToken, "edge-01", kReceived);
  ASSERT_TRUE(t);
  SetRandom low(0);
  SetRandom high(UINT64_MAX);
  const Clock::WallTime issued{seconds(1'700'000'000)};
  EXPECT_EQ(issued + RenewalDelay(t->Lifetime(), low), issued + 2520s);
  EXPECT_EQ(issued + RenewalDelay(t->Lifetime(), high), issued + 3240s);
  EXPECT_LT(issued + RenewalDelay(t->Lifetime(), high), t->expires_at);
}

}  // namespace
}  // namespace edge::agentedge
