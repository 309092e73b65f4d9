// Bounded JSON parsing for text from the wire, the admin socket or the command line.
// nlohmann::json parses iteratively, but dumping, copying, comparing and destroying a document
// recurse once per nesting level: 100 000 levels of `[` overflow the stack. ParseJsonBounded
// measures the nesting with a linear scan BEFORE nlohmann parses the text and refuses what is
// too deep, so no recursive code ever sees such a document.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace edge {

// The default nesting limit: deep enough for any real configuration or tool argument.
inline constexpr size_t kDefaultJsonMaxDepth = 64;

// INVALID_ARGUMENT naming `what`, the depth reached, the byte where it was reached and the
// limit, when `text` nests arrays/objects deeper than `max_depth` (`[` and `{` outside
// strings, escapes inside strings honoured; the text need not be valid JSON). OK otherwise.
Status CheckJsonDepth(std::string_view text, std::string_view what,
                      size_t max_depth = kDefaultJsonMaxDepth);

// CheckJsonDepth, then nlohmann::json::parse. A parse error is INVALID_ARGUMENT naming `what`,
// the byte position and the parser's reason. Never throws.
Result<nlohmann::json> ParseJsonBounded(std::string_view text, std::string_view what,
                                        size_t max_depth = kDefaultJsonMaxDepth);

// Appends `s` as a quoted JSON string, escaped byte for byte as nlohmann::json::dump does
// (\" \\ \b \f \n \r \t, other controls as \u00xx, everything else as is), without
// building a json value: the hot path of streamed output. `s` must be valid UTF-8
// (IsValidUtf8); the caller checks.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace edge
