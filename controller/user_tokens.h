// Bearer tokens of operator users on the northbound API (wire.md §5.1): TenantTokens
// (tenant_tokens.h) with aud "edge-api", sub (the user, required), tid (the tenant whose
// nodes the user sees), iat, exp (required), jti "ut-…", no roles. The controller mints them
// (`edge-controller user token create`, through the admin socket) and also accepts the tokens
// of the issuers in http.trusted_issuers (verified with their public keys), so an OIDC
// provider's ES256 tokens work. Node, join, invoke and compute tokens lack the audience and
// are refused.
#pragma once

#include <string>
#include <string_view>

#include "controller/tenant_tokens.h"

namespace edge::controller {

inline constexpr std::string_view kUserAudience = "edge-api";

class UserTokens : public TenantTokens {
 public:
  UserTokens(const identity::EcSigningKey& key, Clock& clock, std::string issuer,
             TrustedIssuers trusted = {})
      : TenantTokens(key, clock,
                     TenantTokenSettings{.kind = "user token",
                                         .audience = std::string(kUserAudience),
                                         .issuer = std::move(issuer),
                                         .jti_prefix = "ut-",
                                         .default_subject = "",
                                         .roles_required = false,
                                         .subject_and_exp_required = true},
                     std::move(trusted)) {}
};

}  // namespace edge::controller
