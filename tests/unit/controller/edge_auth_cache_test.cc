// EdgeAuthCache: what an edge stream may reuse of an earlier verification, and when it must
// verify again (a new Store generation, other token bytes, a wider use, a clock outside the
// window the token was accepted for, or a Store that does not track generations).
#include "controller/edge_auth_cache.h"

#include <gtest/gtest.h>

namespace edge::controller {
namespace {

constexpr int64_t kVerifiedAt = 1'000'000;
constexpr int64_t kUntil = 1'060'000;

NodeTokenClaims Claims(int64_t accepted_until_ms) {
  return NodeTokenClaims{.node_id = "edge-01",
                         .tenant_id = "t1",
                         .jti = "nt-1",
                         .issued_at_ms = kVerifiedAt - 5'000,
                         .expires_at_ms = kVerifiedAt + 3'600'000,
                         .accepted_until_ms = accepted_until_ms};
}

TEST(EdgeAuthCacheTest, ATokenIsReusedOnlyForTheSameBytesGenerationAndWindow) {
  EdgeAuthCache cache;
  const std::string token = "header.payload.signature";
  EXPECT_FALSE(cache.TokenStillValid(7, token, TokenUse::kOpenStream, kVerifiedAt))
      << "nothing verified yet";
  cache.RememberToken(7, token, TokenUse::kOpenStream, kVerifiedAt, Claims(kUntil));

  EXPECT_TRUE(cache.TokenStillValid(7, token, TokenUse::kOpenStream, kVerifiedAt));
  EXPECT_TRUE(cache.TokenStillValid(7, token, TokenUse::kOpenStream, kUntil - 1));
  EXPECT_FALSE(cache.TokenStillValid(7, token, TokenUse::kOpenStream, kUntil))
      << "at accepted_until (exp, or the end of an overlap window) it is verified again";
  EXPECT_FALSE(cache.TokenStillValid(7, token, TokenUse::kOpenStream, kVerifiedAt - 1))
      << "a clock that went back before the verification verifies again";
  EXPECT_FALSE(cache.TokenStillValid(8, token, TokenUse::kOpenStream, kVerifiedAt))
      << "the Store changed what authenticates nodes since";
  EXPECT_FALSE(cache.TokenStillValid(std::nullopt, token, TokenUse::kOpenStream, kVerifiedAt))
      << "a Store without generations is never trusted";
  EXPECT_FALSE(
      cache.TokenStillValid(7, "header.payload.signaturE", TokenUse::kOpenStream, kVerifiedAt))
      << "one byte differs";
  EXPECT_FALSE(cache.TokenStillValid(7, "header.payload.sig", TokenUse::kOpenStream, kVerifiedAt))
      << "a prefix";
  EXPECT_FALSE(cache.TokenStillValid(7, "", TokenUse::kOpenStream, kVerifiedAt));
  EXPECT_FALSE(cache.TokenStillValid(7, token, TokenUse::kNewSession, kVerifiedAt))
      << "accepted on an open stream (maybe only inside an overlap window) is not accepted for "
         "a new session";
}

TEST(EdgeAuthCacheTest, ANewSessionPassAlsoHoldsOnTheOpenStream) {
  EdgeAuthCache cache;
  cache.RememberToken(3, "t", TokenUse::kNewSession, kVerifiedAt, Claims(kUntil));
  EXPECT_TRUE(cache.TokenStillValid(3, "t", TokenUse::kNewSession, kVerifiedAt + 1));
  EXPECT_TRUE(cache.TokenStillValid(3, "t", TokenUse::kOpenStream, kVerifiedAt + 1));
}

TEST(EdgeAuthCacheTest, TheLatestVerificationReplacesTheOneBefore) {
  EdgeAuthCache cache;
  cache.RememberToken(3, "old", TokenUse::kOpenStream, kVerifiedAt, Claims(kUntil));
  cache.RememberToken(4, "new", TokenUse::kOpenStream, kVerifiedAt + 10, Claims(kUntil + 10));
  EXPECT_FALSE(cache.TokenStillValid(4, "old", TokenUse::kOpenStream, kVerifiedAt + 10));
  EXPECT_FALSE(cache.TokenStillValid(3, "new", TokenUse::kOpenStream, kVerifiedAt + 10));
  EXPECT_TRUE(cache.TokenStillValid(4, "new", TokenUse::kOpenStream, kVerifiedAt + 10));
}

TEST(EdgeAuthCacheTest, KeysAreKeptPerGenerationAndNothingElseOfTheRecord) {
  EdgeAuthCache cache;
  EXPECT_EQ(cache.Keys(1), nullptr);
  EdgeNodeRecord node{.node_id = "edge-01",
                      .tenant_id = "t1",
                      .public_key = std::string(32, 'b'),
                      .prev_public_key = std::string(32, 'a'),
                      .prev_key_until_ms = 5'000,
                      .capabilities_json = std::string(4096, 'x')};
  const EdgeNodeRecord& kept = cache.RememberKeys(1, node);
  EXPECT_EQ(kept.public_key, node.public_key);
  EXPECT_EQ(kept.prev_public_key, node.prev_public_key);
  EXPECT_EQ(kept.prev_key_until_ms, 5'000);
  EXPECT_TRUE(kept.capabilities_json.empty()) << "a stream keeps only what verifies envelopes";
  EXPECT_TRUE(kept.tenant_id.empty());
  ASSERT_EQ(cache.Keys(1), &kept);
  EXPECT_EQ(cache.Keys(2), nullptr);
  EXPECT_EQ(cache.Keys(std::nullopt), nullptr);
  cache.RememberKeys(std::nullopt, node);
  EXPECT_EQ(cache.Keys(std::nullopt), nullptr) << "untracked: never handed back";
}

}  // namespace
}  // namespace edge::controller
