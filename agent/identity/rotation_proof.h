// The dual-signature proof of RotateEdgeKey (wire.md §2.5). The agent builds the request:
// current_envelope.payload = deterministic RotateEdgeKeyInner{node_id, new_public_key,
// nonce (32 random bytes)} signed by the OLD key (proof of authority), and
// signature_with_new_key = Ed25519(NEW key, node_id UTF-8 || new_public_key) (proof of
// possession). The controller verifies both. Stateless; nonce replay tracking, key
// replacement and token re-issue are the controller's.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "agent/identity/node_key.h"
#include "common/error.h"
#include "node_cluster.pb.h"

namespace edge::identity {

inline constexpr size_t kRotationNonceSize = 32;

class RotationProof {
 public:
  // Builds the request. `nonce` must be 32 bytes; empty = 32 fresh bytes from the CSPRNG.
  static Result<aegis::cluster::v1::RotateEdgeKeyRequest> Build(
      const NodeKey& old_key, const NodeKey& new_key, std::string_view node_id,
      std::string_view node_security_token, std::string nonce = {});

  // The message the new key signs: node_id || new_public_key.
  static std::string NewKeyMessage(std::string_view node_id, std::string_view new_public_key);

  // Verifies a request for `node_id` against the node's current key(s) (raw 32 bytes).
  // UNAUTHENTICATED: the outer envelope's signature does not verify under a current key, or
  // it was made for another node. INVALID_ARGUMENT: new_public_key is not 32 bytes, the
  // signed payload is not a RotateEdgeKeyInner, its new_public_key differs from the
  // request's, its nonce is not 32 bytes, or signature_with_new_key fails (the contract's
  // "malformed key or dual signature fails"). Returns the signed inner message (the caller
  // checks its nonce was not seen before).
  static Result<aegis::cluster::v1::RotateEdgeKeyInner> Verify(
      const aegis::cluster::v1::RotateEdgeKeyRequest& request, std::string_view node_id,
      std::span<const std::string> current_public_keys);
};

}  // namespace edge::identity
