#include "agent/identity/rotation_proof.h"

#include <gtest/gtest.h>

#include "agent/identity/encoding.h"

namespace edge::identity {
namespace {

namespace pb = aegis::cluster::v1;

std::string Hex(std::string_view h) {
  auto b = HexDecode(h);
  EXPECT_TRUE(b) << h;
  return b.value_or("");
}

class RotationProofTest : public ::testing::Test {
 protected:
  // RFC 8032 TEST 1 and TEST 2 keys: old and new.
  NodeKey old_ =
      *NodeKey::FromSecret(Hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"));
  NodeKey new_ =
      *NodeKey::FromSecret(Hex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"));
  std::vector<std::string> current_{old_.public_key()};
  const std::string nonce_ = std::string(32, '\x07');

  pb::RotateEdgeKeyRequest Build() {
    auto r = RotationProof::Build(old_, new_, "n1", "tok", nonce_);
    EXPECT_TRUE(r) << r.error().ToString();
    return *r;
  }
  void ExpectFails(const pb::RotateEdgeKeyRequest& req, ErrorCode code, const char* words) {
    auto r = RotationProof::Verify(req, "n1", current_);
    ASSERT_FALSE(r) << words;
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  }
};

// The inner message's deterministic bytes, by hand: field 1 "n1" (0a 02 6e 31), field 2 the
// 32-byte new key (12 20 …), field 3 the 32-byte nonce (1a 20 …).
TEST_F(RotationProofTest, RequestHasTheWireShape) {
  auto req = Build();
  EXPECT_EQ(HexEncode(req.current_envelope().payload()),
            "0a026e31"
            "1220"
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
            "1a20"
            "0707070707070707070707070707070707070707070707070707070707070707");
  EXPECT_EQ(req.current_envelope().node_security_token(), "tok");
  EXPECT_EQ(req.new_public_key(), new_.public_key());
  // Old key over the inner bytes; new key over "n1" || new_public_key.
  EXPECT_TRUE(NodeKey::Verify(old_.public_key(), req.current_envelope().payload(),
                              req.current_envelope().signature()));
  EXPECT_TRUE(
      NodeKey::Verify(new_.public_key(), "n1" + new_.public_key(), req.signature_with_new_key()));
  auto inner = RotationProof::Verify(req, "n1", current_);
  ASSERT_TRUE(inner) << inner.error().ToString();
  EXPECT_EQ(inner->nonce(), nonce_);
}

TEST_F(RotationProofTest, FreshNonceWhenNoneGiven) {
  auto a = RotationProof::Build(old_, new_, "n1", "tok");
  auto b = RotationProof::Build(old_, new_, "n1", "tok");
  ASSERT_TRUE(a && b);
  pb::RotateEdgeKeyInner ia, ib;
  ASSERT_TRUE(ia.ParseFromString(a->current_envelope().payload()));
  ASSERT_TRUE(ib.ParseFromString(b->current_envelope().payload()));
  EXPECT_EQ(ia.nonce().size(), 32u);
  EXPECT_NE(ia.nonce(), ib.nonce());
  auto bad = RotationProof::Build(old_, new_, "n1", "tok", "short");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("nonce must be 32 bytes, got 5"), std::string::npos);
}

TEST_F(RotationProofTest, SameKeyIsATokenRefresh) {
  auto req = RotationProof::Build(old_, old_, "n1", "tok", nonce_);
  ASSERT_TRUE(req);
  EXPECT_TRUE(RotationProof::Verify(*req, "n1", current_));
}

TEST_F(RotationProofTest, OuterSignatureFailuresAreUnauthenticated) {
  auto req = Build();
  (*req.mutable_current_envelope()->mutable_signature())[0] ^= 1;
  ExpectFails(req, ErrorCode::kUnauthenticated, "does not verify under the current key");

  // Signed by a key that is not the node's current one.
  auto stranger = NodeKey::Generate();
  auto forged = RotationProof::Build(*stranger, new_, "n1", "tok", nonce_);
  ExpectFails(*forged, ErrorCode::kUnauthenticated, "current_envelope signature");

  // A valid proof for another node.
  auto other_node = RotationProof::Build(old_, new_, "n2", "tok", nonce_);
  ExpectFails(*other_node, ErrorCode::kUnauthenticated, "made for node \"n2\"");
}

TEST_F(RotationProofTest, DualSignatureAndKeyFailuresAreInvalidArgument) {
  auto bad_new_sig = Build();
  (*bad_new_sig.mutable_signature_with_new_key())[5] ^= 1;
  ExpectFails(bad_new_sig, ErrorCode::kInvalidArgument, "signature_with_new_key does not verify");

  auto short_key = Build();
  short_key.set_new_public_key(new_.public_key().substr(0, 31));
  ExpectFails(short_key, ErrorCode::kInvalidArgument, "32-byte Ed25519 key, got 31");

  // The request swaps in another key than the one the old key signed.
  auto third = NodeKey::Generate();
  auto swapped = Build();
  swapped.set_new_public_key(third->public_key());
  swapped.set_signature_with_new_key(*third->Sign("n1" + third->public_key()));
  ExpectFails(swapped, ErrorCode::kInvalidArgument, "differs from the one signed");

  // The old key signed garbage rather than a RotateEdgeKeyInner.
  auto garbage = Build();
  garbage.mutable_current_envelope()->set_payload("\xff\xff\xff");
  garbage.mutable_current_envelope()->set_signature(*old_.Sign("\xff\xff\xff"));
  ExpectFails(garbage, ErrorCode::kInvalidArgument, "not a RotateEdgeKeyInner");

  // A signed inner with a short nonce.
  pb::RotateEdgeKeyInner inner;
  inner.set_node_id("n1");
  inner.set_new_public_key(new_.public_key());
  inner.set_nonce("123");
  auto short_nonce = Build();
  std::string bytes = inner.SerializeAsString();
  short_nonce.mutable_current_envelope()->set_payload(bytes);
  short_nonce.mutable_current_envelope()->set_signature(*old_.Sign(bytes));
  ExpectFails(short_nonce, ErrorCode::kInvalidArgument, "nonce must be 32 bytes, got 3");
}

}  // namespace
}  // namespace edge::identity
