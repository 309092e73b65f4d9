// Fuzz target: the envelope payload parser (wire.md §2.4) and verification of everything a
// controller reads off ConnectEdge and RotateEdgeKey: the input is taken as a canonical
// payload, as a serialized EdgeEvent and as a serialized RotateEdgeKeyRequest. A payload that
// parses must re-encode to the same bytes; nothing unsigned may verify.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/envelope_codec.h"
#include "agent/identity/rotation_proof.h"

namespace pb = aegis::cluster::v1;
using edge::identity::EnvelopeCodec;

namespace {
const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys{edge::identity::NodeKey::Generate()->public_key()};
  return keys;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  const auto now = edge::Clock::WallTime(std::chrono::seconds(1'700'000'000));
  if (auto h = EnvelopeCodec::ParseCanonical(s)) {
    if (EnvelopeCodec::CanonicalBytes(h->kind, h->timestamp_ms, h->node_id, h->stream_id,
                                      h->inner) != s) {
      __builtin_trap();
    }
  }
  pb::SealNodeEnvelope env;
  env.set_payload(s);
  env.set_signature(s.substr(0, 64));
  if (EnvelopeCodec::Verify(env, {edge::identity::EnvelopeKind::kHello, "n1", "s", {}}, Keys(),
                            now)) {
    __builtin_trap();
  }
  pb::EdgeEvent event;
  if (event.ParseFromString(s)) {
    if (EnvelopeCodec::VerifyEvent(event, "n1", "", Keys(), now)) __builtin_trap();
  }
  pb::RotateEdgeKeyRequest rotate;
  if (rotate.ParseFromString(s)) {
    if (edge::identity::RotationProof::Verify(rotate, "n1", Keys())) __builtin_trap();
  }
  return 0;
}
