// The claims of a join token (wire.md §1, "Trust at first contact"): the controller mints
// them into an ES256 JWT (jwt.h); the agent reads `cep` (where to enroll) and `cah` (the CA
// pin) from an unverified decode. Plain data; also the CA pin helpers that make `cah`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <openssl/types.h>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace edge::identity {

inline constexpr std::string_view kJoinTokenAudience = "edge-enrollment";

struct JoinTokenClaims {
  std::string jti;
  std::string tid;  // tenant
  std::string sub;  // label
  std::string aud{kJoinTokenAudience};
  std::string iss;
  int64_t iat = 0;  // Unix seconds
  int64_t nbf = 0;
  int64_t exp = 0;
  std::string cep;  // controller endpoint host:port; empty = not in the token
  std::string cah;  // "sha256:<hex>" of the controller CA's DER; empty = not in the token

  // Every field; cep and cah only when set.
  nlohmann::json ToJson() const;
  // Type-checked read: jti and exp are required; string claims must be strings and time
  // claims integers when present; `aud` may be a string or an array (its first string).
  // INVALID_ARGUMENT naming the claim and the rule. Does not check times or the audience —
  // that is VerifyJwtEs256's job.
  static Result<JoinTokenClaims> FromJson(const nlohmann::json& claims);
  // DecodeJwtUnverified + FromJson: what the agent does with its join token before it has
  // any key. The result is NOT authenticated.
  static Result<JoinTokenClaims> FromTokenUnverified(std::string_view token);
};

// "sha256:" + lowercase hex SHA-256 of the certificate's DER encoding.
std::string CaPin(X509* cert);
std::string CaPinOfDer(std::string_view der);
// INVALID_ARGUMENT unless `pin` is "sha256:" followed by 64 hex digits (case-insensitive).
Status ValidateCaPin(std::string_view pin);

}  // namespace edge::identity
