// Worker credentials on both sides of the worker contract (wire.md §4.1): secret files read
// again when they change, the worker's own-id check, the control plane's any-id check with
// per-worker tokens looked up by the presented id, and which token a caller presents.
// Signed-token vectors for the MAC itself are checked against openssl in the integration
// tests; here the verifier is only driven.
#include <gtest/gtest.h>

#include <fstream>

#include "agent/identity/worker_authenticator.h"
#include "agent/identity/worker_token.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::identity {
namespace {

using namespace std::chrono;

TEST(SecretSource, FileIsReadAgainWhenItChanges) {
  edge::testing::TempDir dir("secret");
  const std::string path = dir / "token";
  auto write = [&](const std::string& s) { std::ofstream(path, std::ios::trunc) << s; };
  write("first-secret-value\n");
  SecretSource src("first-secret-value", path);
  EXPECT_EQ(src.Get(), "first-secret-value");
  write("second-secret-value-longer\n");
  EXPECT_EQ(src.Get(), "second-secret-value-longer");
  write("");  // an empty file keeps the last value
  EXPECT_EQ(src.Get(), "second-secret-value-longer");
  EXPECT_EQ(SecretSource("inline-value", "").Get(), "inline-value");
}

TEST(WorkerAuthenticator, FileTokenRotatesWithoutRestart) {
  edge::testing::TempDir dir("auth");
  const std::string path = dir / "token";
  std::ofstream(path) << "token-one-aaaaaa\n";
  config::WorkerAuth a;
  a.worker_token = "token-one-aaaaaa";
  a.worker_token_file = path;
  ManualClock clock;
  WorkerAuthenticator auth("w1", a, clock);
  EXPECT_TRUE(auth.Check("w1", "token-one-aaaaaa", "worker:rpc"));
  std::ofstream(path, std::ios::trunc) << "token-two-bbbbbbbbbb\n";
  EXPECT_FALSE(auth.Check("w1", "token-one-aaaaaa", "worker:rpc"));
  EXPECT_TRUE(auth.Check("w1", "token-two-bbbbbbbbbb", "worker:rpc"));
  WorkerAuthenticator none("w1", config::WorkerAuth{}, clock);
  EXPECT_FALSE(none.configured());
  auto r = none.Check("w1", "anything", "worker:rpc");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no worker credentials"), std::string::npos);
}

TEST(WorkerAuthenticator, ControlPlaneAcceptsAnyWorkerWithItsOwnCredential) {
  config::WorkerAuth a;
  a.worker_token = "shared-token-aaaaaaaa";
  a.worker_tokens["w2"] = "per-worker-w2-bbbbbb";
  a.worker_signing_key = "signing-key-cccccccc";
  ManualClock clock(Clock::WallTime(seconds(1'700'000'000)));
  auto cp = WorkerAuthenticator::ForControlPlane(a, clock);
  EXPECT_EQ(cp.worker_id(), "");
  auto ok = cp.Check("w1", "shared-token-aaaaaaaa", kWorkerControlPlaneAudience);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->worker_id, "w1");
  EXPECT_EQ(ok->kind, "shared");
  // w2 has its own token: the shared one is refused for it.
  auto refused = cp.Check("w2", "shared-token-aaaaaaaa", kWorkerControlPlaneAudience);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("auth.worker_tokens.w2"), std::string::npos);
  EXPECT_EQ(refused.error().message.find("shared-token"), std::string::npos);
  EXPECT_TRUE(cp.Check("w2", "per-worker-w2-bbbbbb", kWorkerControlPlaneAudience));
  // A signed token is for the id it names, and for the control plane's audience only.
  auto claims = WorkerToken::NewClaims("w3", minutes(5), clock.Now(),
                                       std::string(kWorkerControlPlaneAudience));
  auto token = WorkerToken::Issue(claims, "signing-key-cccccccc");
  ASSERT_TRUE(token);
  auto signed_ok = cp.Check("w3", *token, kWorkerControlPlaneAudience);
  ASSERT_TRUE(signed_ok) << signed_ok.error().message;
  EXPECT_EQ(signed_ok->kind, "signed");
  EXPECT_FALSE(cp.Check("w4", *token, kWorkerControlPlaneAudience));
  EXPECT_FALSE(cp.Check("w3", *token, kWorkerRpcAudience));
  // An id that is not an id is refused before any credential is looked at.
  auto bad = cp.Check("../w1", "shared-token-aaaaaaaa", kWorkerControlPlaneAudience);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("is not a worker id"), std::string::npos);
}

TEST(WorkerAuthenticator, WorkerAcceptsOnlyItsOwnId) {
  config::WorkerAuth a;
  a.worker_token = "shared-token-aaaaaaaa";
  a.worker_tokens["w2"] = "per-worker-w2-bbbbbb";
  ManualClock clock;
  WorkerAuthenticator w1("w1", a, clock);
  EXPECT_TRUE(w1.Check("w1", "shared-token-aaaaaaaa", kWorkerRpcAudience));
  auto other = w1.Check("w2", "per-worker-w2-bbbbbb", kWorkerRpcAudience);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("is not this worker"), std::string::npos);
  auto headers = [](std::string_view name) -> std::optional<std::string_view> {
    if (name == "X-Worker-ID") return "w1";
    if (name == "Authorization") return "Bearer shared-token-aaaaaaaa";
    return std::nullopt;
  };
  EXPECT_TRUE(w1.Authenticate(headers, kWorkerRpcAudience));
}

TEST(WorkerCredentials, StaticFirstForTheWorkerSignedFirstForTheControlPlane) {
  config::WorkerAuth a;
  a.worker_token = "shared-token-aaaaaaaa";
  a.worker_tokens["w2"] = "per-worker-w2-bbbbbb";
  a.worker_signing_key = "signing-key-cccccccc";
  ManualClock clock(Clock::WallTime(seconds(1'700'000'000)));
  WorkerCredentials creds(a, clock);
  using P = WorkerCredentials::Prefer;
  EXPECT_EQ(*creds.TokenFor("w2", kWorkerControlPlaneAudience, minutes(5), P::kStatic),
            "per-worker-w2-bbbbbb");
  EXPECT_EQ(*creds.TokenFor("w1", kWorkerControlPlaneAudience, minutes(5), P::kStatic),
            "shared-token-aaaaaaaa");
  auto minted = creds.TokenFor("w2", kWorkerRpcAudience, minutes(5), P::kSigned);
  ASSERT_TRUE(minted);
  WorkerTokenVerifyOptions o;
  o.worker_id = "w2";
  o.audience = std::string(kWorkerRpcAudience);
  o.keys = {"signing-key-cccccccc"};
  auto claims = WorkerToken::Verify(*minted, o, clock.Now());
  ASSERT_TRUE(claims) << claims.error().message;
  EXPECT_EQ(claims->exp - *claims->iat, 300);
  // Nothing configured: UNAUTHENTICATED naming the keys to set.
  WorkerCredentials none(config::WorkerAuth{}, clock);
  auto err = none.TokenFor("w1", kWorkerRpcAudience, minutes(5), P::kSigned);
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(err.error().message.find("worker_signing_key"), std::string::npos);
}

}  // namespace
}  // namespace edge::identity
