// The controller's side of edge attestation and key rotation (wire.md §2.3, §2.5), free of
// gRPC so it is tested directly: AttestNode issues challenges (kept in memory, 300 s, single
// use, rate-limited per peer address), ChallengeNode checks the signature by the key given in
// AttestNode and either enrolls the node with its join token (first time) or checks the key
// is its registered one, then issues a NodeSecurityToken; RotateEdgeKey verifies the dual
// signature and swaps the key in one Store transaction. The gRPC layer (NodeClusterServiceImpl)
// checks the caller's certificate first. Owns its challenges; references outlive it.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/error.h"
#include "controller/node_tokens.h"
#include "controller/rate_limiter.h"
#include "controller/store.h"
#include "node_cluster.pb.h"

namespace edge::controller {

struct AttestationSettings {
  std::chrono::seconds challenge_ttl{300};
  size_t attest_per_minute = 5;  // per peer address + node id
  // Per peer address alone, whatever node ids it names (one IP cannot spray node ids).
  size_t attest_per_ip_per_minute = 60;
  std::chrono::seconds overlap_window{60};
  std::string join_token_issuer = "edge-controller";  // iss of the join tokens (tokens.issuer)
  size_t max_challenges = 10'000;                     // outstanding challenges kept in memory
};

struct IssuedChallenge {
  std::string challenge_id;
  std::string nonce;  // 32 random bytes
};

struct TokenGrant {
  std::string token;
  int64_t issued_at_ms = 0;
  int64_t expires_at_ms = 0;
};

struct RotationGrant {
  TokenGrant token;
  std::chrono::seconds overlap_window{0};
};

class EdgeAttestation {
 public:
  EdgeAttestation(Store& store, NodeTokenAuthority& tokens, const identity::EcSigningKey& key,
                  Clock& clock, AttestationSettings settings);

  // AttestNode. RESOURCE_EXHAUSTED beyond the rate limit for `peer_address` + `node_id`, or
  // the looser one for `peer_address` alone;
  // INVALID_ARGUMENT for a role other than NODE_ROLE_EDGE or a key that is not 32 bytes.
  Result<IssuedChallenge> Attest(const std::string& peer_address, const std::string& node_id,
                                 aegis::cluster::v1::NodeRole role, const std::string& public_key);

  // ChallengeNode. NOT_FOUND unknown (or already used) challenge; FAILED_PRECONDITION expired;
  // PERMISSION_DENIED challenge of another node or key not registered; UNAUTHENTICATED bad
  // signature or enrollment token that does not verify; FAILED_PRECONDITION node not
  // edge-enrolled (no proof), revoked, or enrollment token already redeemed; see Store::
  // EnrollEdgeNode for the rest.
  Result<TokenGrant> Challenge(const std::string& node_id, const std::string& challenge_id,
                               const std::string& signature,
                               const std::optional<std::string>& enrollment_token);

  // RotateEdgeKey for `node_id` (the caller checked the certificate). ABORTED when another
  // rotation of the node is in flight or won the race; FAILED_PRECONDITION node revoked,
  // unhealthy or not edge-enrolled; UNAUTHENTICATED outer token or signature; INVALID_ARGUMENT
  // malformed key, failing new-key signature, or a nonce seen before.
  Result<RotationGrant> Rotate(const std::string& node_id,
                               const aegis::cluster::v1::RotateEdgeKeyRequest& request);

  // The keys an envelope of `node` may be signed with at `now_ms`: the registered key, and
  // the previous one while the overlap window lasts.
  static std::vector<std::string> ActiveKeys(const EdgeNodeRecord& node, int64_t now_ms);

 private:
  struct PendingChallenge {
    std::string node_id;
    std::string nonce;
    std::string public_key;
    Clock::WallTime expires_at;
  };
  Result<TokenGrant> Enroll(const std::string& node_id, const std::string& public_key,
                            const std::string& enrollment_token);
  Result<TokenGrant> Reattest(const std::string& node_id, const std::string& public_key);

  Store& store_;
  NodeTokenAuthority& tokens_;
  const identity::EcSigningKey& key_;
  Clock& clock_;
  AttestationSettings settings_;
  RateLimiter limiter_;     // per peer address + node id
  RateLimiter ip_limiter_;  // per peer address
  std::mutex mu_;
  std::map<std::string, PendingChallenge> challenges_;
  std::set<std::string> rotating_;  // nodes with a rotation in flight
};

}  // namespace edge::controller
