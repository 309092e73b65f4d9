#include "controller/node_tokens.h"

#include <algorithm>

#include "common/random.h"

namespace edge::controller {

namespace {
int64_t Seconds(Clock::WallTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}
}  // namespace

Result<IssuedNodeToken> NodeTokenAuthority::Mint(const std::string& node_id,
                                                 const std::string& tenant_id) const {
  const int64_t iat = Seconds(clock_.Now());
  const int64_t exp = iat + settings_.ttl.count();
  IssuedNodeToken out;
  out.record.jti = "nt-" + NewUuidV4();
  out.record.node_id = node_id;
  out.record.issued_at_ms = iat * 1000;
  out.record.expires_at_ms = exp * 1000;
  nlohmann::json claims = {{"iss", settings_.issuer}, {"sub", node_id}, {"role", "edge"},
                           {"tid", tenant_id},        {"iat", iat},     {"exp", exp},
                           {"jti", out.record.jti}};
  auto token = identity::SignJwtEs256(claims, key_);
  if (!token) return std::unexpected(token.error());
  out.token = std::move(*token);
  return out;
}

Result<NodeTokenClaims> NodeTokenAuthority::Verify(std::string_view token, TokenUse use) const {
  auto fail = [](const std::string& why) {
    return MakeError(ErrorCode::kUnauthenticated, "node security token: " + why);
  };
  if (token.empty()) return fail("missing");
  const auto now = clock_.Now();
  auto parts = identity::VerifyJwtEs256(
      token, key_.get(), now,
      {.audience = "", .issuer = settings_.issuer, .leeway = settings_.leeway});
  if (!parts) return fail(parts.error().message);
  const auto& c = parts->claims;
  auto str = [&](const char* k) -> std::string {
    return c.contains(k) && c[k].is_string() ? c[k].get<std::string>() : std::string();
  };
  if (str("role") != "edge") return fail("role is not \"edge\"");
  NodeTokenClaims out{.node_id = str("sub"), .tenant_id = str("tid"), .jti = str("jti")};
  for (const auto& [claim, value] :
       {std::pair<const char*, const std::string*>{"sub", &out.node_id},
        {"tid", &out.tenant_id},
        {"jti", &out.jti}}) {
    if (value->empty()) {
      return fail(std::string("claim '") + claim + "' is missing or not a non-empty string");
    }
  }
  out.issued_at_ms = c.value("iat", int64_t{0}) * 1000;
  out.expires_at_ms = c["exp"].get<int64_t>() * 1000;
  out.accepted_until_ms = out.expires_at_ms;
  auto rec = store_.GetNodeToken(out.jti);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec) return fail("token " + out.jti + " is unknown to this controller");
  if ((*rec)->node_id != out.node_id) return fail("token " + out.jti + " belongs to another node");
  if ((*rec)->revoked_at_ms != 0) {
    const bool in_grace = use == TokenUse::kOpenStream && (*rec)->revoke_reason == "rotated" &&
                          ToEpochMillis(now) < (*rec)->grace_until_ms;
    if (!in_grace) {
      return fail("token " + out.jti + " was revoked (" + (*rec)->revoke_reason + ")");
    }
    out.accepted_until_ms = std::min(out.accepted_until_ms, (*rec)->grace_until_ms);
  }
  return out;
}

Result<std::string> NodeTokenAuthority::MintInvokeToken(const std::string& command_id,
                                                        const std::string& node_id,
                                                        const std::string& tenant_id,
                                                        std::chrono::milliseconds deadline) const {
  const int64_t iat = Seconds(clock_.Now());
  // Valid while the command may run: its deadline (or an hour) plus five minutes.
  const int64_t life =
      (deadline.count() > 0 ? std::chrono::duration_cast<std::chrono::seconds>(deadline).count()
                            : 3600) +
      300;
  nlohmann::json claims = {{"iss", settings_.issuer},
                           {"sub", "operator"},
                           {"aud", "edge-invoke"},
                           {"tid", tenant_id},
                           {"nid", node_id},
                           {"cid", command_id},
                           {"iat", iat},
                           {"exp", iat + life},
                           {"jti", NewUuidV4()},
                           {"roles", nlohmann::json::array({"operator"})}};
  return identity::SignJwtEs256(claims, key_);
}

}  // namespace edge::controller
