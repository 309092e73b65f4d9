// Lowercase hex, the one implementation (key fingerprints, token hashes, keys stored as TEXT).
// `edge::identity` re-exports both names for its callers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace edge {

std::string HexEncode(std::string_view bytes);
// Strict: an even number of [0-9a-fA-F]; nullopt on anything else.
std::optional<std::string> HexDecode(std::string_view text);

}  // namespace edge
