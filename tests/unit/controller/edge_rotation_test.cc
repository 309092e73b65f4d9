// RotateEdgeKey (wire.md §2.5): over real mTLS against a live stream — the new token, the old
// key accepted on the open stream until the overlap window ends, the old token revoked, bad
// proofs refused, nonce replay, token refresh, unhealthy/revoked nodes — and, on
// EdgeAttestation directly, a concurrent rotation of the same node is ABORTED.
#include <future>

#include "agent/identity/encoding.h"
#include "agent/identity/rotation_proof.h"
#include "controller/edge_attestation.h"
#include "controller/sqlite_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/controller/edge_test_support.h"
#include "tests/unit/controller/forwarding_store.h"

namespace edge::controller::testing {
namespace {

const std::string kSid = "6f1c1c1e-0000-4000-8000-0000000000e1";

class EdgeRotationTest : public ControllerHarness {
 protected:
  grpc::Status Rotate(TestNode& node, const pb::RotateEdgeKeyRequest& req,
                      pb::RotateEdgeKeyResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return node.stub->RotateEdgeKey(&ctx, req, resp);
  }
  pb::RotateEdgeKeyRequest Proof(TestNode& node, const identity::NodeKey& new_key,
                                 std::string nonce = {}) {
    auto req =
        identity::RotationProof::Build(*node.key, new_key, node.id, node.token, std::move(nonce));
    EXPECT_TRUE(req) << req.error().ToString();
    return *req;
  }
};

TEST_F(EdgeRotationTest, RotationKeepsTheStreamThroughTheOverlapThenOnlyTheNewKeyWorks) {
  auto node = EnrolledNode("edge-01");
  auto s = node->Open(node->token);
  ASSERT_TRUE(s->Write(node->Hello(kSid)));
  ASSERT_TRUE(WaitConnected("edge-01"));

  auto new_key = identity::NodeKey::Generate();
  pb::RotateEdgeKeyResponse resp;
  auto st = Rotate(*node, Proof(*node, *new_key), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.overlap_window().seconds(), 60);
  EXPECT_EQ(resp.expires_at().seconds() - resp.issued_at().seconds(), 3600);
  auto parts = identity::VerifyJwtEs256(resp.node_security_token(), TokenKey().get(), clock_.Now());
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->claims["sub"], "edge-01");
  EXPECT_EQ(NodeInfo("edge-01")->public_key_sha256(),
            identity::HexEncode(identity::Sha256(new_key->public_key())));

  const std::string old_token = node->token;
  const identity::NodeKey old_key = *node->key;
  // Inside the overlap: the old key and old token still sign on the open stream…
  clock_.Advance(30s);
  ASSERT_TRUE(s->Write(node->Heartbeat(kSid, &old_key, old_token)));
  // …and the new ones too.
  clock_.Advance(1s);
  ASSERT_TRUE(s->Write(node->Heartbeat(kSid, &*new_key, resp.node_security_token())));
  ASSERT_TRUE(WaitFor([&] {
    return NodeInfo("edge-01")->last_heartbeat_epoch_ms() == ToEpochMillis(clock_.Now());
  }));
  EXPECT_FALSE(s->Ended());

  // The old token opens no new stream.
  auto s2 = node->Open(old_token);
  s2->Write(node->Hello(kSid, &*new_key, resp.node_security_token()));
  auto refused = s2->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(refused.error_message().find("revoked (rotated)"), std::string::npos)
      << refused.error_message();

  // After the overlap the old key fails, and the stream ends.
  clock_.Advance(30s);
  ASSERT_TRUE(s->Write(node->Heartbeat(kSid, &old_key, resp.node_security_token())));
  auto ended = s->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(ended.error_message().find("bad signature"), std::string::npos)
      << ended.error_message();

  // The new identity works for a new stream, and for a plain re-attestation.
  node->key.emplace(*new_key);
  node->token = resp.node_security_token();
  auto s3 = node->Open(node->token);
  ASSERT_TRUE(s3->Write(node->Hello(kSid)));
  EXPECT_TRUE(WaitConnected("edge-01"));
  EXPECT_TRUE(node->Handshake(std::nullopt).ok());
}

// The stream reuses a token it verified (EdgeAuthCache); one accepted only inside a
// rotation's overlap window must still be refused the moment that window ends, and the new
// key must be accepted the moment the rotation commits.
TEST_F(EdgeRotationTest, AnOldTokenAcceptedInTheOverlapIsRefusedOnTheSameStreamAfterIt) {
  auto node = EnrolledNode("edge-01");
  auto s = node->Open(node->token);
  ASSERT_TRUE(s->Write(node->Hello(kSid)));
  ASSERT_TRUE(s->Write(node->Heartbeat(kSid)));  // the old token, verified before the rotation
  ASSERT_TRUE(WaitFor([&] {
    return NodeInfo("edge-01")->last_heartbeat_epoch_ms() == ToEpochMillis(clock_.Now());
  }));

  auto new_key = identity::NodeKey::Generate();
  pb::RotateEdgeKeyResponse resp;
  auto st = Rotate(*node, Proof(*node, *new_key), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  for (int i = 1; i <= 3; ++i) {  // the new key with the old token, three times in the window
    clock_.Advance(15s);
    ASSERT_TRUE(s->Write(node->Heartbeat(kSid, &*new_key, node->token)));
    ASSERT_TRUE(WaitFor([&] {
      return NodeInfo("edge-01")->last_heartbeat_epoch_ms() == ToEpochMillis(clock_.Now());
    })) << "heartbeat "
        << i << " inside the overlap";
  }
  clock_.Advance(16s);  // 61 s after the rotation: its 60 s window is over
  ASSERT_TRUE(s->Write(node->Heartbeat(kSid, &*new_key, node->token)));
  auto ended = s->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(ended.error_message().find("revoked (rotated)"), std::string::npos)
      << ended.error_message();
}

TEST_F(EdgeRotationTest, OldTokenIsRevokedForRotationToo) {
  auto node = EnrolledNode("edge-01");
  auto new_key = identity::NodeKey::Generate();
  pb::RotateEdgeKeyResponse resp;
  auto first = Proof(*node, *new_key);
  ASSERT_TRUE(Rotate(*node, first, &resp).ok());
  // The same old token (and old key) again, with a fresh nonce.
  auto st = Rotate(*node, Proof(*node, *identity::NodeKey::Generate()), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("revoked"), std::string::npos) << st.error_message();
}

TEST_F(EdgeRotationTest, BadProofsAreRefused) {
  auto node = EnrolledNode("edge-01");
  auto new_key = identity::NodeKey::Generate();
  pb::RotateEdgeKeyResponse resp;

  auto bad_sig = Proof(*node, *new_key);
  bad_sig.mutable_signature_with_new_key()->at(0) ^= 1;
  auto st = Rotate(*node, bad_sig, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();

  auto short_key = Proof(*node, *new_key);
  short_key.set_new_public_key(std::string(31, 'k'));
  EXPECT_EQ(Rotate(*node, short_key, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // The outer envelope signed by a key that is not the node's: no authority.
  auto stranger = identity::NodeKey::Generate();
  auto forged = identity::RotationProof::Build(*stranger, *new_key, node->id, node->token);
  st = Rotate(*node, *forged, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  // Another node's certificate presenting edge-01's proof.
  auto other = EnrolledNode("edge-02");
  st = Rotate(*other, Proof(*node, *new_key), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  EXPECT_EQ(NodeInfo("edge-01")->public_key_sha256(),
            identity::HexEncode(identity::Sha256(node->key->public_key())))
      << "nothing changed";
  EXPECT_TRUE(Rotate(*node, Proof(*node, *new_key), &resp).ok()) << "the token is still good";
}

TEST_F(EdgeRotationTest, TokenRefreshAndNonceReplay) {
  auto node = EnrolledNode("edge-01");
  const std::string nonce(32, 'N');
  pb::RotateEdgeKeyResponse resp;
  // New key = old key: a token refresh.
  ASSERT_TRUE(Rotate(*node, Proof(*node, *node->key, nonce), &resp).ok());
  EXPECT_NE(resp.node_security_token(), node->token);
  EXPECT_EQ(NodeInfo("edge-01")->public_key_sha256(),
            identity::HexEncode(identity::Sha256(node->key->public_key())));
  node->token = resp.node_security_token();
  // The same nonce with the (valid) new token: a replay.
  auto st = Rotate(*node, Proof(*node, *node->key, nonce), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("nonce was already used"), std::string::npos)
      << st.error_message();
  auto s = node->Open(node->token);
  ASSERT_TRUE(s->Write(node->Hello(kSid)));
  EXPECT_TRUE(WaitConnected("edge-01")) << "the refreshed token works";
}

TEST_F(EdgeRotationTest, UnhealthyOrRevokedNodesCannotRotate) {
  auto node = EnrolledNode("edge-01");
  auto s = node->Open(node->token);
  ASSERT_TRUE(s->Write(node->Hello(kSid)));
  ASSERT_TRUE(WaitConnected("edge-01"));
  clock_.Advance(91s);  // the monitor's next sweep (every 5 s of this clock) runs now
  ASSERT_TRUE(WaitFor([&] { return NodeInfo("edge-01")->state() == "unhealthy"; }));
  pb::RotateEdgeKeyResponse resp;
  auto st = Rotate(*node, Proof(*node, *identity::NodeKey::Generate()), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("unhealthy"), std::string::npos) << st.error_message();

  ASSERT_TRUE(controller_->store().RevokeNode("edge-01", ToEpochMillis(clock_.Now())));
  st = Rotate(*node, Proof(*node, *identity::NodeKey::Generate()), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("revoked"), std::string::npos) << st.error_message();
}

// A Store that holds RotateEdgeKey until released, so a second rotation can be started
// while the first is inside its transaction. Everything else is passed through.
class GatedStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::promise<void> entered;
  std::promise<void> release;

  Result<EdgeNodeRecord> RotateEdgeKey(const KeyRotation& r) override {
    entered.set_value();
    release.get_future().wait();
    return s_.RotateEdgeKey(r);
  }
};

TEST(EdgeAttestationRotation, ConcurrentRotationOfOneNodeIsAborted) {
  edge::testing::TempDir tmp("rot");
  const std::string dir = tmp.path();
  ManualClock clock;
  auto sqlite = SqliteStore::Open(dir + "/c.db");
  ASSERT_TRUE(sqlite);
  GatedStore store(**sqlite);
  auto key = identity::EcSigningKey::Generate();
  NodeTokenAuthority tokens(store, *key, clock, {});
  EdgeAttestation attestation(store, tokens, *key, clock, {});

  // edge-01, enrolled with a join token, holding a token.
  ASSERT_TRUE(store.InsertJoinToken({.token_id = "jt-1",
                                     .token_hash = "h1",
                                     .tenant_id = "t1",
                                     .created_at_ms = ToEpochMillis(clock.Now()),
                                     .expires_at_ms = ToEpochMillis(clock.Now()) + 3'600'000}));
  auto node_key = identity::NodeKey::Generate();
  auto token = tokens.Mint("edge-01", "t1");
  ASSERT_TRUE(token);
  ASSERT_TRUE(store.EnrollEdgeNode({.jti = "jt-1",
                                    .join_token_hash = "h1",
                                    .node_id = "edge-01",
                                    .tenant_id = "t1",
                                    .public_key = node_key->public_key(),
                                    .now_ms = ToEpochMillis(clock.Now()),
                                    .token = token->record}));

  auto a = identity::RotationProof::Build(*node_key, *identity::NodeKey::Generate(), "edge-01",
                                          token->token);
  auto b = identity::RotationProof::Build(*node_key, *identity::NodeKey::Generate(), "edge-01",
                                          token->token);
  auto first = std::async(std::launch::async, [&] { return attestation.Rotate("edge-01", *a); });
  store.entered.get_future().wait();  // the first rotation is inside its transaction
  auto second = attestation.Rotate("edge-01", *b);
  // Released before any assertion: a failing one must not leave the first blocked forever.
  store.release.set_value();
  auto won = first.get();
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kAborted);
  EXPECT_NE(second.error().message.find("already in progress"), std::string::npos);
  ASSERT_TRUE(won) << won.error().ToString();
  EXPECT_EQ((*store.GetEdgeNode("edge-01"))->public_key, a->new_public_key());
}

}  // namespace
}  // namespace edge::controller::testing
