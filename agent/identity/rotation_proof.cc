#include "agent/identity/rotation_proof.h"

#include "agent/identity/envelope_codec.h"
#include "common/random.h"

namespace edge::identity {

namespace pb = aegis::cluster::v1;

std::string RotationProof::NewKeyMessage(std::string_view node_id,
                                         std::string_view new_public_key) {
  std::string out(node_id);
  out.append(new_public_key);
  return out;
}

Result<pb::RotateEdgeKeyRequest> RotationProof::Build(const NodeKey& old_key,
                                                      const NodeKey& new_key,
                                                      std::string_view node_id,
                                                      std::string_view node_security_token,
                                                      std::string nonce) {
  if (node_id.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "rotation node_id must not be empty");
  }
  if (nonce.empty()) nonce = SecureRandomBytes(kRotationNonceSize);
  if (nonce.size() != kRotationNonceSize) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rotation nonce must be 32 bytes, got " + std::to_string(nonce.size()));
  }
  pb::RotateEdgeKeyInner inner;
  inner.set_node_id(std::string(node_id));
  inner.set_new_public_key(new_key.public_key());
  inner.set_nonce(std::move(nonce));
  std::string payload = EnvelopeCodec::DeterministicBytes(inner);
  auto outer_sig = old_key.Sign(payload);
  if (!outer_sig) return std::unexpected(outer_sig.error());
  auto new_sig = new_key.Sign(NewKeyMessage(node_id, new_key.public_key()));
  if (!new_sig) return std::unexpected(new_sig.error());

  pb::RotateEdgeKeyRequest req;
  auto* env = req.mutable_current_envelope();
  env->set_node_security_token(std::string(node_security_token));
  env->set_payload(std::move(payload));
  env->set_signature(std::move(*outer_sig));
  req.set_new_public_key(new_key.public_key());
  req.set_signature_with_new_key(std::move(*new_sig));
  return req;
}

Result<pb::RotateEdgeKeyInner> RotationProof::Verify(
    const pb::RotateEdgeKeyRequest& request, std::string_view node_id,
    std::span<const std::string> current_public_keys) {
  const auto& env = request.current_envelope();
  bool authorised = false;
  for (const auto& pub : current_public_keys) {
    if (NodeKey::Verify(pub, env.payload(), env.signature())) {
      authorised = true;
      break;
    }
  }
  if (!authorised) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "rotation current_envelope signature does not verify under the current "
                     "key of node \"" +
                         std::string(node_id) + "\"");
  }
  if (request.new_public_key().size() != kEd25519PublicKeySize) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rotation new_public_key must be a raw 32-byte Ed25519 key, got " +
                         std::to_string(request.new_public_key().size()) + " bytes");
  }
  pb::RotateEdgeKeyInner inner;
  if (!inner.ParseFromString(env.payload())) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rotation current_envelope.payload is not a RotateEdgeKeyInner message");
  }
  if (inner.node_id() != node_id) {
    return MakeError(ErrorCode::kUnauthenticated, "rotation proof was made for node \"" +
                                                      inner.node_id().substr(0, 80) + "\", not \"" +
                                                      std::string(node_id) + "\"");
  }
  if (inner.new_public_key() != request.new_public_key()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rotation new_public_key differs from the one signed in current_envelope");
  }
  if (inner.nonce().size() != kRotationNonceSize) {
    return MakeError(ErrorCode::kInvalidArgument, "rotation nonce must be 32 bytes, got " +
                                                      std::to_string(inner.nonce().size()));
  }
  auto st =
      NodeKey::Verify(request.new_public_key(), NewKeyMessage(node_id, request.new_public_key()),
                      request.signature_with_new_key());
  if (!st) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rotation signature_with_new_key does not verify under new_public_key: " +
                         st.error().message);
  }
  return inner;
}

}  // namespace edge::identity
