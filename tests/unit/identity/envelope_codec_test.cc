#include "agent/identity/envelope_codec.h"

#include <gtest/gtest.h>

#include "agent/identity/encoding.h"

namespace edge::identity {
namespace {

namespace pb = aegis::cluster::v1;
using namespace std::chrono_literals;

std::string Hex(std::string_view h) {
  auto b = HexDecode(h);
  EXPECT_TRUE(b) << h;
  return b.value_or("");
}

// RFC 8032 TEST 1 secret key: a fixed node key.
NodeKey FixedKey() {
  return *NodeKey::FromSecret(
      Hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"));
}

// Vectors computed by hand from wire.md §2.4: u8 kind, u64 LE timestamp, u32 LE lengths.
TEST(EnvelopeCodec, CanonicalBytesHelloVector) {
  EXPECT_EQ(HexEncode(EnvelopeCodec::CanonicalBytes(EnvelopeKind::kHello, 0x0102030405060708, "n1",
                                                    "s", "")),
            "01"
            "0807060504030201"
            "02000000"
            "6e31"
            "01000000"
            "73"
            "00000000");
}

// EdgeResult{err{code:"X"}} serializes as 12 03 0a 01 58 (field 2, len 3; field 1, len 1, 'X');
// SHA-256 of those five bytes is 9ac5c51c…c738.
TEST(EnvelopeCodec, CommandResultVector) {
  pb::EdgeResult result;
  result.mutable_err()->set_code("X");
  EXPECT_EQ(HexEncode(EnvelopeCodec::DeterministicBytes(result)), "12030a0158");
  const std::string inner = EnvelopeCodec::InnerForResult("c1", result);
  EXPECT_EQ(HexEncode(inner),
            "6331"
            "9ac5c51c77816fd12010d3b0ff1a954cf26b94efb2f8a926a4344b03de2fc738");
  // timestamp 1700000000123 ms = 0x0000018bcfe5687b.
  EXPECT_EQ(HexEncode(EnvelopeCodec::CanonicalBytes(EnvelopeKind::kCommandResult, 1700000000123,
                                                    "edge-01", "s1", inner)),
            "03"
            "7b68e5cf8b010000"
            "07000000"
            "656467652d3031"
            "02000000"
            "7331"
            "22000000"
            "6331"
            "9ac5c51c77816fd12010d3b0ff1a954cf26b94efb2f8a926a4344b03de2fc738");
}

// Chunk{stdout:"hi"} = 0a 02 68 69.
TEST(EnvelopeCodec, CommandProgressInnerVector) {
  pb::Chunk chunk;
  chunk.set_stdout("hi");
  EXPECT_EQ(HexEncode(EnvelopeCodec::InnerForProgress("c9", chunk)),
            "6339"
            "06b5a8b023e80d86cb954e09c176ac5cae311b5210bd60ff3658248b305cca1c");
}

// Output chunks are hashed without being serialized (issue 14): the digests must be those of
// the deterministic bytes, by hand — tag 0a (stdout) / 12 (stderr), the varint length (one,
// two and three bytes here), the data — with the empty chunk, whose oneof is still present,
// as 0a 00. A status chunk or one carrying an unknown field takes the general path.
TEST(EnvelopeCodec, OutputChunkDigestsAreThoseOfTheirDeterministicBytes) {
  struct Case {
    const char* what;
    bool stdout_stream;
    std::string data;
    const char* sha256_hex;
  } cases[] = {
      {"stdout abc = 0a 03 616263", true, "abc",
       "8ab7a6c5e74737878ac73863cb76739d15d4666de44e5756bf55a2f9e9ab5f44"},
      {"stderr 200 x = 12 c8 01 …", false, std::string(200, 'x'),
       "82dff9a2b07877042b666e5ab8577a860d1e8cf6416d5909716c732274dd789f"},
      {"stdout 1 MiB of zeros = 0a 80 80 40 …", true, std::string(1 << 20, '\0'),
       "ddef451b729ebbc4a83aeeb866553cb57361e0f50f114649abf27e0ac2b2a136"},
      {"empty stdout = 0a 00", true, "",
       "102b51b9765a56a3e899f7cf0ee38e5251f9c503b357b330a49183eb7b155604"},
  };
  for (const auto& c : cases) {
    pb::Chunk chunk;
    if (c.stdout_stream) {
      chunk.set_stdout(c.data);
    } else {
      chunk.set_stderr(c.data);
    }
    EXPECT_EQ(HexEncode(EnvelopeCodec::InnerForProgress("c9", chunk)),
              std::string("6339") + c.sha256_hex)
        << c.what;
  }
  // An unknown field (tag 7, varint 1) rides along: it is part of what is signed.
  pb::Chunk odd;
  odd.set_stdout("abc");
  odd.GetReflection()->MutableUnknownFields(&odd)->AddVarint(7, 1);
  EXPECT_EQ(HexEncode(EnvelopeCodec::DeterministicBytes(odd)), "0a036162633801");
  EXPECT_EQ(EnvelopeCodec::InnerForProgress("c9", odd),
            "c9" + Sha256(EnvelopeCodec::DeterministicBytes(odd)));
  EXPECT_NE(EnvelopeCodec::InnerForProgress("c9", odd).substr(2), Sha256(std::string("\x0a\x03"
                                                                                     "abc",
                                                                                     5)));
}

// EdgeCapabilities{os:"l", custom_labels{b:2, a:1}}: deterministic serialization orders the
// map entries by key: 0a 01 6c | 2a 06 (0a 01 'a' 12 01 '1') | 2a 06 (0a 01 'b' 12 01 '2').
TEST(EnvelopeCodec, CapabilitiesAreSerializedDeterministically) {
  pb::EdgeCapabilities caps;
  caps.set_os("l");
  (*caps.mutable_custom_labels())["b"] = "2";
  (*caps.mutable_custom_labels())["a"] = "1";
  EXPECT_EQ(HexEncode(EnvelopeCodec::DeterministicBytes(caps)),
            "0a016c2a060a01611201312a060a0162120132");
  EXPECT_EQ(HexEncode(EnvelopeCodec::InnerForCapabilities(caps)),
            "e8de01f23e2af3c965a4f16d02c8ba2b264c4563d465c4ebecabe92f100717fb");
}

TEST(EnvelopeCodec, ParseCanonicalRoundTripsAndRejectsMalformed) {
  const std::string good =
      EnvelopeCodec::CanonicalBytes(EnvelopeKind::kHeartbeat, 42, "node", "stream", "in");
  auto h = EnvelopeCodec::ParseCanonical(good);
  ASSERT_TRUE(h) << h.error().ToString();
  EXPECT_EQ(h->kind, EnvelopeKind::kHeartbeat);
  EXPECT_EQ(h->timestamp_ms, 42u);
  EXPECT_EQ(h->node_id, "node");
  EXPECT_EQ(h->stream_id, "stream");
  EXPECT_EQ(h->inner, "in");

  // Every truncation of a valid payload is refused.
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = EnvelopeCodec::ParseCanonical(good.substr(0, n));
    ASSERT_FALSE(r) << n;
    EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
    EXPECT_NE(r.error().message.find("malformed envelope payload"), std::string::npos);
  }
  struct Case {
    std::string payload;
    const char* words;
  };
  const Case cases[] = {
      {"", "no kind byte"},
      {Hex("00") + std::string(8, '\0'), "kind 0 is not one of 1..5"},
      {Hex("06") + std::string(8, '\0'), "kind 6"},
      {Hex("01") + std::string(4, '\0'), "timestamp_ms"},
      {Hex("01") + std::string(8, '\0') + Hex("ffffffff") + "n", "node_id length runs past"},
      {Hex("01") + std::string(8, '\0') + Hex("00000000") + Hex("05000000") + "s",
       "stream_id length runs past"},
      {Hex("01") + std::string(8, '\0') + Hex("00000000") + Hex("00000000") + Hex("02000000"),
       "inner length runs past"},
      {good + "x", "1 trailing bytes"},
  };
  for (const auto& c : cases) {
    auto r = EnvelopeCodec::ParseCanonical(c.payload);
    ASSERT_FALSE(r) << c.words;
    EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
    EXPECT_NE(r.error().message.find(c.words), std::string::npos) << r.error().message;
  }
}

class EnvelopeVerifyTest : public ::testing::Test {
 protected:
  const Clock::WallTime now_ = Clock::WallTime(1'700'000'000'000ms);
  NodeKey key_ = FixedKey();
  std::vector<std::string> keys_{key_.public_key()};

  pb::SealNodeEnvelope Seal(EnvelopeKind kind, Clock::WallTime at, std::string node,
                            std::string stream, std::string inner = "") {
    auto env = EnvelopeCodec::Seal(key_, "tok", kind, at, node, stream, inner);
    EXPECT_TRUE(env);
    return *env;
  }
  void ExpectFails(const pb::SealNodeEnvelope& env, const EnvelopeExpectation& want,
                   const char* words, std::span<const std::string> keys = {}) {
    auto r = EnvelopeCodec::Verify(env, want, keys.empty() ? keys_ : keys, now_);
    ASSERT_FALSE(r) << words;
    EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  }
};

TEST_F(EnvelopeVerifyTest, SealedEnvelopeVerifies) {
  auto env = Seal(EnvelopeKind::kHeartbeat, now_, "edge-01", "s-1");
  EXPECT_EQ(env.node_security_token(), "tok");
  EXPECT_EQ(env.signature().size(), 64u);
  EXPECT_EQ(HexEncode(env.payload()),
            "02"
            "0068e5cf8b010000"  // 1700000000000 = 0x0000018bcfe56800, little-endian
            "07000000656467652d3031"
            "03000000732d31"
            "00000000");
  EXPECT_TRUE(NodeKey::Verify(key_.public_key(), env.payload(), env.signature()));
  auto h = EnvelopeCodec::Verify(env, {EnvelopeKind::kHeartbeat, "edge-01", "s-1", std::nullopt},
                                 keys_, now_);
  ASSERT_TRUE(h) << h.error().ToString();
  EXPECT_EQ(h->timestamp_ms, 1'700'000'000'000u);
}

TEST_F(EnvelopeVerifyTest, EveryFailureNamesItsCheck) {
  const EnvelopeExpectation want{EnvelopeKind::kHeartbeat, "edge-01", "s-1", std::string()};
  auto env = Seal(EnvelopeKind::kHeartbeat, now_, "edge-01", "s-1");

  auto flipped_sig = env;
  (*flipped_sig.mutable_signature())[3] ^= 0x40;
  ExpectFails(flipped_sig, want, "bad signature");
  auto short_sig = env;
  short_sig.set_signature("abc");
  ExpectFails(short_sig, want, "bad signature");

  // A payload changed after signing (here: the timestamp) fails the signature.
  auto changed = env;
  (*changed.mutable_payload())[1] ^= 0x01;
  ExpectFails(changed, want, "bad signature");

  // Another node's key.
  auto other = NodeKey::Generate();
  std::vector<std::string> other_keys{other->public_key()};
  ExpectFails(env, want, "bad signature", other_keys);
  auto no_keys = EnvelopeCodec::Verify(env, want, {}, now_);
  ASSERT_FALSE(no_keys);
  EXPECT_NE(no_keys.error().message.find("no public key is registered"), std::string::npos);

  ExpectFails(Seal(EnvelopeKind::kHello, now_, "edge-01", "s-1"), want, "kind mismatch");
  ExpectFails(Seal(EnvelopeKind::kHeartbeat, now_, "edge-02", "s-1"), want, "node mismatch");
  ExpectFails(Seal(EnvelopeKind::kHeartbeat, now_, "edge-01", "s-2"), want, "stream mismatch");
  ExpectFails(Seal(EnvelopeKind::kHeartbeat, now_ + 60001ms, "edge-01", "s-1"), want,
              "timestamp out of window");
  ExpectFails(Seal(EnvelopeKind::kHeartbeat, now_ - 60001ms, "edge-01", "s-1"), want,
              "timestamp out of window");
  ExpectFails(Seal(EnvelopeKind::kHeartbeat, now_, "edge-01", "s-1", "x"), want, "inner mismatch");

  // Exactly ±60 s is inside the window.
  EXPECT_TRUE(EnvelopeCodec::Verify(Seal(EnvelopeKind::kHeartbeat, now_ + 60s, "edge-01", "s-1"),
                                    want, keys_, now_));
  EXPECT_TRUE(EnvelopeCodec::Verify(Seal(EnvelopeKind::kHeartbeat, now_ - 60s, "edge-01", "s-1"),
                                    want, keys_, now_));

  // Malformed payloads, whatever the signature says.
  pb::SealNodeEnvelope garbage;
  garbage.set_payload("\x02garbage");
  garbage.set_signature(*key_.Sign(garbage.payload()));
  ExpectFails(garbage, want, "malformed envelope payload");
  pb::SealNodeEnvelope empty;
  ExpectFails(empty, want, "malformed envelope payload");
}

TEST_F(EnvelopeVerifyTest, TimestampFarInTheFutureDoesNotOverflow) {
  const std::string payload = EnvelopeCodec::CanonicalBytes(
      EnvelopeKind::kHeartbeat, 0xffffffffffffffffull, "edge-01", "s-1", "");
  pb::SealNodeEnvelope env;
  env.set_payload(payload);
  env.set_signature(*key_.Sign(payload));
  ExpectFails(env, {EnvelopeKind::kHeartbeat, "edge-01", "s-1", std::nullopt},
              "timestamp out of window");
}

TEST_F(EnvelopeVerifyTest, EitherKeyOfARotationOverlapVerifies) {
  auto new_key = NodeKey::Generate();
  std::vector<std::string> both{new_key->public_key(), key_.public_key()};
  auto env = Seal(EnvelopeKind::kHeartbeat, now_, "edge-01", "s-1");
  EXPECT_TRUE(
      EnvelopeCodec::Verify(env, {EnvelopeKind::kHeartbeat, "edge-01", "s-1", {}}, both, now_));
}

TEST_F(EnvelopeVerifyTest, SealEventAndVerifyEventForEveryBody) {
  std::vector<pb::EdgeEvent> events(5);
  events[0].mutable_hello()->set_stream_id("s-1");
  events[1].mutable_heartbeat();
  events[2].mutable_command_result()->set_command_id("c1");
  events[2].mutable_command_result()->mutable_result()->mutable_ok()->set_exit_code(0);
  events[3].mutable_command_progress()->set_command_id("c1");
  events[3].mutable_command_progress()->mutable_chunk()->set_stderr("oops");
  (*events[4]
        .mutable_capability_update()
        ->mutable_capabilities()
        ->mutable_custom_labels())["agent.state"] = "draining";
  const EnvelopeKind kinds[] = {EnvelopeKind::kHello, EnvelopeKind::kHeartbeat,
                                EnvelopeKind::kCommandResult, EnvelopeKind::kCommandProgress,
                                EnvelopeKind::kCapabilityUpdate};
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE(i);
    auto& e = events[i];
    ASSERT_TRUE(EnvelopeCodec::SealEvent(e, key_, "tok", now_, "edge-01", "s-1"));
    auto h = EnvelopeCodec::VerifyEvent(e, "edge-01", i == 0 ? "" : "s-1", keys_, now_);
    ASSERT_TRUE(h) << h.error().ToString();
    EXPECT_EQ(h->kind, kinds[i]);
  }
  // Changing the body after sealing breaks the inner binding.
  events[2].mutable_command_result()->mutable_result()->mutable_ok()->set_exit_code(1);
  auto r = EnvelopeCodec::VerifyEvent(events[2], "edge-01", "s-1", keys_, now_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("inner mismatch"), std::string::npos);
  events[3].mutable_command_progress()->set_command_id("c2");
  EXPECT_FALSE(EnvelopeCodec::VerifyEvent(events[3], "edge-01", "s-1", keys_, now_));
  // A Hello whose stream_id is not the one it was sealed for.
  events[0].mutable_hello()->set_stream_id("s-9");
  auto hello = EnvelopeCodec::VerifyEvent(events[0], "edge-01", "", keys_, now_);
  ASSERT_FALSE(hello);
  EXPECT_NE(hello.error().message.find("stream mismatch"), std::string::npos);

  pb::EdgeEvent none;
  auto unset = EnvelopeCodec::SealEvent(none, key_, "tok", now_, "edge-01", "s-1");
  ASSERT_FALSE(unset);
  EXPECT_EQ(unset.error().code, ErrorCode::kInvalidArgument);
  auto unset_verify = EnvelopeCodec::VerifyEvent(none, "edge-01", "s-1", keys_, now_);
  ASSERT_FALSE(unset_verify);
  EXPECT_EQ(unset_verify.error().code, ErrorCode::kUnauthenticated);
}

}  // namespace
}  // namespace edge::identity
