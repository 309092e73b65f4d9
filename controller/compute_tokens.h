// Bearer tokens of compute members (seeds/003 "Authentication"; wire.md §3): compact ES256
// JWTs signed with the controller's token key — iss (tokens.issuer), aud "edge-compute", sub
// (a label), tid (the tenant = the member's legal entity), roles (e.g. ["ROLE_M2M"]), iat,
// exp, jti. `edge-controller compute token create` mints them through the admin socket.
// The audience keeps them apart from node, join and invoke tokens (none of which has it).
// Thread-safe; the key and clock outlive it.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::controller {

inline constexpr std::string_view kComputeAudience = "edge-compute";
inline constexpr std::string_view kComputeRole = "ROLE_M2M";

struct ComputeTokenClaims {
  std::string subject;
  std::string tenant_id;
  std::vector<std::string> roles;
  std::string jti;
  int64_t expires_at_ms = 0;

  bool HasRole(std::string_view role) const;
};

class ComputeTokens {
 public:
  ComputeTokens(const identity::EcSigningKey& key, Clock& clock, std::string issuer)
      : key_(key), clock_(clock), issuer_(std::move(issuer)) {}

  // INVALID_ARGUMENT for an empty tenant, no role, or a ttl outside 1 s .. 366 days.
  Result<std::string> Mint(const std::string& tenant_id, const std::vector<std::string>& roles,
                           std::chrono::seconds ttl, const std::string& subject,
                           ComputeTokenClaims* claims = nullptr) const;
  // UNAUTHENTICATED naming the failed check (signature, issuer, audience, times, tid).
  Result<ComputeTokenClaims> Verify(std::string_view token) const;

 private:
  const identity::EcSigningKey& key_;
  Clock& clock_;
  std::string issuer_;
};

}  // namespace edge::controller
