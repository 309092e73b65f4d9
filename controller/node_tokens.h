// NodeSecurityTokens (wire.md §2.3): compact ES256 JWTs signed with the controller's token
// key, claims iss, sub = node_id, role = "edge", tid, iat, exp (iat + ttl, default 1 h), jti.
// Mints them (the caller records them in the Store in the transaction that issues them) and
// verifies them (signature, issuer, role, times, and the Store's blacklist). Also mints the
// user_security_token of an InvokeTool's inner envelope. Owns nothing; the Store, key and
// clock outlive it. Thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/error.h"
#include "controller/store.h"

namespace edge::controller {

struct NodeTokenSettings {
  std::string issuer = "edge-controller";  // iss, config tokens.issuer
  std::chrono::seconds ttl{3600};          // config tokens.node_token_ttl
  std::chrono::seconds leeway{5};          // the controller checks tokens it signed itself
};

struct IssuedNodeToken {
  std::string token;
  NodeTokenRecord record;  // jti, node, issued/expires (ms)
};

struct NodeTokenClaims {
  std::string node_id;  // sub
  std::string tenant_id;
  std::string jti;
  int64_t issued_at_ms = 0;
  int64_t expires_at_ms = 0;
  // Until when this decision holds without a change in the Store: expires_at_ms, or the end
  // of the overlap window when the token was accepted only inside it (TokenUse::kOpenStream).
  int64_t accepted_until_ms = 0;
};

// Where a token is presented: a new session (ConnectEdge bearer, RotateEdgeKey) accepts only
// a token that is not blacklisted; an envelope on a stream opened before a rotation also
// accepts the token that rotation blacklisted, until the end of its overlap window.
enum class TokenUse { kNewSession, kOpenStream };

class NodeTokenAuthority {
 public:
  NodeTokenAuthority(Store& store, const identity::EcSigningKey& key, Clock& clock,
                     NodeTokenSettings settings)
      : store_(store), key_(key), clock_(clock), settings_(std::move(settings)) {}

  // Signs a fresh token for `node_id` of `tenant_id`; not recorded yet.
  Result<IssuedNodeToken> Mint(const std::string& node_id, const std::string& tenant_id) const;

  // UNAUTHENTICATED naming the failed check: not an ES256 JWT of this controller, wrong
  // issuer, role not "edge", missing sub/jti/tid, expired or not yet valid, unknown to the
  // Store (not issued here, or pruned), or blacklisted (revoked node, rotated away).
  Result<NodeTokenClaims> Verify(std::string_view token, TokenUse use) const;

  // The InvokeTool inner envelope's user_security_token: ES256 JWT with iss, sub "operator",
  // aud "edge-invoke", tid, nid (node), cid (command id), iat, exp, jti, roles ["operator"]
  // (whoever reaches the admin socket is the operator). Agents verify it with
  // data_dir/ca/token.pub.pem (security.user_token_issuers).
  Result<std::string> MintInvokeToken(const std::string& command_id, const std::string& node_id,
                                      const std::string& tenant_id,
                                      std::chrono::milliseconds deadline) const;

  const NodeTokenSettings& settings() const { return settings_; }

 private:
  Store& store_;
  const identity::EcSigningKey& key_;
  Clock& clock_;
  NodeTokenSettings settings_;
};

}  // namespace edge::controller
