#include "agent/identity/worker_token.h"

#include <algorithm>
#include <cctype>

#include "agent/identity/encoding.h"
#include "agent/identity/jwt.h"
#include "common/json_parse.h"
#include "common/random.h"
#include "common/secure_compare.h"

namespace edge::identity {
namespace {

constexpr size_t kMaxTokenBytes = 16 << 10;

std::unexpected<Error> Unauth(std::string message) {
  return MakeError(ErrorCode::kUnauthenticated, std::move(message));
}

bool Blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

int64_t Seconds(Clock::WallTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Splits "stacyvm-worker-v1.<payload>.<signature>".
Result<std::pair<std::string_view, std::string_view>> Split(std::string_view token) {
  if (token.size() > kMaxTokenBytes) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "worker token is " + std::to_string(token.size()) + " bytes, more than the 16 KiB allowed");
  }
  if (!token.starts_with(kWorkerTokenPrefix)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "worker token does not start with \"stacyvm-worker-v1.\"");
  }
  std::string_view rest = token.substr(kWorkerTokenPrefix.size());
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || rest.find('.', dot + 1) != std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "worker token must be stacyvm-worker-v1.<payload>.<signature>");
  }
  std::string_view payload = rest.substr(0, dot), sig = rest.substr(dot + 1);
  if (payload.empty())
    return MakeError(ErrorCode::kInvalidArgument, "worker token payload is empty");
  if (sig.empty()) return MakeError(ErrorCode::kInvalidArgument, "worker token signature is empty");
  return std::pair{payload, sig};
}

Result<WorkerTokenClaims> DecodePayload(std::string_view payload) {
  auto json = Base64UrlDecode(payload);
  if (!json) {
    return MakeError(ErrorCode::kInvalidArgument, "worker token payload is not base64url");
  }
  if (auto st = CheckJsonDepth(*json, "worker token payload", kMaxTokenJsonDepth); !st)
    return std::unexpected(st.error());
  auto j = nlohmann::json::parse(*json, nullptr, false);
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "worker token payload is not a JSON object");
  }
  return WorkerTokenClaims::FromJson(j);
}

}  // namespace

nlohmann::json WorkerTokenClaims::ToJson() const {
  nlohmann::json j = {{"worker_id", worker_id}, {"jti", jti}, {"exp", exp}};
  if (!aud.empty()) j["aud"] = aud;
  if (!scopes.empty()) j["scopes"] = scopes;
  if (iat) j["iat"] = *iat;
  if (nbf) j["nbf"] = *nbf;
  return j;
}

Result<WorkerTokenClaims> WorkerTokenClaims::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "worker token claims must be a JSON object");
  }
  WorkerTokenClaims c;
  auto str = [&](const char* key, std::string& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return OkStatus();
    if (!it->is_string()) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          std::string("worker token claim ") + key + " must be a string, got " + it->type_name());
    }
    out = it->get<std::string>();
    return OkStatus();
  };
  auto num = [&](const char* key, std::optional<int64_t>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return OkStatus();
    if (!it->is_number_integer()) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("worker token claim ") + key +
                                                        " must be an integer (Unix seconds), got " +
                                                        it->type_name());
    }
    // Unsigned values above INT64_MAX are not times.
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("worker token claim ") + key + " is out of range");
    }
    out = it->get<int64_t>();
    return OkStatus();
  };
  std::optional<int64_t> exp;
  for (auto st : {str("worker_id", c.worker_id), str("jti", c.jti), str("aud", c.aud),
                  num("exp", exp), num("iat", c.iat), num("nbf", c.nbf)}) {
    if (!st) return std::unexpected(st.error());
  }
  if (!exp) return MakeError(ErrorCode::kInvalidArgument, "worker token has no exp claim");
  c.exp = *exp;
  if (auto it = j.find("scopes"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("worker token claim scopes must be an array of strings, got ") +
                           it->type_name());
    }
    for (const auto& s : *it) {
      if (!s.is_string()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "worker token claim scopes must be an array of strings");
      }
      c.scopes.push_back(s.get<std::string>());
    }
  }
  return c;
}

WorkerTokenClaims WorkerToken::NewClaims(std::string worker_id, std::chrono::seconds ttl,
                                         Clock::WallTime now, std::string audience,
                                         std::vector<std::string> scopes) {
  WorkerTokenClaims c;
  c.worker_id = std::move(worker_id);
  c.jti = NewUuidV4();
  c.aud = std::move(audience);
  c.scopes = std::move(scopes);
  c.iat = Seconds(now);
  c.exp = *c.iat + ttl.count();
  return c;
}

Result<std::string> WorkerToken::Issue(const WorkerTokenClaims& claims, std::string_view key) {
  if (key.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "worker token signing key is empty");
  }
  if (Blank(claims.worker_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "worker token worker_id must not be blank");
  }
  std::string signing_input(kWorkerTokenPrefix);
  signing_input += Base64UrlEncode(claims.ToJson().dump());
  return signing_input + "." + Base64UrlEncode(HmacSha256(key, signing_input));
}

Result<WorkerTokenClaims> WorkerToken::DecodeUnverified(std::string_view token) {
  auto parts = Split(token);
  if (!parts) return std::unexpected(parts.error());
  return DecodePayload(parts->first);
}

Result<WorkerTokenClaims> WorkerToken::Verify(std::string_view token,
                                              const WorkerTokenVerifyOptions& options,
                                              Clock::WallTime now) {
  bool have_key = std::any_of(options.keys.begin(), options.keys.end(),
                              [](const std::string& k) { return !k.empty(); });
  if (!have_key) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "no worker signing key is configured (worker.auth.worker_signing_key)");
  }
  auto parts = Split(token);
  if (!parts) return Unauth(parts.error().message);
  auto sig = Base64UrlDecode(parts->second);
  if (!sig || sig->size() != 32) {
    return Unauth("worker token signature is not a base64url HMAC-SHA256 (32 bytes)");
  }
  const std::string_view signing_input =
      token.substr(0, kWorkerTokenPrefix.size() + parts->first.size());
  bool mac_ok = false;
  for (const auto& key : options.keys) {
    if (key.empty()) continue;
    // Every key is tried, so the time taken does not say which one matched.
    mac_ok = ConstantTimeEquals(HmacSha256(key, signing_input), *sig) || mac_ok;
  }
  if (!mac_ok) return Unauth("worker token signature does not verify under any configured key");

  auto claims = DecodePayload(parts->first);
  if (!claims) return Unauth(claims.error().message);
  const auto& c = *claims;
  if (Blank(c.worker_id)) return Unauth("worker token worker_id is blank");
  if (c.worker_id != options.worker_id) {
    return Unauth("worker token is for worker \"" + c.worker_id.substr(0, 64) +
                  "\", not this worker \"" + options.worker_id + "\"");
  }
  const int64_t t = Seconds(now);
  const int64_t skew = options.skew.count();
  if (!(t < c.exp)) {
    return Unauth("worker token expired at " + std::to_string(c.exp) + " (now " +
                  std::to_string(t) + ")");
  }
  // t is the wall clock and skew small: t + skew cannot overflow.
  if (c.nbf && *c.nbf > t + skew) {
    return Unauth("worker token is not valid before " + std::to_string(*c.nbf) + " (now " +
                  std::to_string(t) + ", skew " + std::to_string(skew) + " s)");
  }
  if (c.iat && *c.iat > t + skew) {
    return Unauth("worker token was issued in the future (iat " + std::to_string(*c.iat) +
                  ", now " + std::to_string(t) + ", skew " + std::to_string(skew) + " s)");
  }
  if (c.iat) {
    // Written so that no iat/exp pair can overflow: exp - iat only when iat >= 0.
    const int64_t max_life = options.max_lifetime.count();
    if (*c.iat < 0 ? c.exp > *c.iat + max_life : c.exp - *c.iat > max_life) {
      return Unauth("worker token lifetime exp - iat exceeds the " + std::to_string(max_life) +
                    " s maximum");
    }
  }
  if (!options.audience.empty() && !c.aud.empty() && c.aud != options.audience) {
    return Unauth("worker token audience \"" + c.aud.substr(0, 64) + "\" is not \"" +
                  options.audience + "\"");
  }
  if (!c.jti.empty() && options.revoked_jtis.contains(c.jti)) {
    return Unauth("worker token id (jti) \"" + c.jti + "\" is revoked");
  }
  return claims;
}

}  // namespace edge::identity
