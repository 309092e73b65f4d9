#include "agent/identity/envelope_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "agent/identity/encoding.h"

namespace edge::identity {
namespace {

namespace pb = aegis::cluster::v1;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void PutField(std::string& out, std::string_view field) {
  PutU32(out, static_cast<uint32_t>(field.size()));
  out.append(field);
}

std::unexpected<Error> Unauth(std::string message) {
  return MakeError(ErrorCode::kUnauthenticated, std::move(message));
}

// Reads little-endian integers and length-prefixed fields off the front of a payload.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool U8(uint8_t& v) {
    if (data_.empty()) return false;
    v = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t& v) {
    if (data_.size() < 4) return false;
    v = 0;
    for (int i = 3; i >= 0; --i)
      v = (v << 8) | static_cast<uint8_t>(data_[static_cast<size_t>(i)]);
    data_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t& v) {
    if (data_.size() < 8) return false;
    v = 0;
    for (int i = 7; i >= 0; --i)
      v = (v << 8) | static_cast<uint8_t>(data_[static_cast<size_t>(i)]);
    data_.remove_prefix(8);
    return true;
  }
  // A u32 length and that many bytes; false when the length runs past the end.
  bool Field(std::string& out) {
    uint32_t len = 0;
    if (!U32(len) || len > data_.size()) return false;
    out.assign(data_.substr(0, len));
    data_.remove_prefix(len);
    return true;
  }
  size_t remaining() const { return data_.size(); }

 private:
  std::string_view data_;
};

bool ValidKind(uint8_t k) {
  return k >= static_cast<uint8_t>(EnvelopeKind::kHello) &&
         k <= static_cast<uint8_t>(EnvelopeKind::kCapabilityUpdate);
}

pb::SealNodeEnvelope* MutableEnvelopeOf(pb::EdgeEvent& e) {
  switch (e.event_case()) {
    case pb::EdgeEvent::kHello:
      return e.mutable_hello()->mutable_envelope();
    case pb::EdgeEvent::kHeartbeat:
      return e.mutable_heartbeat()->mutable_envelope();
    case pb::EdgeEvent::kCommandResult:
      return e.mutable_command_result()->mutable_envelope();
    case pb::EdgeEvent::kCommandProgress:
      return e.mutable_command_progress()->mutable_envelope();
    case pb::EdgeEvent::kCapabilityUpdate:
      return e.mutable_capability_update()->mutable_envelope();
    default:
      return nullptr;
  }
}

std::string Quote(std::string_view s) {
  // Names on the wire are short; cap what goes into a message.
  constexpr size_t kMax = 80;
  std::string out = "\"";
  out.append(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  return out + "\"";
}

}  // namespace

std::string_view EnvelopeKindName(EnvelopeKind kind) {
  switch (kind) {
    case EnvelopeKind::kHello:
      return "Hello";
    case EnvelopeKind::kHeartbeat:
      return "Heartbeat";
    case EnvelopeKind::kCommandResult:
      return "CommandResult";
    case EnvelopeKind::kCommandProgress:
      return "CommandProgress";
    case EnvelopeKind::kCapabilityUpdate:
      return "CapabilityUpdate";
  }
  return "unknown";
}

std::string EnvelopeCodec::CanonicalBytes(EnvelopeKind kind, uint64_t timestamp_ms,
                                          std::string_view node_id, std::string_view stream_id,
                                          std::string_view inner) {
  std::string out;
  out.reserve(1 + 8 + 12 + node_id.size() + stream_id.size() + inner.size());
  out += static_cast<char>(static_cast<uint8_t>(kind));
  PutU64(out, timestamp_ms);
  PutField(out, node_id);
  PutField(out, stream_id);
  PutField(out, inner);
  return out;
}

Result<EnvelopeHeader> EnvelopeCodec::ParseCanonical(std::string_view payload) {
  Reader r(payload);
  EnvelopeHeader h;
  uint8_t kind = 0;
  if (!r.U8(kind)) return Unauth("malformed envelope payload: empty, no kind byte");
  if (!ValidKind(kind)) {
    return Unauth("malformed envelope payload: kind " + std::to_string(kind) +
                  " is not one of 1..5");
  }
  h.kind = static_cast<EnvelopeKind>(kind);
  if (!r.U64(h.timestamp_ms)) {
    return Unauth("malformed envelope payload: truncated in timestamp_ms (needs 8 bytes)");
  }
  if (!r.Field(h.node_id)) {
    return Unauth("malformed envelope payload: node_id length runs past the end");
  }
  if (!r.Field(h.stream_id)) {
    return Unauth("malformed envelope payload: stream_id length runs past the end");
  }
  if (!r.Field(h.inner)) {
    return Unauth("malformed envelope payload: inner length runs past the end");
  }
  if (r.remaining() != 0) {
    return Unauth("malformed envelope payload: " + std::to_string(r.remaining()) +
                  " trailing bytes after inner");
  }
  return h;
}

std::string EnvelopeCodec::DeterministicBytes(const google::protobuf::MessageLite& message) {
  // Sized once: a growing string would copy a MiB chunk several times over.
  const size_t size = message.ByteSizeLong();
  std::string out(size, '\0');
  {
    google::protobuf::io::ArrayOutputStream stream(out.data(), static_cast<int>(size));
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeWithCachedSizes(&coded);
  }
  return out;
}

std::string EnvelopeCodec::InnerForResult(std::string_view command_id,
                                          const pb::EdgeResult& result) {
  return std::string(command_id) + Sha256(DeterministicBytes(result));
}

std::string EnvelopeCodec::InnerForProgress(std::string_view command_id, const pb::Chunk& chunk) {
  // Output chunks (all but status updates) are hashed without serializing them: a Chunk with
  // only `bytes stdout = 1` (or `stderr = 2`) set serializes, deterministically, as its tag
  // byte (0x0a / 0x12), the varint length and the bytes. ByteSizeLong equal to that length
  // rules out unknown fields; anything else takes the general path.
  const std::string* data = nullptr;
  char tag = 0;
  if (chunk.kind_case() == pb::Chunk::kStdout) {
    data = &chunk.stdout();
    tag = 0x0a;
  } else if (chunk.kind_case() == pb::Chunk::kStderr) {
    data = &chunk.stderr();
    tag = 0x12;
  }
  if (data != nullptr) {
    uint8_t header[1 + 10];
    header[0] = static_cast<uint8_t>(tag);
    const size_t n =
        google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(data->size(), header + 1) -
        header;
    if (chunk.ByteSizeLong() == n + data->size()) {
      return std::string(command_id) +
             Sha256Concat({std::string_view(reinterpret_cast<const char*>(header), n), *data});
    }
  }
  return std::string(command_id) + Sha256(DeterministicBytes(chunk));
}

std::string EnvelopeCodec::InnerForCapabilities(const pb::EdgeCapabilities& caps) {
  return Sha256(DeterministicBytes(caps));
}

Result<std::pair<EnvelopeKind, std::string>> EnvelopeCodec::KindAndInner(const pb::EdgeEvent& e) {
  switch (e.event_case()) {
    case pb::EdgeEvent::kHello:
      return std::pair{EnvelopeKind::kHello, std::string()};
    case pb::EdgeEvent::kHeartbeat:
      return std::pair{EnvelopeKind::kHeartbeat, std::string()};
    case pb::EdgeEvent::kCommandResult:
      return std::pair{EnvelopeKind::kCommandResult, InnerForResult(e.command_result().command_id(),
                                                                    e.command_result().result())};
    case pb::EdgeEvent::kCommandProgress:
      return std::pair{
          EnvelopeKind::kCommandProgress,
          InnerForProgress(e.command_progress().command_id(), e.command_progress().chunk())};
    case pb::EdgeEvent::kCapabilityUpdate:
      return std::pair{EnvelopeKind::kCapabilityUpdate,
                       InnerForCapabilities(e.capability_update().capabilities())};
    default:
      return MakeError(ErrorCode::kInvalidArgument,
                       "EdgeEvent.event is not set: nothing to seal or verify");
  }
}

Result<pb::SealNodeEnvelope> EnvelopeCodec::Seal(const NodeKey& key,
                                                 std::string_view node_security_token,
                                                 EnvelopeKind kind, Clock::WallTime now,
                                                 std::string_view node_id,
                                                 std::string_view stream_id,
                                                 std::string_view inner) {
  const int64_t ms = ToEpochMillis(now);
  if (ms < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "envelope timestamp " + std::to_string(ms) + " ms is before the Unix epoch");
  }
  std::string payload = CanonicalBytes(kind, static_cast<uint64_t>(ms), node_id, stream_id, inner);
  auto sig = key.Sign(payload);
  if (!sig) return std::unexpected(sig.error());
  pb::SealNodeEnvelope env;
  env.set_node_security_token(std::string(node_security_token));
  env.set_signature(std::move(*sig));
  env.set_payload(std::move(payload));
  return env;
}

Status EnvelopeCodec::SealEvent(pb::EdgeEvent& event, const NodeKey& key,
                                std::string_view node_security_token, Clock::WallTime now,
                                std::string_view node_id, std::string_view stream_id) {
  auto ki = KindAndInner(event);
  if (!ki) return std::unexpected(ki.error());
  auto env = Seal(key, node_security_token, ki->first, now, node_id, stream_id, ki->second);
  if (!env) return std::unexpected(env.error());
  *MutableEnvelopeOf(event) = std::move(*env);
  return OkStatus();
}

Result<EnvelopeHeader> EnvelopeCodec::Verify(const pb::SealNodeEnvelope& envelope,
                                             const EnvelopeExpectation& expected,
                                             std::span<const std::string> public_keys,
                                             Clock::WallTime now, std::chrono::milliseconds skew) {
  auto header = ParseCanonical(envelope.payload());
  if (!header) return header;
  if (public_keys.empty()) {
    return Unauth("bad signature: no public key is registered for node " + Quote(expected.node_id));
  }
  bool signed_ok = false;
  for (const auto& pub : public_keys) {
    if (NodeKey::Verify(pub, envelope.payload(), envelope.signature())) {
      signed_ok = true;
      break;
    }
  }
  if (!signed_ok) {
    return Unauth(
        "bad signature: the envelope signature (" + std::to_string(envelope.signature().size()) +
        " bytes) does not verify under the registered key(s) of node " + Quote(expected.node_id));
  }
  if (header->kind != expected.kind) {
    return Unauth("kind mismatch: envelope is for " + std::string(EnvelopeKindName(header->kind)) +
                  ", message is " + std::string(EnvelopeKindName(expected.kind)));
  }
  if (header->node_id != expected.node_id) {
    return Unauth("node mismatch: envelope node_id " + Quote(header->node_id) +
                  " is not the stream's node " + Quote(expected.node_id));
  }
  if (header->stream_id != expected.stream_id) {
    return Unauth("stream mismatch: envelope stream_id " + Quote(header->stream_id) +
                  " is not the stream's id " + Quote(expected.stream_id));
  }
  const int64_t now_ms = ToEpochMillis(now);
  const int64_t skew_ms = skew.count();
  // Compare in unsigned space without overflow: |timestamp - now| <= skew.
  const bool in_window = now_ms >= 0 && header->timestamp_ms <= static_cast<uint64_t>(INT64_MAX) &&
                         static_cast<int64_t>(header->timestamp_ms) >= now_ms - skew_ms &&
                         static_cast<int64_t>(header->timestamp_ms) - now_ms <= skew_ms;
  if (!in_window) {
    return Unauth("timestamp out of window: envelope timestamp_ms " +
                  std::to_string(header->timestamp_ms) + " is more than " +
                  std::to_string(skew_ms) + " ms from now (" + std::to_string(now_ms) + ")");
  }
  if (expected.inner && header->inner != *expected.inner) {
    return Unauth("inner mismatch: the envelope's inner (" + std::to_string(header->inner.size()) +
                  " bytes) does not match the message body it carries");
  }
  return header;
}

Result<EnvelopeHeader> EnvelopeCodec::VerifyEvent(
    const pb::EdgeEvent& event, std::string_view node_id, std::string_view stream_id,
    std::span<const std::string> public_keys, Clock::WallTime now, std::chrono::milliseconds skew) {
  auto ki = KindAndInner(event);
  if (!ki) return Unauth("malformed envelope payload: " + ki.error().message);
  const pb::SealNodeEnvelope* env = EnvelopeOf(event);
  EnvelopeExpectation expect{ki->first, std::string(node_id), std::string(stream_id),
                             std::move(ki->second)};
  if (event.has_hello() && stream_id.empty()) expect.stream_id = event.hello().stream_id();
  return Verify(*env, expect, public_keys, now, skew);
}

const pb::SealNodeEnvelope* EnvelopeCodec::EnvelopeOf(const pb::EdgeEvent& e) {
  switch (e.event_case()) {
    case pb::EdgeEvent::kHello:
      return &e.hello().envelope();
    case pb::EdgeEvent::kHeartbeat:
      return &e.heartbeat().envelope();
    case pb::EdgeEvent::kCommandResult:
      return &e.command_result().envelope();
    case pb::EdgeEvent::kCommandProgress:
      return &e.command_progress().envelope();
    case pb::EdgeEvent::kCapabilityUpdate:
      return &e.capability_update().envelope();
    default:
      return nullptr;
  }
}

}  // namespace edge::identity
