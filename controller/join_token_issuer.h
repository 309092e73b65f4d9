// Mints join tokens (wire.md §1): compact ES256 JWTs signed by the controller's token key
// with jti, tid, sub, aud="edge-enrollment", iss, iat, nbf, exp, cep (where to enroll) and cah
// (the CA pin). Only SHA-256 of a token is stored; the token itself exists once, in the reply.
#pragma once

#include <chrono>
#include <string>

#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/error.h"
#include "controller/store.h"

namespace edge::controller {

struct JoinTokenSettings {
  std::string issuer;
  std::string endpoint;  // cep
  std::string ca_pin;    // cah
  std::chrono::milliseconds default_ttl{std::chrono::hours(1)};
  std::chrono::milliseconds max_ttl{std::chrono::hours(24 * 30)};
};

struct MintedJoinToken {
  std::string token_id;
  std::string token;
  int64_t expires_at_ms = 0;
};

class JoinTokenIssuer {
 public:
  JoinTokenIssuer(Store& store, const identity::EcSigningKey& key, Clock& clock,
                  JoinTokenSettings settings)
      : store_(store), key_(key), clock_(clock), settings_(std::move(settings)) {}

  // node_id: optional binding (validated when set); tenant_id: default "default";
  // ttl 0 = the default; replace: the token may re-enroll node_id although it exists
  // (requires node_id). INVALID_ARGUMENT naming the field for bad input.
  Result<MintedJoinToken> Create(const std::string& node_id, const std::string& tenant_id,
                                 std::chrono::milliseconds ttl, bool replace = false);

  // The stored key of a token: lowercase hex SHA-256 of its bytes.
  static std::string HashToken(const std::string& token);

 private:
  Store& store_;
  const identity::EcSigningKey& key_;
  Clock& clock_;
  JoinTokenSettings settings_;
};

}  // namespace edge::controller
