// Byte encodings used on the wires: standard base64 (worker contract file content),
// base64url without padding (JWTs, worker tokens), lowercase hex, and SHA-256.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "common/hex.h"

namespace edge::identity {

std::string Base64Encode(std::string_view bytes);
// Strict: padding required, no whitespace; nullopt on anything else.
std::optional<std::string> Base64Decode(std::string_view text);
std::string Base64UrlEncode(std::string_view bytes);
// Strict: no padding, alphabet [A-Za-z0-9-_]; nullopt on anything else.
std::optional<std::string> Base64UrlDecode(std::string_view text);
// Lowercase hex lives in common/hex.h; these names stay for identity's callers.
using edge::HexDecode;
using edge::HexEncode;
// Raw 32-byte digest.
std::string Sha256(std::string_view bytes);
// SHA-256 of the concatenation of `parts`, without building it.
std::string Sha256Concat(std::initializer_list<std::string_view> parts);
// HMAC-SHA256, raw 32 bytes.
std::string HmacSha256(std::string_view key, std::string_view message);

}  // namespace edge::identity
