// Bearer tokens bound to a tenant, for callers that are not nodes: compact ES256 JWTs signed
// with the controller's token key — iss (tokens.issuer), aud (one per kind of caller), sub,
// tid (the tenant), roles (when the kind needs them), iat, exp, jti. One class, two kinds:
//   - compute members (ComputeTokens, compute_tokens.h): aud "edge-compute", roles required;
//   - operator users of the northbound API (wire.md §5.1): aud "edge-api", sub and exp
//     required, no roles; tokens of other issuers (http.trusted_issuers, e.g. an OIDC
//     provider) are verified with their public keys.
// The audience keeps each kind apart from the others and from node, join and invoke tokens
// (none of which has it). Thread-safe once built; the key and clock outlive it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::controller {

struct TenantTokenClaims {
  std::string issuer;
  std::string subject;
  std::string tenant_id;
  std::vector<std::string> roles;
  std::string jti;
  int64_t expires_at_ms = 0;

  bool HasRole(std::string_view role) const;
};

struct TenantTokenSettings {
  std::string kind;      // names the token in errors: "compute token", "user token"
  std::string audience;  // the `aud` minted and required
  std::string issuer;    // tokens.issuer: the `iss` minted, and accepted with the own key
  std::string jti_prefix;
  std::string default_subject;  // Mint with an empty subject ("" = a subject is required)
  bool roles_required = false;  // Mint refuses no role
  // Verify also requires a non-empty `sub` and an `exp` (tokens of other issuers may lack
  // what our own Mint always writes).
  bool subject_and_exp_required = false;
};

// Public keys of other issuers whose tokens are accepted (iss → key).
using TrustedIssuers = std::map<std::string, std::shared_ptr<identity::PkeyPtr>>;

// Reads each issuer's public key PEM file (config http.trusted_issuers: iss → file).
// INVALID_ARGUMENT naming the issuer and the file.
Result<TrustedIssuers> LoadTrustedIssuers(const std::map<std::string, std::string>& files,
                                          const std::string& config_key);

class TenantTokens {
 public:
  TenantTokens(const identity::EcSigningKey& key, Clock& clock, TenantTokenSettings settings,
               TrustedIssuers trusted = {})
      : key_(key), clock_(clock), settings_(std::move(settings)), trusted_(std::move(trusted)) {}

  // INVALID_ARGUMENT for an empty tenant, no role (when required), no subject (when there is
  // no default), or a ttl outside 1 s .. 366 days.
  Result<std::string> Mint(const std::string& tenant_id, const std::vector<std::string>& roles,
                           std::chrono::seconds ttl, const std::string& subject,
                           TenantTokenClaims* claims = nullptr) const;
  // UNAUTHENTICATED "<kind>: <the failed check>" (signature, issuer, audience, times, tid…).
  // A token whose `iss` is a trusted issuer is verified with that issuer's key; any other
  // with the own key and tokens.issuer.
  Result<TenantTokenClaims> Verify(std::string_view token) const;

  const TenantTokenSettings& settings() const { return settings_; }

 private:
  const identity::EcSigningKey& key_;
  Clock& clock_;
  TenantTokenSettings settings_;
  TrustedIssuers trusted_;
};

}  // namespace edge::controller
