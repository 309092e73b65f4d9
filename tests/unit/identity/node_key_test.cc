#include "agent/identity/node_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "agent/identity/encoding.h"
#include "agent/identity/jwt.h"
#include "common/atomic_file.h"
#include "tests/support/temp_dir.h"

namespace edge::identity {
namespace {

std::string Hex(std::string_view h) {
  auto b = HexDecode(h);
  EXPECT_TRUE(b) << h;
  return b.value_or("");
}

// RFC 8032 §7.1, Ed25519 TEST 1–3, copied by hand from the RFC.
struct Rfc8032Vector {
  const char* secret;
  const char* pub;
  const char* message;
  const char* signature;
};
constexpr Rfc8032Vector kVectors[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9"
     "b46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f1"
     "1d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984d"
     "c6594a7c15e9716ed28dc027beceea1ec40a"},
};

TEST(NodeKey, Rfc8032Vectors) {
  for (const auto& v : kVectors) {
    SCOPED_TRACE(v.secret);
    auto key = NodeKey::FromSecret(Hex(v.secret));
    ASSERT_TRUE(key) << key.error().ToString();
    EXPECT_EQ(HexEncode(key->public_key()), v.pub);
    auto sig = key->Sign(Hex(v.message));
    ASSERT_TRUE(sig);
    EXPECT_EQ(HexEncode(*sig), v.signature);
    EXPECT_TRUE(NodeKey::Verify(Hex(v.pub), Hex(v.message), Hex(v.signature)));
  }
}

TEST(NodeKey, FlippedBitsFailVerification) {
  const auto& v = kVectors[2];
  const std::string pub = Hex(v.pub), msg = Hex(v.message), sig = Hex(v.signature);
  std::string bad_sig = sig;
  bad_sig[10] = static_cast<char>(bad_sig[10] ^ 0x01);
  auto r = NodeKey::Verify(pub, msg, bad_sig);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(r.error().message.find("does not verify"), std::string::npos);

  std::string bad_msg = msg;
  bad_msg[0] = static_cast<char>(bad_msg[0] ^ 0x80);
  EXPECT_EQ(NodeKey::Verify(pub, bad_msg, sig).error().code, ErrorCode::kUnauthenticated);

  // Another vector's public key.
  EXPECT_FALSE(NodeKey::Verify(Hex(kVectors[0].pub), msg, sig));
}

TEST(NodeKey, WrongLengthsAreRefusedWithTheirSize) {
  const auto& v = kVectors[1];
  auto short_pub = NodeKey::Verify(Hex(v.pub).substr(0, 31), Hex(v.message), Hex(v.signature));
  ASSERT_FALSE(short_pub);
  EXPECT_EQ(short_pub.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(short_pub.error().message.find("public key must be 32 bytes, got 31"),
            std::string::npos);

  auto long_sig = NodeKey::Verify(Hex(v.pub), Hex(v.message), Hex(v.signature) + "x");
  ASSERT_FALSE(long_sig);
  EXPECT_EQ(long_sig.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(long_sig.error().message.find("signature must be 64 bytes, got 65"), std::string::npos);
  EXPECT_FALSE(NodeKey::Verify(Hex(v.pub), Hex(v.message), ""));

  auto short_secret = NodeKey::FromSecret(std::string(16, 'k'));
  ASSERT_FALSE(short_secret);
  EXPECT_EQ(short_secret.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(short_secret.error().message.find("32 bytes, got 16"), std::string::npos);
}

TEST(NodeKey, GeneratedKeysDifferAndSignForThemselvesOnly) {
  auto a = NodeKey::Generate();
  auto b = NodeKey::Generate();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->public_key().size(), 32u);
  EXPECT_NE(a->public_key(), b->public_key());
  auto sig = a->Sign("challenge nonce");
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->size(), 64u);
  EXPECT_TRUE(NodeKey::Verify(a->public_key(), "challenge nonce", *sig));
  EXPECT_FALSE(NodeKey::Verify(b->public_key(), "challenge nonce", *sig));
}

class NodeKeyFileTest : public ::testing::Test {
 protected:
  edge::testing::TempDir tmp_{"nodekey"};
  std::string dir_ = tmp_.path();
};

TEST_F(NodeKeyFileTest, SavesPkcs8Pem0600AndLoadsTheSameKey) {
  auto key = NodeKey::FromSecret(Hex(kVectors[0].secret));
  ASSERT_TRUE(key);
  ASSERT_TRUE(MakeDirs(dir_ + "/keys", 0700));
  const std::string path = dir_ + "/keys/node.ed25519";
  ASSERT_TRUE(key->Save(path));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto pem = ReadFile(path);
  ASSERT_TRUE(pem);
  EXPECT_EQ(pem->rfind("-----BEGIN PRIVATE KEY-----", 0), 0u) << "PKCS#8";
  auto loaded = NodeKey::Load(path);
  ASSERT_TRUE(loaded) << loaded.error().ToString();
  EXPECT_EQ(HexEncode(loaded->public_key()), kVectors[0].pub);
  EXPECT_EQ(HexEncode(*loaded->Sign("")), kVectors[0].signature);
  // Exactly one file: no temp file left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/keys"),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(NodeKeyFileTest, LoadRefusesMissingWideOpenAndForeignKeys) {
  auto missing = NodeKey::Load(dir_ + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  auto key = NodeKey::Generate();
  const std::string path = dir_ + "/node.ed25519";
  ASSERT_TRUE(key->Save(path));
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto open = NodeKey::Load(path);
  ASSERT_FALSE(open);
  EXPECT_EQ(open.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(open.error().message.find("0644"), std::string::npos);
  EXPECT_NE(open.error().message.find("group or others"), std::string::npos);

  ASSERT_TRUE(WriteFileAtomic(path, "not a key", {.mode = 0600}));
  auto garbage = NodeKey::Load(path);
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(garbage.error().message.find(path), std::string::npos);

  // A valid PKCS#8 key of the wrong type (EC P-256) is not a node key.
  auto ec_key = EcSigningKey::Generate();
  ASSERT_TRUE(ec_key);
  const std::string ec_pem = *ec_key->PrivatePem();
  auto ec = NodeKey::FromPem(ec_pem);
  ASSERT_FALSE(ec);
  EXPECT_EQ(ec.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(ec.error().message.find("not an Ed25519 key"), std::string::npos);
}

}  // namespace
}  // namespace edge::identity
