// The control-plane client's URL parsing and the credential it sends: the static token when
// one is configured (per-worker first), else a fresh signed aud=worker:control-plane token.
#include <gtest/gtest.h>

#include "agent/identity/worker_token.h"
#include "agent/worker_rpc/control_plane_client.h"
#include "tests/support/manual_clock.h"

namespace edge::workerrpc {
namespace {

TEST(ControlPlaneUrl, Parses) {
  auto u = http::ParseUrl("https://cp.example.com/base/", "worker.control_plane_url");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "cp.example.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->base_path, "/base");
  u = http::ParseUrl("http://127.0.0.1:8080", "worker.control_plane_url");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->base_path, "");
  u = http::ParseUrl("http://[::1]:9/x", "worker.control_plane_url");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9);
  for (auto bad :
       {"ftp://x", "http://", "http://h:0", "http://h:70000", "http://h:x", "http://[::1"}) {
    EXPECT_FALSE(http::ParseUrl(bad, "worker.control_plane_url")) << bad;
  }
}

TEST(ControlPlaneClient, CredentialChoice) {
  ManualClock clock;
  ControlPlaneUrl url{.host = "127.0.0.1", .port = 1};
  config::WorkerAuth a;
  a.worker_signing_key = "cp-signing-key-hhhhhhhh";
  ControlPlaneClient minted(url, "w1", a, clock);
  auto t = minted.Token();
  ASSERT_TRUE(t);
  identity::WorkerTokenVerifyOptions o;
  o.worker_id = "w1";
  o.audience = "worker:control-plane";
  o.keys = {a.worker_signing_key};
  auto claims = identity::WorkerToken::Verify(*t, o, clock.Now());
  ASSERT_TRUE(claims) << claims.error().message;
  EXPECT_EQ(claims->aud, "worker:control-plane");
  EXPECT_LE(claims->exp - *claims->iat, 15 * 60);

  a.worker_token = "shared-static-token";
  EXPECT_EQ(*ControlPlaneClient(url, "w1", a, clock).Token(), "shared-static-token");
  a.worker_tokens["w1"] = "per-worker-static";
  EXPECT_EQ(*ControlPlaneClient(url, "w1", a, clock).Token(), "per-worker-static");
  EXPECT_FALSE(ControlPlaneClient(url, "w1", config::WorkerAuth{}, clock).Token());
}

TEST(ControlPlaneClient, UnreachableControlPlaneIsAnError) {
  ManualClock clock;
  config::WorkerAuth a;
  a.worker_token = "shared-static-token";
  // Port 1 on loopback: nothing listens.
  ControlPlaneClient c({.host = "127.0.0.1", .port = 1}, "w1", a, clock, std::chrono::seconds(5));
  sandbox::Lease l{"sb", "w1", 1, clock.Now()};
  auto r = c.RenewLease(l, "5m");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace edge::workerrpc
