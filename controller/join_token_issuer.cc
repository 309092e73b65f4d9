#include "controller/join_token_issuer.h"

#include "agent/identity/encoding.h"
#include "common/random.h"
#include "config/validate.h"

namespace edge::controller {

std::string JoinTokenIssuer::HashToken(const std::string& token) {
  return identity::HexEncode(identity::Sha256(token));
}

Result<MintedJoinToken> JoinTokenIssuer::Create(const std::string& node_id,
                                                const std::string& tenant_id,
                                                std::chrono::milliseconds ttl, bool replace) {
  if (replace && node_id.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "replace needs node_id: only a token bound to one node may replace that "
                     "node's identity");
  }
  if (!node_id.empty() && !config::IsValidNodeId(node_id)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node_id \"" + node_id + "\" must match [A-Za-z0-9._-]{1,64}");
  }
  const std::string tenant = tenant_id.empty() ? "default" : tenant_id;
  if (!config::IsValidNodeId(tenant)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tenant_id \"" + tenant + "\" must match [A-Za-z0-9._-]{1,64}");
  }
  if (ttl.count() < 0 || ttl > settings_.max_ttl) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "ttl " + std::to_string(ttl.count() / 1000) + "s must be between 1s and " +
                         std::to_string(settings_.max_ttl.count() / 1000) + "s");
  }
  if (ttl.count() == 0) ttl = settings_.default_ttl;
  const auto now = clock_.Now();
  const int64_t iat =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const int64_t exp = iat + std::chrono::duration_cast<std::chrono::seconds>(ttl).count();
  MintedJoinToken out;
  out.token_id = "jt-" + NewUuidV4().substr(0, 8) + NewUuidV4().substr(24);
  nlohmann::json claims = {{"jti", out.token_id},
                           {"tid", tenant},
                           {"sub", node_id.empty() ? "*" : node_id},
                           {"aud", "edge-enrollment"},
                           {"iss", settings_.issuer},
                           {"iat", iat},
                           {"nbf", iat},
                           {"exp", exp},
                           {"cep", settings_.endpoint},
                           {"cah", settings_.ca_pin},
                           // 128 random bits, so the token is a high-entropy secret on its own.
                           {"nonce", identity::Base64UrlEncode(SecureRandomBytes(16))}};
  auto token = identity::SignJwtEs256(claims, key_);
  if (!token) return std::unexpected(token.error());
  out.token = std::move(*token);
  out.expires_at_ms = exp * 1000;
  JoinTokenRecord rec{.token_id = out.token_id,
                      .token_hash = HashToken(out.token),
                      .node_id = node_id,
                      .tenant_id = tenant,
                      .created_at_ms = ToEpochMillis(now),
                      .expires_at_ms = out.expires_at_ms,
                      .replace = replace};
  if (auto st = store_.InsertJoinToken(rec); !st) return std::unexpected(st.error());
  return out;
}

}  // namespace edge::controller
