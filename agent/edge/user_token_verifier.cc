#include "agent/edge/user_token_verifier.h"

#include <fstream>
#include <sstream>

#include "agent/identity/jwt.h"
#include "agent/identity/openssl_util.h"
#include "common/log.h"

namespace edge::agentedge {

struct UserTokenVerifier::Key {
  identity::PkeyPtr pkey;
};

UserTokenVerifier::~UserTokenVerifier() = default;

Result<std::shared_ptr<const UserTokenVerifier>> UserTokenVerifier::Load(
    const std::map<std::string, std::string>& issuers) {
  std::shared_ptr<UserTokenVerifier> v(new UserTokenVerifier());
  for (const auto& [iss, file] : issuers) {
    const std::string where = "security.user_token_issuers." + iss + " '" + file + "'";
    std::ifstream in(file);
    if (!in) return MakeError(ErrorCode::kInvalidArgument, where + ": cannot be read");
    std::stringstream pem;
    pem << in.rdbuf();
    if (pem.str().size() > (1 << 20)) {
      return MakeError(ErrorCode::kInvalidArgument, where + ": larger than 1 MiB");
    }
    auto key = identity::PublicKeyFromPem(pem.str());
    if (!key) {
      return MakeError(ErrorCode::kInvalidArgument,
                       where + ": not a PEM public key: " + key.error().message);
    }
    v->keys_[iss] = std::make_shared<Key>(Key{std::move(*key)});
  }
  return std::shared_ptr<const UserTokenVerifier>(std::move(v));
}

Result<UserTokenVerifier::Verified> UserTokenVerifier::Verify(std::string_view token,
                                                              std::string_view node_id,
                                                              std::string_view tenant,
                                                              std::string_view command_id,
                                                              Clock::WallTime now) const {
  const std::string field = "invoke_tool.seal_envelope.user_security_token";
  auto parts = identity::DecodeJwtUnverified(token);
  if (!parts) {
    return MakeError(ErrorCode::kUnauthenticated, field + ": " + parts.error().message);
  }
  const auto& claims = parts->claims;
  const auto iss_it = claims.find("iss");
  if (iss_it == claims.end() || !iss_it->is_string()) {
    return MakeError(ErrorCode::kUnauthenticated, field + ": no string iss claim");
  }
  const std::string iss = iss_it->get<std::string>();
  auto key = keys_.find(iss);
  if (key == keys_.end()) {
    return MakeError(ErrorCode::kUnauthenticated, field + ": issuer \"" + log::Escape(iss, 80) +
                                                      "\" is not in security.user_token_issuers");
  }
  identity::JwtVerifyOptions opts;
  opts.audience = kAudience;
  opts.issuer = iss;
  auto verified = identity::VerifyJwtEs256(token, key->second->pkey.get(), now, opts);
  if (!verified) {
    return MakeError(ErrorCode::kUnauthenticated, field + ": " + verified.error().message);
  }
  auto expect = [&](const char* claim, std::string_view want) -> Status {
    const auto it = verified->claims.find(claim);
    const std::string got =
        it != verified->claims.end() && it->is_string() ? it->get<std::string>() : std::string();
    if (got == want) return OkStatus();
    return MakeError(ErrorCode::kUnauthenticated, field + ": claim " + claim + " \"" +
                                                      log::Escape(got, 80) + "\" is not \"" +
                                                      log::Escape(want, 80) + "\"");
  };
  if (auto st = expect("tid", tenant); !st) return std::unexpected(st.error());
  if (auto st = expect("nid", node_id); !st) return std::unexpected(st.error());
  if (auto st = expect("cid", command_id); !st) return std::unexpected(st.error());
  Verified out;
  out.issuer = iss;
  if (auto sub = verified->claims.find("sub"); sub != verified->claims.end() && sub->is_string()) {
    out.subject = sub->get<std::string>();
  }
  if (auto roles = verified->claims.find("roles"); roles != verified->claims.end()) {
    if (!roles->is_array()) {
      return MakeError(ErrorCode::kUnauthenticated, field + ": claim roles is not an array");
    }
    for (const auto& r : *roles) {
      if (r.is_string()) out.roles.push_back(r.get<std::string>());
    }
  }
  return out;
}

}  // namespace edge::agentedge
