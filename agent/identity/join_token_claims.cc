#include "agent/identity/join_token_claims.h"

#include <cctype>

#include "agent/identity/encoding.h"
#include "agent/identity/jwt.h"
#include "agent/identity/openssl_util.h"

namespace edge::identity {

nlohmann::json JoinTokenClaims::ToJson() const {
  nlohmann::json j = {{"jti", jti}, {"tid", tid}, {"sub", sub}, {"aud", aud},
                      {"iss", iss}, {"iat", iat}, {"nbf", nbf}, {"exp", exp}};
  if (!cep.empty()) j["cep"] = cep;
  if (!cah.empty()) j["cah"] = cah;
  return j;
}

Result<JoinTokenClaims> JoinTokenClaims::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "join token claims must be a JSON object");
  }
  JoinTokenClaims c;
  c.aud.clear();
  auto str = [&](const char* key, std::string& out, bool required) -> Status {
    auto it = j.find(key);
    if (it == j.end()) {
      if (!required) return OkStatus();
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("join token has no ") + key + " claim");
    }
    if (!it->is_string()) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          std::string("join token claim ") + key + " must be a string, got " + it->type_name());
    }
    out = it->get<std::string>();
    return OkStatus();
  };
  auto num = [&](const char* key, int64_t& out, bool required) -> Status {
    auto it = j.find(key);
    if (it == j.end()) {
      if (!required) return OkStatus();
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("join token has no ") + key + " claim");
    }
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("join token claim ") + key +
                                                        " must be an integer (Unix seconds), got " +
                                                        it->type_name());
    }
    out = it->get<int64_t>();
    return OkStatus();
  };
  for (auto st : {str("jti", c.jti, true), str("tid", c.tid, false), str("sub", c.sub, false),
                  str("iss", c.iss, false), str("cep", c.cep, false), str("cah", c.cah, false),
                  num("iat", c.iat, false), num("nbf", c.nbf, false), num("exp", c.exp, true)}) {
    if (!st) return std::unexpected(st.error());
  }
  if (auto it = j.find("aud"); it != j.end()) {
    if (it->is_string()) {
      c.aud = it->get<std::string>();
    } else if (it->is_array() && !it->empty() && (*it)[0].is_string()) {
      c.aud = (*it)[0].get<std::string>();
    } else {
      return MakeError(ErrorCode::kInvalidArgument,
                       "join token claim aud must be a string or an array of strings");
    }
  }
  if (!c.cah.empty()) {
    if (auto st = ValidateCaPin(c.cah); !st) return std::unexpected(st.error());
  }
  return c;
}

Result<JoinTokenClaims> JoinTokenClaims::FromTokenUnverified(std::string_view token) {
  auto parts = DecodeJwtUnverified(token);
  if (!parts) return std::unexpected(parts.error());
  return FromJson(parts->claims);
}

std::string CaPinOfDer(std::string_view der) {
  return "sha256:" + HexEncode(Sha256(der));
}

std::string CaPin(X509* cert) {
  return CaPinOfDer(CertToDer(cert));
}

Status ValidateCaPin(std::string_view pin) {
  constexpr std::string_view kPrefix = "sha256:";
  bool ok = pin.starts_with(kPrefix) && pin.size() == kPrefix.size() + 64;
  for (size_t i = kPrefix.size(); ok && i < pin.size(); ++i)
    ok = std::isxdigit(static_cast<unsigned char>(pin[i])) != 0;
  if (!ok) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "CA pin \"" + std::string(pin.substr(0, 80)) +
                         "\" is not sha256:<64 hex digits> (SHA-256 of the CA certificate's DER)");
  }
  return OkStatus();
}

}  // namespace edge::identity
