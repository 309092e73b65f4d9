// Signed worker tokens for the integration tests, made with the openssl command line (the
// reference HMAC-SHA256 of wire.md §4.1), never with the code under test.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace edge::testing {

// base64url without padding, written here from RFC 4648 §5.
std::string B64Url(std::string_view in);
// "stacyvm-worker-v1.<b64url(claims)>.<b64url(openssl dgst -sha256 -hmac key)>".
std::string OpensslWorkerToken(const nlohmann::json& claims, const std::string& key);
// Unix seconds now.
int64_t NowSecs();
// {worker_id, jti (unique), aud, iat: now, exp: now + 300}.
nlohmann::json WorkerClaims(const std::string& worker, const std::string& aud);

}  // namespace edge::testing
