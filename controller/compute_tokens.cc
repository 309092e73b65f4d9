#include "controller/compute_tokens.h"

#include <algorithm>

#include "common/random.h"

namespace edge::controller {

bool ComputeTokenClaims::HasRole(std::string_view role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

Result<std::string> ComputeTokens::Mint(const std::string& tenant_id,
                                        const std::vector<std::string>& roles,
                                        std::chrono::seconds ttl, const std::string& subject,
                                        ComputeTokenClaims* out) const {
  if (tenant_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "--tenant is required");
  if (roles.empty())
    return MakeError(ErrorCode::kInvalidArgument, "at least one --role is required");
  if (ttl < std::chrono::seconds(1) || ttl > std::chrono::hours(24 * 366)) {
    return MakeError(ErrorCode::kInvalidArgument, "--ttl must be between 1s and 366 days");
  }
  const int64_t iat =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  ComputeTokenClaims c{.subject = subject.empty() ? "compute-member" : subject,
                       .tenant_id = tenant_id,
                       .roles = roles,
                       .jti = "ct-" + NewUuidV4(),
                       .expires_at_ms = (iat + ttl.count()) * 1000};
  nlohmann::json claims = {{"iss", issuer_},           {"aud", kComputeAudience},
                           {"sub", c.subject},         {"tid", tenant_id},
                           {"roles", roles},           {"iat", iat},
                           {"exp", iat + ttl.count()}, {"jti", c.jti}};
  auto token = identity::SignJwtEs256(claims, key_);
  if (!token) return std::unexpected(token.error());
  if (out != nullptr) *out = c;
  return token;
}

Result<ComputeTokenClaims> ComputeTokens::Verify(std::string_view token) const {
  auto fail = [](const std::string& why) {
    return MakeError(ErrorCode::kUnauthenticated, "compute token: " + why);
  };
  if (token.empty()) return fail("missing");
  auto parts = identity::VerifyJwtEs256(token, key_.get(), clock_.Now(),
                                        {.audience = std::string(kComputeAudience),
                                         .issuer = issuer_,
                                         .leeway = std::chrono::seconds(5)});
  if (!parts) return fail(parts.error().message);
  const auto& j = parts->claims;
  ComputeTokenClaims c;
  auto str = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
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
  return c;
}

}  // namespace edge::controller
