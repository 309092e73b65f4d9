#include "controller/tenant_tokens.h"

#include <algorithm>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/random.h"

namespace edge::controller {

bool TenantTokenClaims::HasRole(std::string_view role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

Result<TrustedIssuers> LoadTrustedIssuers(const std::map<std::string, std::string>& files,
                                          const std::string& config_key) {
  TrustedIssuers out;
  for (const auto& [iss, file] : files) {
    const std::string where = config_key + "." + iss + " '" + file + "'";
    auto pem = ReadFile(file, 1 << 20);
    if (!pem) {
      return MakeError(ErrorCode::kInvalidArgument,
                       where + ": cannot be read: " + pem.error().message);
    }
    auto key = identity::PublicKeyFromPem(*pem);
    if (!key) {
      return MakeError(ErrorCode::kInvalidArgument,
                       where + ": not a PEM public key: " + key.error().message);
    }
    out[iss] = std::make_shared<identity::PkeyPtr>(std::move(*key));
  }
  return out;
}

Result<std::string> TenantTokens::Mint(const std::string& tenant_id,
                                       const std::vector<std::string>& roles,
                                       std::chrono::seconds ttl, const std::string& subject,
                                       TenantTokenClaims* out) const {
  if (tenant_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "--tenant is required");
  if (settings_.roles_required && roles.empty())
    return MakeError(ErrorCode::kInvalidArgument, "at least one --role is required");
  if (subject.empty() && settings_.default_subject.empty())
    return MakeError(ErrorCode::kInvalidArgument, "--user is required");
  if (ttl < std::chrono::seconds(1) || ttl > std::chrono::hours(24 * 366)) {
    return MakeError(ErrorCode::kInvalidArgument, "--ttl must be between 1s and 366 days");
  }
  const int64_t iat =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  TenantTokenClaims c{.issuer = settings_.issuer,
                      .subject = subject.empty() ? settings_.default_subject : subject,
                      .tenant_id = tenant_id,
                      .roles = roles,
                      .jti = settings_.jti_prefix + NewUuidV4(),
                      .expires_at_ms = (iat + ttl.count()) * 1000};
  nlohmann::json claims = {{"iss", settings_.issuer},
                           {"aud", settings_.audience},
                           {"sub", c.subject},
                           {"tid", tenant_id},
                           {"iat", iat},
                           {"exp", iat + ttl.count()},
                           {"jti", c.jti}};
  if (!roles.empty() || settings_.roles_required) claims["roles"] = roles;
  auto token = identity::SignJwtEs256(claims, key_);
  if (!token) return std::unexpected(token.error());
  if (out != nullptr) *out = c;
  return token;
}

Result<TenantTokenClaims> TenantTokens::Verify(std::string_view token) const {
  auto fail = [this](const std::string& why) {
    return MakeError(ErrorCode::kUnauthenticated, settings_.kind + ": " + why);
  };
  if (token.empty()) return fail("missing");
  EVP_PKEY* key = key_.get();
  std::string issuer = settings_.issuer;
  if (!trusted_.empty()) {
    // Only picks the key: everything is checked below against it.
    auto unverified = identity::DecodeJwtUnverified(token);
    if (!unverified) return fail(unverified.error().message);
    const auto& iss = unverified->claims.find("iss");
    if (iss != unverified->claims.end() && iss->is_string()) {
      if (auto t = trusted_.find(iss->get<std::string>()); t != trusted_.end()) {
        key = t->second->get();
        issuer = t->first;
      }
    }
  }
  auto parts = identity::VerifyJwtEs256(
      token, key, clock_.Now(),
      {.audience = settings_.audience, .issuer = issuer, .leeway = std::chrono::seconds(5)});
  if (!parts) return fail(parts.error().message);
  const auto& j = parts->claims;
  TenantTokenClaims c;
  auto str = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  c.issuer = issuer;
  c.subject = str("sub");
  c.tenant_id = str("tid");
  c.jti = str("jti");
  if (c.tenant_id.empty()) return fail("claim 'tid' is missing or not a non-empty string");
  if (auto r = j.find("roles"); r != j.end() && r->is_array()) {
    for (const auto& v : *r)
      if (v.is_string()) c.roles.push_back(v.get<std::string>());
  }
  if (auto e = j.find("exp"); e != j.end() && e->is_number_integer()) {
    c.expires_at_ms = e->get<int64_t>() * 1000;
  }
  if (settings_.subject_and_exp_required) {
    if (c.subject.empty()) return fail("claim 'sub' is missing or not a non-empty string");
    if (c.expires_at_ms == 0) return fail("claim 'exp' is missing or not an integer");
  }
  return c;
}

}  // namespace edge::controller
