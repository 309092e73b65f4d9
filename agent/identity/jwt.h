// Compact JWS with ES256 (ECDSA P-256 + SHA-256, JOSE raw R||S signatures): the join tokens
// and NodeSecurityTokens the controller signs (wire.md §1, §2.3). Only ES256 is accepted on
// verification ("none" and HMAC algorithms are refused: no algorithm confusion).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/identity/openssl_util.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::identity {

// How deep the JSON of a token's header or claims may nest (real claims nest two or three
// levels); deeper is INVALID_ARGUMENT before the JSON is parsed.
inline constexpr size_t kMaxTokenJsonDepth = 16;

// An EC P-256 key pair for signing tokens.
class EcSigningKey {
 public:
  static Result<EcSigningKey> Generate();
  static Result<EcSigningKey> FromPem(std::string_view private_pem);
  Result<std::string> PrivatePem() const;
  Result<std::string> PublicPem() const;
  EVP_PKEY* get() const { return key_.get(); }

 private:
  explicit EcSigningKey(PkeyPtr key) : key_(std::move(key)) {}
  PkeyPtr key_;
};

struct JwtParts {
  nlohmann::json header;
  nlohmann::json claims;
};

struct JwtVerifyOptions {
  std::string audience;  // required `aud` when non-empty
  std::string issuer;    // required `iss` when non-empty
  std::chrono::seconds leeway{60};
};

// header {"alg":"ES256","typ":"JWT"} + claims, signed.
Result<std::string> SignJwtEs256(const nlohmann::json& claims, const EcSigningKey& key);

// Splits and decodes without checking the signature (the agent reads `cep`/`cah` of its join
// token this way: it has no key yet). INVALID_ARGUMENT naming the part that is malformed.
Result<JwtParts> DecodeJwtUnverified(std::string_view token);

// Checks alg=ES256, the signature with `public_key`, exp/nbf/iat against `now` with leeway,
// and aud/iss when asked. UNAUTHENTICATED naming the failed check.
Result<JwtParts> VerifyJwtEs256(std::string_view token, EVP_PKEY* public_key, Clock::WallTime now,
                                const JwtVerifyOptions& options = {});

}  // namespace edge::identity
