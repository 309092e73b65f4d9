// Bearer tokens of compute members (seeds/003 "Authentication"; wire.md §3): TenantTokens
// (tenant_tokens.h) with aud "edge-compute", sub (a label, default "compute-member"), tid
// (the tenant = the member's legal entity), roles required (e.g. ["ROLE_M2M"]), jti "ct-…".
// `edge-controller compute token create` mints them through the admin socket.
#pragma once

#include <string>
#include <string_view>

#include "controller/tenant_tokens.h"

namespace edge::controller {

inline constexpr std::string_view kComputeAudience = "edge-compute";
inline constexpr std::string_view kComputeRole = "ROLE_M2M";

using ComputeTokenClaims = TenantTokenClaims;

class ComputeTokens : public TenantTokens {
 public:
  ComputeTokens(const identity::EcSigningKey& key, Clock& clock, std::string issuer)
      : TenantTokens(key, clock,
                     TenantTokenSettings{.kind = "compute token",
                                         .audience = std::string(kComputeAudience),
                                         .issuer = std::move(issuer),
                                         .jti_prefix = "ct-",
                                         .default_subject = "compute-member",
                                         .roles_required = true}) {}
};

}  // namespace edge::controller
