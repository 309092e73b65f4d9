// Signed ConnectEdge envelopes (wire.md §2.4). Every EdgeEvent carries a SealNodeEnvelope
// whose payload is the canonical bytes
//   u8 kind | u64 LE timestamp_ms | u32 LE len | node_id | u32 LE len | stream_id | u32 LE len |
//   inner
// and whose signature is Ed25519(node key, payload). The agent seals (Seal / SealEvent); the
// controller verifies against the registered key(s) (Verify / VerifyEvent). Stateless: the
// caller owns keys, tokens and messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "agent/identity/node_key.h"
#include "common/clock.h"
#include "common/error.h"
#include "node_cluster.pb.h"

namespace edge::identity {

enum class EnvelopeKind : uint8_t {
  kHello = 1,
  kHeartbeat = 2,
  kCommandResult = 3,
  kCommandProgress = 4,
  kCapabilityUpdate = 5,
};

std::string_view EnvelopeKindName(EnvelopeKind kind);

// The fields of a canonical payload.
struct EnvelopeHeader {
  EnvelopeKind kind = EnvelopeKind::kHello;
  uint64_t timestamp_ms = 0;
  std::string node_id;
  std::string stream_id;
  std::string inner;
};

// What the verifier expects of an envelope. `inner` is compared when set (the controller
// recomputes it from the message with Inner*/ExpectedFor).
struct EnvelopeExpectation {
  EnvelopeKind kind = EnvelopeKind::kHello;
  std::string node_id;
  std::string stream_id;
  std::optional<std::string> inner;
};

inline constexpr std::chrono::milliseconds kEnvelopeSkew{60'000};

class EnvelopeCodec {
 public:
  // The canonical bytes of wire.md §2.4.
  static std::string CanonicalBytes(EnvelopeKind kind, uint64_t timestamp_ms,
                                    std::string_view node_id, std::string_view stream_id,
                                    std::string_view inner);
  // The inverse. UNAUTHENTICATED "malformed envelope payload: …" naming the field for a
  // truncated payload, an unknown kind, a length running past the end or trailing bytes.
  static Result<EnvelopeHeader> ParseCanonical(std::string_view payload);

  // Protobuf deterministic serialization (map entries sorted, no unknown-field reordering).
  static std::string DeterministicBytes(const google::protobuf::MessageLite& message);
  // `inner` builders: command_id || SHA-256(det(result)), command_id || SHA-256(det(chunk)),
  // SHA-256(det(capabilities)); Hello and Heartbeat have an empty inner.
  static std::string InnerForResult(std::string_view command_id,
                                    const aegis::cluster::v1::EdgeResult& result);
  static std::string InnerForProgress(std::string_view command_id,
                                      const aegis::cluster::v1::Chunk& chunk);
  static std::string InnerForCapabilities(const aegis::cluster::v1::EdgeCapabilities& caps);

  // The kind and inner an EdgeEvent must be sealed with. INVALID_ARGUMENT for an event with
  // no body set.
  static Result<std::pair<EnvelopeKind, std::string>> KindAndInner(
      const aegis::cluster::v1::EdgeEvent& event);

  // Builds a sealed envelope (token, canonical payload, signature).
  static Result<aegis::cluster::v1::SealNodeEnvelope> Seal(const NodeKey& key,
                                                           std::string_view node_security_token,
                                                           EnvelopeKind kind, Clock::WallTime now,
                                                           std::string_view node_id,
                                                           std::string_view stream_id,
                                                           std::string_view inner);
  // Fills the envelope of `event` (of whichever body it has) for `node_id`/`stream_id`.
  static Status SealEvent(aegis::cluster::v1::EdgeEvent& event, const NodeKey& key,
                          std::string_view node_security_token, Clock::WallTime now,
                          std::string_view node_id, std::string_view stream_id);

  // Verifies an envelope: payload well formed, signature valid under one of `public_keys`
  // (raw 32-byte Ed25519; several during a rotation's overlap window), then kind, node_id,
  // stream_id, timestamp within ±skew of `now`, and inner when expected. Every failure is
  // UNAUTHENTICATED and names the check ("malformed envelope payload", "bad signature",
  // "kind mismatch", "node mismatch", "stream mismatch", "timestamp out of window",
  // "inner mismatch").
  static Result<EnvelopeHeader> Verify(const aegis::cluster::v1::SealNodeEnvelope& envelope,
                                       const EnvelopeExpectation& expected,
                                       std::span<const std::string> public_keys,
                                       Clock::WallTime now,
                                       std::chrono::milliseconds skew = kEnvelopeSkew);
  // The envelope `event` carries; nullptr when it has no body (event not set).
  static const aegis::cluster::v1::SealNodeEnvelope* EnvelopeOf(
      const aegis::cluster::v1::EdgeEvent& event);
  // Verify for a whole EdgeEvent: the kind and inner are recomputed from the event's body;
  // for a Hello the stream id is the Hello's own `stream_id` when `stream_id` is empty.
  static Result<EnvelopeHeader> VerifyEvent(const aegis::cluster::v1::EdgeEvent& event,
                                            std::string_view node_id, std::string_view stream_id,
                                            std::span<const std::string> public_keys,
                                            Clock::WallTime now,
                                            std::chrono::milliseconds skew = kEnvelopeSkew);
};

}  // namespace edge::identity
