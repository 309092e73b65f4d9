// SqliteStore's edge tables (schema version 2): migration of a version-1 database, edge
// enrollment (single-use jti, tenant binding), key rotation (nonces, concurrency, overlap),
// the token blacklist, stale marking and command results (first wins, across reopen).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "controller/sqlite_store.h"
#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

class SqliteStoreEdgeTest : public StoreTestBase {
 protected:
  static JoinTokenRecord Token(const std::string& id, const std::string& node = "",
                               const std::string& tenant = "t1") {
    return JoinTokenRecord{.token_id = id,
                           .token_hash = "hash-" + id,
                           .node_id = node,
                           .tenant_id = tenant,
                           .created_at_ms = 1000,
                           .expires_at_ms = 100'000};
  }
  static EdgeEnrollment Enrollment(const std::string& jti, const std::string& node,
                                   const std::string& key, const std::string& tenant = "t1") {
    return EdgeEnrollment{.jti = jti,
                          .join_token_hash = "hash-" + jti,
                          .node_id = node,
                          .tenant_id = tenant,
                          .public_key = key,
                          .now_ms = 2000,
                          .token = {.jti = "nt-" + jti + "-" + node,
                                    .node_id = node,
                                    .issued_at_ms = 2000,
                                    .expires_at_ms = 3'602'000}};
  }
  // edge-01's key `from` → `to` at `now_ms` (`to` == `from`: a token refresh), the old token
  // blacklisted until `overlap_until_ms`, the new one `new_jti`, valid an hour.
  static KeyRotation Rotation(const std::string& from, const std::string& to, char nonce,
                              const std::string& old_jti, const std::string& new_jti,
                              int64_t now_ms, int64_t overlap_until_ms) {
    return KeyRotation{.node_id = "edge-01",
                       .expected_public_key = from,
                       .new_public_key = to,
                       .nonce = std::string(32, nonce),
                       .old_token_jti = old_jti,
                       .overlap_until_ms = overlap_until_ms,
                       .now_ms = now_ms,
                       .new_token = {.jti = new_jti,
                                     .node_id = "edge-01",
                                     .issued_at_ms = now_ms,
                                     .expires_at_ms = now_ms + 3'600'000}};
  }
};

const std::string kKeyA(32, 'a'), kKeyB(32, 'b'), kKeyC(32, 'c');

TEST_F(SqliteStoreEdgeTest, MigratesAVersionOneDatabaseKeepingItsRows) {
  // A database exactly as the version-1 controller left it (schema copied from migration 1).
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const char* v1 = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE join_tokens (token_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE,
  node_id TEXT NOT NULL DEFAULT '', tenant_id TEXT NOT NULL, created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL, consumed_at_ms BIGINT NOT NULL DEFAULT 0,
  consumed_by TEXT NOT NULL DEFAULT '', revoked_at_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE nodes (node_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, state TEXT NOT NULL,
  cert_serial_hex TEXT NOT NULL DEFAULT '', enrolled_at_ms BIGINT NOT NULL DEFAULT 0,
  last_seen_ms BIGINT NOT NULL DEFAULT 0);
INSERT INTO schema_version VALUES (1);
INSERT INTO join_tokens (token_id, token_hash, tenant_id, created_at_ms, expires_at_ms,
  consumed_at_ms, consumed_by) VALUES ('jt-old', 'hash-jt-old', 't1', 1000, 100000, 1500, 'edge-01');
INSERT INTO nodes VALUES ('edge-01', 't1', 'enrolled', 'ab', 1500, 1500);
)sql";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  auto store = OpenStore();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), 8);
  auto node = store->GetNode("edge-01");
  ASSERT_TRUE(node && node->has_value());
  EXPECT_EQ((*node)->cert_serial_hex, "ab");
  // The old node, enrolled with a token it consumed, can now enroll for the edge stream.
  auto e = store->EnrollEdgeNode(Enrollment("jt-old", "edge-01", kKeyA));
  ASSERT_TRUE(e) << e.error().ToString();
  EXPECT_EQ(e->tenant_id, "t1");
  EXPECT_EQ(e->public_key, kKeyA);
}

TEST_F(SqliteStoreEdgeTest, EnrollmentRedeemsTheJtiOnceAndBindsTheTenant) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("j1")));
  ASSERT_TRUE(store->ConsumeJoinToken("hash-j1", "edge-01", 1500));
  ASSERT_TRUE(store->UpsertNode({"edge-01", "t1", "enrolled", "ab", 1500, 1500}));

  auto e = store->EnrollEdgeNode(Enrollment("j1", "edge-01", kKeyA));
  ASSERT_TRUE(e) << e.error().ToString();
  EXPECT_EQ(e->enrollment_jti, "j1");
  EXPECT_EQ(e->edge_enrolled_at_ms, 2000);
  auto tok = store->GetNodeToken("nt-j1-edge-01");
  ASSERT_TRUE(tok && tok->has_value()) << "the token is recorded in the same transaction";
  EXPECT_EQ((*tok)->revoked_at_ms, 0);

  EdgeEnrollment second = Enrollment("j1", "edge-01", kKeyB);
  second.token.jti = "nt-again";
  auto again = store->EnrollEdgeNode(second);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(again.error().message.find("already redeemed"), std::string::npos);
  EXPECT_EQ((*store->GetEdgeNode("edge-01"))->public_key, kKeyA) << "nothing changed";
  EXPECT_FALSE(store->GetNodeToken("nt-again").value().has_value()) << "its token rolled back";
}

TEST_F(SqliteStoreEdgeTest, ANodesOwnLimitsRaiseTheirVersionOnlyWhenChangedAndSurviveReopen) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->InsertJoinToken(Token("j1")));
    ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("j1", "edge-01", kKeyA)));
    auto fresh = store->GetEdgeNode("edge-01");
    ASSERT_TRUE(fresh && *fresh);
    EXPECT_EQ((*fresh)->limits_json, "") << "the controller's limits until a push";
    EXPECT_EQ((*fresh)->limits_version, 0);
    EXPECT_EQ(store->SetEdgeNodeLimits("edge-01", R"({"rate_limit":5})", 3000), 1);
    EXPECT_EQ(store->SetEdgeNodeLimits("edge-01", R"({"rate_limit":5})", 4000), 1)
        << "the same limits: no new version";
    EXPECT_EQ(store->SetEdgeNodeLimits("edge-01", R"({"rate_limit":6})", 5000), 2);
    auto unknown = store->SetEdgeNodeLimits("edge-77", "{}", 5000);
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  }
  auto reopened = OpenStore();
  auto node = reopened->GetEdgeNode("edge-01");
  ASSERT_TRUE(node && *node);
  EXPECT_EQ((*node)->limits_json, R"({"rate_limit":6})");
  EXPECT_EQ((*node)->limits_version, 2);
  EXPECT_EQ((*node)->limits_changed_ms, 5000) << "when the version last rose";
}

TEST_F(SqliteStoreEdgeTest, EnrollmentRefusals) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("used-by-other")));
  ASSERT_TRUE(store->ConsumeJoinToken("hash-used-by-other", "edge-02", 1500));
  ASSERT_TRUE(store->InsertJoinToken(Token("bound", "edge-09")));
  ASSERT_TRUE(store->InsertJoinToken(Token("revoked")));
  ASSERT_TRUE(store->RevokeJoinToken("revoked", 1500));
  ASSERT_TRUE(store->InsertJoinToken(Token("fresh")));
  ASSERT_TRUE(store->InsertJoinToken(Token("other-tenant", "", "t2")));

  struct Case {
    EdgeEnrollment e;
    ErrorCode code;
    std::string words;
  } cases[] = {
      {Enrollment("unknown", "edge-01", kKeyA), ErrorCode::kNotFound, "not a join token"},
      {Enrollment("used-by-other", "edge-01", kKeyA), ErrorCode::kPermissionDenied,
       "redeemed by node \"edge-02\""},
      {Enrollment("bound", "edge-01", kKeyA), ErrorCode::kPermissionDenied,
       "bound to node \"edge-09\""},
      {Enrollment("revoked", "edge-01", kKeyA), ErrorCode::kFailedPrecondition, "revoked"},
  };
  for (const auto& c : cases) {
    auto r = store->EnrollEdgeNode(c.e);
    ASSERT_FALSE(r) << c.e.jti;
    EXPECT_EQ(r.error().code, c.code) << c.e.jti << ": " << r.error().ToString();
    EXPECT_NE(r.error().message.find(c.words), std::string::npos) << r.error().message;
  }
  auto mismatch = Enrollment("fresh", "edge-01", kKeyA);
  mismatch.jti = "other-jti";
  auto r = store->EnrollEdgeNode(mismatch);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);

  // An unconsumed token is consumed by the enrollment, so it cannot mint a certificate later.
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("fresh", "edge-01", kKeyA)));
  auto fresh = store->FindJoinTokenByHash("hash-fresh");
  EXPECT_EQ((*fresh)->consumed_by, "edge-01");
  EXPECT_FALSE(store->ConsumeJoinToken("hash-fresh", "edge-01", 3000));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeEnrolled) << "node row created";

  auto tenant = store->EnrollEdgeNode(Enrollment("other-tenant", "edge-01", kKeyB, "t2"));
  ASSERT_FALSE(tenant);
  EXPECT_EQ(tenant.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(tenant.error().message.find("bound to tenant \"t1\""), std::string::npos);
  EXPECT_FALSE((*store->FindJoinTokenByHash("hash-other-tenant"))->consumed_at_ms)
      << "the refused enrollment rolled back the consumption";
}

TEST_F(SqliteStoreEdgeTest, ConcurrentEnrollmentsWithOneTokenHaveExactlyOneWinner) {
  ASSERT_TRUE(OpenStore()->InsertJoinToken(Token("race")));
  constexpr int kRacers = 6;
  std::vector<std::unique_ptr<SqliteStore>> stores;
  for (int i = 0; i < kRacers; ++i)
    stores.push_back(OpenStore());
  std::atomic<int> wins{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      while (!go)
        std::this_thread::yield();
      auto e = Enrollment("race", "edge-01", kKeyA);
      e.token.jti += std::to_string(i);
      if (stores[i]->EnrollEdgeNode(e)) ++wins;
    });
  }
  go = true;
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wins.load(), 1);
}

TEST_F(SqliteStoreEdgeTest, RotationReplacesTheKeyBlacklistsTheOldTokenAndRefusesReplays) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("j1")));
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("j1", "edge-01", kKeyA)));
  KeyRotation r = Rotation(kKeyA, kKeyB, 'n', "nt-j1-edge-01", "nt-2", 2000, 62'000);
  auto rotated = store->RotateEdgeKey(r);
  ASSERT_TRUE(rotated) << rotated.error().ToString();
  EXPECT_EQ(rotated->public_key, kKeyB);
  EXPECT_EQ(rotated->prev_public_key, kKeyA);
  EXPECT_EQ(rotated->prev_key_until_ms, 62'000);
  auto old = store->GetNodeToken("nt-j1-edge-01");
  EXPECT_EQ((*old)->revoked_at_ms, 2000);
  EXPECT_EQ((*old)->revoke_reason, "rotated");
  EXPECT_EQ((*old)->grace_until_ms, 62'000);
  EXPECT_TRUE(store->GetNodeToken("nt-2")->has_value());

  // The same request again: its nonce was seen.
  auto replay = store->RotateEdgeKey(r);
  ASSERT_FALSE(replay);
  EXPECT_EQ(replay.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(replay.error().message.find("nonce"), std::string::npos);

  // A request verified against the old key (a concurrent rotation lost the race).
  r.nonce = std::string(32, 'm');
  r.new_token.jti = "nt-3";
  r.new_public_key = kKeyC;
  auto stale = store->RotateEdgeKey(r);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kAborted);
  EXPECT_FALSE(store->GetNodeToken("nt-3")->has_value()) << "rolled back";
  EXPECT_EQ((*store->GetEdgeNode("edge-01"))->public_key, kKeyB) << "the key is unchanged";

  // Same key = token refresh: the key and the overlap stay, the token changes.
  // The refused request's nonce: it was rolled back with it, so it is still unused.
  KeyRotation refresh = Rotation(kKeyB, kKeyB, 'm', "nt-2", "nt-4", 10'000, 70'000);
  auto refreshed = store->RotateEdgeKey(refresh);
  ASSERT_TRUE(refreshed) << refreshed.error().ToString();
  EXPECT_EQ(refreshed->public_key, kKeyB);
  EXPECT_EQ(refreshed->prev_public_key, kKeyA);
  EXPECT_EQ((*store->GetNodeToken("nt-2"))->revoke_reason, "rotated");

  // Pruning forgets expired tokens and old nonces.
  ASSERT_TRUE(store->PruneExpired(5'000'000));
  EXPECT_FALSE(store->GetNodeToken("nt-4")->has_value());
  r.nonce = std::string(32, 'n');
  r.expected_public_key = kKeyB;
  r.old_token_jti = "gone";
  auto after_prune = store->RotateEdgeKey(r);
  ASSERT_FALSE(after_prune);
  EXPECT_EQ(after_prune.error().code, ErrorCode::kAborted) << "nonce forgotten, token unknown";
}

TEST_F(SqliteStoreEdgeTest, HelloHeartbeatStaleAndRevoke) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("j1")));
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("j1", "edge-01", kKeyA)));
  ASSERT_TRUE(store->RecordHello("edge-01", R"({"os":"linux"})", false, 10'000));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeHealthy);
  EXPECT_EQ((*store->GetEdgeNode("edge-01"))->capabilities_json, R"({"os":"linux"})");

  auto stale = store->MarkStaleNodes(10'000);
  EXPECT_TRUE(stale->empty()) << "heartbeat at the cutoff is not stale";
  stale = store->MarkStaleNodes(10'001);
  ASSERT_EQ(stale->size(), 1u);
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeUnhealthy);
  EXPECT_TRUE(store->MarkStaleNodes(20'000)->empty()) << "reported once";

  ASSERT_TRUE(store->RecordHeartbeat("edge-01", 30'000));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeHealthy);
  EXPECT_EQ((*store->GetEdgeNode("edge-01"))->last_heartbeat_ms, 30'000);

  ASSERT_TRUE(store->UpdateCapabilities("edge-01", "{}", true, 0));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeDraining);
  ASSERT_TRUE(store->RecordHeartbeat("edge-01", 31'000));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeDraining) << "heartbeat keeps draining";

  ASSERT_TRUE(store->RevokeNode("edge-01", 40'000));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeRevoked);
  EXPECT_EQ((*store->GetNodeToken("nt-j1-edge-01"))->revoked_at_ms, 40'000);
  EXPECT_TRUE((*store->GetEdgeNode("edge-01"))->public_key.empty())
      << "its keys are gone: after a new bootstrap it must edge-enroll again with a join token";
  EXPECT_TRUE((*store->GetEdgeNode("edge-01"))->prev_public_key.empty());
  ASSERT_TRUE(store->RecordHello("edge-01", "{}", false, 41'000));
  EXPECT_EQ((*store->GetNode("edge-01"))->state, kNodeRevoked) << "revoked is final";
  EXPECT_EQ(store->RevokeNode("nope", 1).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->RecordHello("nope", "{}", false, 1).error().code, ErrorCode::kNotFound);
}

// Issue 14: EdgeStream reuses a verified token and the node's keys while AuthGeneration is
// unchanged, so every committed change to keys or token revocation must raise it — and
// nothing on the hot path (Hello, heartbeats, capabilities) or a refused change may.
TEST_F(SqliteStoreEdgeTest, AuthGenerationRisesOnEveryCommittedKeyOrTokenChangeAndOnlyThen) {
  auto store = OpenStore();
  ASSERT_TRUE(store->AuthGeneration().has_value()) << "SqliteStore tracks it";
  uint64_t last = *store->AuthGeneration();
  auto rose = [&](const char* what) {
    const uint64_t now = *store->AuthGeneration();
    EXPECT_GT(now, last) << what << " must raise AuthGeneration";
    last = now;
  };
  auto same = [&](const char* what) {
    EXPECT_EQ(*store->AuthGeneration(), last) << what << " must leave AuthGeneration alone";
  };

  ASSERT_TRUE(store->InsertJoinToken(Token("j1")));
  same("a join token");
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("j1", "edge-01", kKeyA)));
  rose("an edge enrollment");
  ASSERT_FALSE(store->EnrollEdgeNode(Enrollment("j1", "edge-01", kKeyB)));
  same("a refused enrollment (the jti was redeemed)");

  ASSERT_TRUE(store->RecordHello("edge-01", "{}", false, 10'000));
  ASSERT_TRUE(store->RecordHeartbeat("edge-01", 11'000));
  ASSERT_TRUE(store->UpdateCapabilities("edge-01", R"({"os":"linux"})", false, 12'000));
  ASSERT_TRUE(store->InsertNodeToken(
      {.jti = "nt-x", .node_id = "edge-01", .issued_at_ms = 12'000, .expires_at_ms = 20'000}));
  same("Hello, heartbeat, capabilities and a new token");

  KeyRotation r = Rotation(kKeyA, kKeyB, 'n', "nt-j1-edge-01", "nt-2", 12'000, 72'000);
  ASSERT_TRUE(store->RotateEdgeKey(r));
  rose("a key rotation");
  ASSERT_FALSE(store->RotateEdgeKey(r));
  same("a refused rotation (replayed nonce)");

  ASSERT_TRUE(store->PruneExpired(1'000));
  same("a prune that deleted no token");
  ASSERT_TRUE(store->PruneExpired(25'000));
  EXPECT_FALSE(store->GetNodeToken("nt-x")->has_value());
  rose("a prune that deleted a token");

  ASSERT_TRUE(store->RevokeNode("edge-01", 30'000));
  rose("a revocation");
  ASSERT_FALSE(store->RevokeNode("nope", 30'000));
  same("a refused revocation (unknown node)");
}

// Issue 15 #3: an unbound join token took over the existing node n2, and re-enrolled a
// revoked node. Both enrollment paths (ConsumeJoinToken = ExchangeJoinToken, EnrollEdgeNode =
// ChallengeNode with its proof) now need a token bound to the node and created with replace.
TEST_F(SqliteStoreEdgeTest, AnUnboundTokenEnrollsOnlyANodeIdTheControllerHasNeverSeen) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("first", "n2")));
  ASSERT_TRUE(store->ConsumeJoinToken("hash-first", "n2", 1500));
  ASSERT_TRUE(store->UpsertNode({"n2", "t1", "enrolled", "serial-1", 1500, 1500}));
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("first", "n2", kKeyA)));
  ASSERT_TRUE(store->RecordHello("n2", "{}", false, 2500));

  ASSERT_TRUE(store->InsertJoinToken(Token("unbound")));
  auto unbound = store->ConsumeJoinToken("hash-unbound", "n2", 3000);
  ASSERT_FALSE(unbound);
  EXPECT_EQ(unbound.error().code, ErrorCode::kPermissionDenied);
  for (const char* words : {"node \"n2\" is already enrolled (state healthy)",
                            "join token unbound is not bound to a node",
                            "edge-controller token create --node n2 --replace"}) {
    EXPECT_NE(unbound.error().message.find(words), std::string::npos) << unbound.error().message;
  }
  EXPECT_EQ((*store->FindJoinTokenByHash("hash-unbound"))->consumed_at_ms, 0)
      << "the refused token is not spent";

  ASSERT_TRUE(store->InsertJoinToken(Token("bound", "n2")));
  auto bound = store->ConsumeJoinToken("hash-bound", "n2", 3000);
  ASSERT_FALSE(bound);
  EXPECT_EQ(bound.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(bound.error().message.find("not created with --replace"), std::string::npos)
      << bound.error().message;

  // ChallengeNode's path: the unbound token, never exchanged, presented for n2.
  auto e = Enrollment("unbound", "n2", kKeyB);
  auto takeover = store->EnrollEdgeNode(e);
  ASSERT_FALSE(takeover);
  EXPECT_EQ(takeover.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(takeover.error().message.find("--replace"), std::string::npos);
  EXPECT_EQ((*store->GetEdgeNode("n2"))->public_key, kKeyA) << "the real n2 keeps its key";
  EXPECT_EQ((*store->GetNode("n2"))->state, kNodeHealthy);
  EXPECT_EQ((*store->GetNode("n2"))->cert_serial_hex, "serial-1");
  EXPECT_EQ((*store->GetNodeToken("nt-first-n2"))->revoked_at_ms, 0);

  // The same unbound token still enrolls a new id.
  auto fresh = store->ConsumeJoinToken("hash-unbound", "n3", 3000);
  ASSERT_TRUE(fresh) << fresh.error().ToString();
  EXPECT_EQ(fresh->replaced_node_state, "") << "a new id";
  EXPECT_EQ((*store->GetNode("n3"))->state, kNodeEnrolled) << "the id is reserved at once";
}

TEST_F(SqliteStoreEdgeTest, AReplaceTokenBoundToTheNodeReplacesItsIdentity) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("first", "n2")));
  ASSERT_TRUE(store->ConsumeJoinToken("hash-first", "n2", 1500));
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("first", "n2", kKeyA)));
  ASSERT_TRUE(store->RecordHello("n2", "{}", false, 2500));

  auto rep = Token("rep", "n2");
  rep.replace = true;
  ASSERT_TRUE(store->InsertJoinToken(rep));
  EXPECT_TRUE((*store->FindJoinTokenByHash("hash-rep"))->replace) << "stored";
  auto consumed = store->ConsumeJoinToken("hash-rep", "n2", 3000);
  ASSERT_TRUE(consumed) << consumed.error().ToString();
  EXPECT_EQ(consumed->replaced_node_state, kNodeHealthy);
  auto e = store->EnrollEdgeNode(Enrollment("rep", "n2", kKeyB));
  ASSERT_TRUE(e) << e.error().ToString();
  EXPECT_TRUE(e->identity_replaced);
  EXPECT_EQ(e->public_key, kKeyB);
  EXPECT_TRUE(e->prev_public_key.empty()) << "the old key gets no overlap";
  auto old_token = store->GetNodeToken("nt-first-n2");
  EXPECT_NE((*old_token)->revoked_at_ms, 0);
  EXPECT_EQ((*old_token)->revoke_reason, "replaced");
  EXPECT_EQ((*store->GetNodeToken("nt-rep-n2"))->revoked_at_ms, 0) << "the new one is valid";

  // A first enrollment is not a replacement.
  ASSERT_TRUE(store->InsertJoinToken(Token("new")));
  auto first = store->EnrollEdgeNode(Enrollment("new", "n9", kKeyC));
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->identity_replaced);
}

TEST_F(SqliteStoreEdgeTest, ARevokedNodeStaysRevokedUntilAReplaceToken) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("first", "n1")));
  ASSERT_TRUE(store->ConsumeJoinToken("hash-first", "n1", 1500));
  ASSERT_TRUE(store->EnrollEdgeNode(Enrollment("first", "n1", kKeyA)));
  ASSERT_TRUE(store->RevokeNode("n1", 2500));

  ASSERT_TRUE(store->InsertJoinToken(Token("unbound")));
  auto exchange = store->ConsumeJoinToken("hash-unbound", "n1", 3000);
  ASSERT_FALSE(exchange);
  EXPECT_EQ(exchange.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(exchange.error().message.find("state revoked"), std::string::npos);
  auto challenge = store->EnrollEdgeNode(Enrollment("unbound", "n1", kKeyB));
  ASSERT_FALSE(challenge);
  EXPECT_EQ(challenge.error().code, ErrorCode::kPermissionDenied);
  ASSERT_TRUE(store->InsertJoinToken(Token("bound", "n1")));
  auto bound = store->EnrollEdgeNode(Enrollment("bound", "n1", kKeyB));
  ASSERT_FALSE(bound);
  EXPECT_EQ(bound.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ((*store->GetNode("n1"))->state, kNodeRevoked) << "still revoked";
  EXPECT_TRUE((*store->GetEdgeNode("n1"))->public_key.empty());

  auto rep = Token("rep", "n1");
  rep.replace = true;
  ASSERT_TRUE(store->InsertJoinToken(rep));
  auto e = store->EnrollEdgeNode(Enrollment("rep", "n1", kKeyB));
  ASSERT_TRUE(e) << e.error().ToString();
  EXPECT_TRUE(e->identity_replaced);
  EXPECT_EQ((*store->GetNode("n1"))->state, kNodeEnrolled) << "the operator lifted it";
}

TEST_F(SqliteStoreEdgeTest, UnconsumeReleasesTheReservedIdAndConcurrentClaimsHaveOneWinner) {
  auto store = OpenStore();
  ASSERT_TRUE(store->InsertJoinToken(Token("a")));
  ASSERT_TRUE(store->ConsumeJoinToken("hash-a", "n5", 1500));
  ASSERT_TRUE(store->GetNode("n5")->has_value());
  ASSERT_TRUE(store->UnconsumeJoinToken("hash-a"));
  EXPECT_FALSE(store->GetNode("n5")->has_value()) << "minting failed: the id is free again";
  EXPECT_EQ((*store->FindJoinTokenByHash("hash-a"))->consumed_at_ms, 0);

  // Two unbound tokens claiming one new id at once: one wins, the other is refused.
  constexpr int kRacers = 6;
  std::vector<std::unique_ptr<SqliteStore>> stores;
  for (int i = 0; i < kRacers; ++i) {
    ASSERT_TRUE(store->InsertJoinToken(Token("r" + std::to_string(i))));
    stores.push_back(OpenStore());
  }
  std::atomic<int> wins{0}, denied{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      while (!go)
        std::this_thread::yield();
      auto r = stores[i]->ConsumeJoinToken("hash-r" + std::to_string(i), "n6", 2000);
      if (r) {
        ++wins;
      } else if (r.error().code == ErrorCode::kPermissionDenied) {
        ++denied;
      }
    });
  }
  go = true;
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(denied.load(), kRacers - 1);
}

TEST_F(SqliteStoreEdgeTest, FirstResultWinsAlsoAfterReopen) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->InsertCommand({.command_id = "c1",
                                      .node_id = "edge-01",
                                      .tool = "exec",
                                      .args_json = R"({"command":"true"})",
                                      .state = kCommandDispatched,
                                      .created_at_ms = 1000}));
    EXPECT_EQ(
        store
            ->InsertCommand(
                {.command_id = "c1", .node_id = "x", .tool = "t", .state = kCommandDispatched})
            .error()
            .code,
        ErrorCode::kAlreadyExists);
    auto first = store->CompleteCommand("c1", "edge-01", {.outcome = "ok", .exit_code = 3}, 2000);
    ASSERT_TRUE(first && *first);
    auto dup = store->CompleteCommand("c1", "edge-01", {.outcome = "error"}, 2001);
    ASSERT_TRUE(dup);
    EXPECT_FALSE(*dup);
    EXPECT_EQ(store->CompleteCommand("c1", "edge-02", {.outcome = "ok"}, 1).error().code,
              ErrorCode::kPermissionDenied);
    EXPECT_EQ(store->CompleteCommand("zz", "edge-01", {.outcome = "ok"}, 1).error().code,
              ErrorCode::kNotFound);
  }
  auto store = OpenStore();
  auto dup = store->CompleteCommand("c1", "edge-01", {.outcome = "cancelled"}, 3000);
  ASSERT_TRUE(dup);
  EXPECT_FALSE(*dup) << "de-duplication survives a reopen";
  auto c = store->GetCommand("c1");
  ASSERT_TRUE(c && c->has_value());
  EXPECT_EQ((*c)->state, kCommandCompleted);
  EXPECT_EQ((*c)->result.outcome, "ok");
  EXPECT_EQ((*c)->result.exit_code, 3);
  EXPECT_EQ((*c)->completed_at_ms, 2000);
  EXPECT_EQ((*c)->args_json, R"({"command":"true"})");
}

TEST_F(SqliteStoreEdgeTest, ListCommandsNewestFirstFilteredAndLimited) {
  auto store = OpenStore();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store->InsertCommand({.command_id = "c" + std::to_string(i),
                                      .node_id = i % 2 ? "odd" : "even",
                                      .tool = "sysinfo",
                                      .args_json = "{}",
                                      .state = kCommandDispatched,
                                      .created_at_ms = 1000 + i}));
  }
  auto all = store->ListCommands("", 0);
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ(all->front().command_id, "c4");
  auto even = store->ListCommands("even", 2);
  ASSERT_EQ(even->size(), 2u);
  EXPECT_EQ((*even)[0].command_id, "c4");
  EXPECT_EQ((*even)[1].command_id, "c2");
}

}  // namespace
}  // namespace edge::controller
