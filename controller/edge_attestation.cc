#include "controller/edge_attestation.h"

#include "agent/identity/join_token_claims.h"
#include "agent/identity/node_key.h"
#include "agent/identity/rotation_proof.h"
#include "common/log.h"
#include "common/random.h"
#include "controller/join_token_issuer.h"

namespace edge::controller {

namespace pb = aegis::cluster::v1;

EdgeAttestation::EdgeAttestation(Store& store, NodeTokenAuthority& tokens,
                                 const identity::EcSigningKey& key, Clock& clock,
                                 AttestationSettings settings)
    : store_(store),
      tokens_(tokens),
      key_(key),
      clock_(clock),
      settings_(std::move(settings)),
      limiter_(clock, settings_.attest_per_minute, std::chrono::minutes(1)),
      ip_limiter_(clock, settings_.attest_per_ip_per_minute, std::chrono::minutes(1)) {}

std::vector<std::string> EdgeAttestation::ActiveKeys(const EdgeNodeRecord& node, int64_t now_ms) {
  // A revoked node has no key left (empty): nothing matches it.
  std::vector<std::string> keys;
  if (!node.public_key.empty()) keys.push_back(node.public_key);
  if (!node.prev_public_key.empty() && now_ms < node.prev_key_until_ms &&
      node.prev_public_key != node.public_key) {
    keys.push_back(node.prev_public_key);
  }
  return keys;
}

Result<IssuedChallenge> EdgeAttestation::Attest(const std::string& peer_address,
                                                const std::string& node_id, pb::NodeRole role,
                                                const std::string& public_key) {
  // Keyed by address AND node: one locked-out node behind a NAT does not block its
  // neighbours; the per-address ceiling stops one address from spraying node ids.
  switch (
      RateLimiter::AllowBoth(limiter_, peer_address + " " + node_id, ip_limiter_, peer_address)) {
    case RateLimiter::Both::kAllowed:
      break;
    case RateLimiter::Both::kFirstRefused:
      return MakeError(ErrorCode::kResourceExhausted,
                       "AttestNode rate limit: at most " +
                           std::to_string(settings_.attest_per_minute) + " per minute for node \"" +
                           log::Escape(node_id, 64) + "\" from " + peer_address + "; retry later");
    case RateLimiter::Both::kSecondRefused:
      return MakeError(ErrorCode::kResourceExhausted,
                       "AttestNode rate limit: at most " +
                           std::to_string(settings_.attest_per_ip_per_minute) +
                           " per minute from " + peer_address + " (all node ids); retry later");
  }
  if (role != pb::NODE_ROLE_EDGE) {
    return MakeError(ErrorCode::kInvalidArgument, "role " + pb::NodeRole_Name(role) +
                                                      " is not accepted: must be NODE_ROLE_EDGE");
  }
  if (public_key.size() != identity::kEd25519PublicKeySize) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "public_key must be a raw 32-byte Ed25519 key, got " +
                         std::to_string(public_key.size()) + " bytes");
  }
  IssuedChallenge out{NewUuidV4(), SecureRandomBytes(32)};
  std::lock_guard lock(mu_);
  const auto now = clock_.Now();
  std::erase_if(challenges_, [&](const auto& kv) { return kv.second.expires_at <= now; });
  if (challenges_.size() >= settings_.max_challenges) {
    return MakeError(ErrorCode::kResourceExhausted, "too many outstanding challenges (" +
                                                        std::to_string(settings_.max_challenges) +
                                                        "); retry later");
  }
  challenges_[out.challenge_id] =
      PendingChallenge{node_id, out.nonce, public_key, now + settings_.challenge_ttl};
  return out;
}

Result<TokenGrant> EdgeAttestation::Challenge(const std::string& node_id,
                                              const std::string& challenge_id,
                                              const std::string& signature,
                                              const std::optional<std::string>& enrollment_token) {
  PendingChallenge ch;
  {
    std::lock_guard lock(mu_);
    auto it = challenges_.find(challenge_id);
    if (it == challenges_.end()) {
      return MakeError(ErrorCode::kNotFound, "challenge_id \"" + challenge_id.substr(0, 64) +
                                                 "\" is unknown or was already used");
    }
    if (it->second.node_id != node_id) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "challenge " + challenge_id + " was issued to node \"" + it->second.node_id +
                           "\", not \"" + node_id + "\"");
    }
    // Single use: whatever happens next, this challenge is spent.
    ch = std::move(it->second);
    challenges_.erase(it);
  }
  if (clock_.Now() >= ch.expires_at) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "challenge " + challenge_id + " expired; call AttestNode again");
  }
  if (auto st = identity::NodeKey::Verify(ch.public_key, ch.nonce, signature); !st) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "challenge_signature does not verify under the public key given in "
                     "AttestNode: " +
                         st.error().message);
  }
  if (enrollment_token) return Enroll(node_id, ch.public_key, *enrollment_token);
  return Reattest(node_id, ch.public_key);
}

Result<TokenGrant> EdgeAttestation::Enroll(const std::string& node_id,
                                           const std::string& public_key,
                                           const std::string& enrollment_token) {
  auto parts = identity::VerifyJwtEs256(enrollment_token, key_.get(), clock_.Now(),
                                        {.audience = std::string(identity::kJoinTokenAudience),
                                         .issuer = settings_.join_token_issuer});
  if (!parts) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "enrollment_token does not verify: " + parts.error().message);
  }
  auto claims = identity::JoinTokenClaims::FromJson(parts->claims);
  if (!claims) {
    return MakeError(ErrorCode::kInvalidArgument, "enrollment_token: " + claims.error().message);
  }
  if (claims->tid.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "enrollment_token has no tid (tenant) claim");
  }
  if (!claims->sub.empty() && claims->sub != "*" && claims->sub != node_id) {
    return MakeError(ErrorCode::kPermissionDenied, "enrollment_token was issued for node \"" +
                                                       claims->sub + "\", not \"" + node_id + "\"");
  }
  auto minted = tokens_.Mint(node_id, claims->tid);
  if (!minted) return std::unexpected(minted.error());
  EdgeEnrollment e{.jti = claims->jti,
                   .join_token_hash = JoinTokenIssuer::HashToken(enrollment_token),
                   .node_id = node_id,
                   .tenant_id = claims->tid,
                   .public_key = public_key,
                   .now_ms = ToEpochMillis(clock_.Now()),
                   .token = minted->record};
  auto rec = store_.EnrollEdgeNode(e);
  if (!rec) {
    log::Get("audit")->warn(
        "ChallengeNode: edge enrollment of node {} with join token {} refused: {}",
        log::Escape(node_id), log::Escape(claims->jti), log::Escape(rec.error().ToString(), 512));
    return std::unexpected(rec.error());
  }
  if (rec->identity_replaced) {
    log::Get("audit")->warn(
        "ChallengeNode: node {} edge identity replaced with join token {} created with --replace "
        "(tenant {}): new key registered, every token of the old identity revoked",
        log::Escape(node_id), log::Escape(claims->jti), log::Escape(claims->tid));
  } else {
    log::Get("audit")->info("ChallengeNode: node {} edge-enrolled with join token {} (tenant {})",
                            log::Escape(node_id), log::Escape(claims->jti),
                            log::Escape(claims->tid));
  }
  return TokenGrant{minted->token, minted->record.issued_at_ms, minted->record.expires_at_ms};
}

Result<TokenGrant> EdgeAttestation::Reattest(const std::string& node_id,
                                             const std::string& public_key) {
  auto node = store_.GetNode(node_id);
  if (!node) return std::unexpected(node.error());
  if (*node && (*node)->state == kNodeRevoked) {
    return MakeError(ErrorCode::kFailedPrecondition, "node \"" + node_id + "\" is revoked");
  }
  auto edge = store_.GetEdgeNode(node_id);
  if (!edge) return std::unexpected(edge.error());
  if (!*edge) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "node \"" + node_id +
                         "\" is not edge-enrolled: its first ChallengeNode must carry "
                         "bootstrap_proof.enrollment_token (the join token)");
  }
  const auto keys = ActiveKeys(**edge, ToEpochMillis(clock_.Now()));
  if (std::find(keys.begin(), keys.end(), public_key) == keys.end()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "the public key given in AttestNode is not the registered key of node \"" +
                         node_id +
                         "\" (rotate with RotateEdgeKey, or re-enroll with a join token)");
  }
  auto minted = tokens_.Mint(node_id, (*edge)->tenant_id);
  if (!minted) return std::unexpected(minted.error());
  if (auto st = store_.InsertNodeToken(minted->record); !st) return std::unexpected(st.error());
  return TokenGrant{minted->token, minted->record.issued_at_ms, minted->record.expires_at_ms};
}

Result<RotationGrant> EdgeAttestation::Rotate(const std::string& node_id,
                                              const pb::RotateEdgeKeyRequest& request) {
  {
    std::lock_guard lock(mu_);
    if (!rotating_.insert(node_id).second) {
      return MakeError(ErrorCode::kAborted,
                       "a key rotation for node \"" + node_id + "\" is already in progress; retry");
    }
  }
  struct Release {
    EdgeAttestation* self;
    std::string node;
    ~Release() {
      std::lock_guard lock(self->mu_);
      self->rotating_.erase(node);
    }
  } release{this, node_id};

  auto node = store_.GetNode(node_id);
  if (!node) return std::unexpected(node.error());
  auto edge = store_.GetEdgeNode(node_id);
  if (!edge) return std::unexpected(edge.error());
  if (!*node || !*edge) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "node \"" + node_id + "\" is not edge-enrolled");
  }
  if ((*node)->state == kNodeRevoked || (*node)->state == kNodeUnhealthy) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "node \"" + node_id + "\" is " + (*node)->state + ": rotation refused");
  }
  auto claims =
      tokens_.Verify(request.current_envelope().node_security_token(), TokenUse::kNewSession);
  if (!claims) return std::unexpected(claims.error());
  if (claims->node_id != node_id) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "current_envelope carries a token of node \"" + claims->node_id + "\"");
  }
  // Authority comes from the registered key only, not from one in its overlap window.
  const std::vector<std::string> current{(*edge)->public_key};
  auto inner = identity::RotationProof::Verify(request, node_id, current);
  if (!inner) return std::unexpected(inner.error());

  auto minted = tokens_.Mint(node_id, (*edge)->tenant_id);
  if (!minted) return std::unexpected(minted.error());
  const int64_t now_ms = ToEpochMillis(clock_.Now());
  KeyRotation r{
      .node_id = node_id,
      .expected_public_key = (*edge)->public_key,
      .new_public_key = request.new_public_key(),
      .nonce = inner->nonce(),
      .old_token_jti = claims->jti,
      .overlap_until_ms =
          now_ms +
          std::chrono::duration_cast<std::chrono::milliseconds>(settings_.overlap_window).count(),
      .now_ms = now_ms,
      .new_token = minted->record};
  auto rotated = store_.RotateEdgeKey(r);
  if (!rotated) return std::unexpected(rotated.error());
  const bool refresh = request.new_public_key() == (*edge)->public_key;
  log::Get("edge")->info("node {}: {} (old token {} revoked)", log::Escape(node_id),
                         refresh ? "token refreshed" : "key rotated", log::Escape(claims->jti));
  return RotationGrant{
      TokenGrant{minted->token, minted->record.issued_at_ms, minted->record.expires_at_ms},
      settings_.overlap_window};
}

}  // namespace edge::controller
