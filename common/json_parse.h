// Bounded JSON parsing for text from the wire, the admin socket or the command line, and the
// fast way back to text.
// nlohmann::json's dumping, copying, comparing and destroying of a document recurse once per
// nesting level: 100 000 levels of `[` overflow the stack. ParseJsonBounded refuses a document
// nested deeper than its limit as it reads it, so no recursive code ever sees one.
// Its reader is our own (strict RFC 8259, the values nlohmann::json::parse would build): it
// walks long strings sixteen bytes at a time, where nlohmann's lexer takes a virtual call and two
// appends per byte — a 350 MB base64 file body took seconds (issue 14, target 5).
// Stateless functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// Parses `text` (RFC 8259; a leading UTF-8 byte order mark is skipped, as nlohmann does) into
// the value nlohmann::json::parse would return: integers without a fraction or exponent are
// number_unsigned when >= 0 and number_integer when < 0, number_float when they do not fit in
// 64 bits; for a repeated object key the last value wins. Strings must be valid UTF-8 with
// every control character escaped; escaped surrogates (backslash-u) must come in pairs.
// One deliberate difference: nlohmann stops reading at a NUL byte after the value and ignores
// what follows; here anything after the value but white space is refused, a NUL included.
// Refused with INVALID_ARGUMENT: nesting deeper than `max_depth` anywhere in the text, also
// after a syntax error (the message CheckJsonDepth gives), and any other error as "<what> is
// not valid JSON: at byte N: <reason>", N counting from 1 the byte where the text went wrong.
// Never throws.
Result<nlohmann::json> ParseJsonBounded(std::string_view text, std::string_view what,
                                        size_t max_depth = kDefaultJsonMaxDepth);

// The least size of a string ParseJsonBoundedInPlace takes instead of copying.
inline constexpr size_t kJsonInPlaceStringMinBytes = size_t{8} << 20;

// The same answer, errors included, for a text the caller gives up: the first string of at
// least `take_min_bytes` without escapes that is an object member's value (file_write's
// `content`, hundreds of MB of base64) becomes that value in `text`'s own buffer, its bytes
// moved to the front of memory already touched, rather than a copy in fresh memory. On
// success `text` is unspecified (emptied when taken); on a refusal it is unchanged.
Result<nlohmann::json> ParseJsonBoundedInPlace(std::string& text, std::string_view what,
                                               size_t max_depth = kDefaultJsonMaxDepth,
                                               size_t take_min_bytes = kJsonInPlaceStringMinBytes);

// What j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) returns, byte for
// byte, without nlohmann's per-byte UTF-8 state machine on strings: valid UTF-8 strings go
// through AppendJsonString (sixteen bytes at a time), anything else through nlohmann. For
// responses that carry megabytes of text.
std::string DumpJson(const nlohmann::json& j);

// DumpJson's text as pieces that concatenate to it byte for byte, for a value the caller gives
// up: each string value (not a key) of at least `take_min_bytes` that is written as it is —
// valid UTF-8 without a quote, a backslash or a control character, such as a file's base64 —
// is moved out of `j` into a piece of its own, its quotes in the pieces beside it, rather than
// copied into the text (file_read's answer of hundreds of MB). Those strings are left empty
// in `j`. The first piece is never a taken string; no piece is taken from a shorter string.
std::vector<std::string> DumpJsonPieces(nlohmann::json&& j,
                                        size_t take_min_bytes = kJsonInPlaceStringMinBytes);

// Appends `s` as a quoted JSON string, escaped byte for byte as nlohmann::json::dump does
// (\" \\ \b \f \n \r \t, other controls as \u00xx, everything else as is), without
// building a json value: the hot path of streamed output. `s` must be valid UTF-8
// (IsValidUtf8); the caller checks. `s` must not point into `out` (`out` may be reallocated
// before `s` is read).
void AppendJsonString(std::string& out, std::string_view s);
// A string measured by JsonStringSize, for AppendJsonString to write without scanning it
// again. It refers to the string, which must outlive it unchanged; only JsonStringSize (and
// AppendJsonString itself) makes one, so the size always belongs to the string.
class JsonSizedString {
 public:
  // The bytes AppendJsonString appends: the string escaped and quoted.
  size_t bytes() const { return bytes_; }

 private:
  JsonSizedString(std::string_view s, size_t bytes) : s_(s), bytes_(bytes) {}
  friend std::optional<JsonSizedString> JsonStringSize(std::string_view s);
  friend void AppendJsonString(std::string& out, const JsonSizedString& s);
  friend void AppendJsonString(std::string& out, std::string_view s);
  std::string_view s_;
  size_t bytes_;
};
// Measures `s` for AppendJsonString, or nullopt when `s` is not valid UTF-8 — checked in the
// same scan, so a caller that has not checked `s` needs no IsValidUtf8 before it.
std::optional<JsonSizedString> JsonStringSize(std::string_view s);
// AppendJsonString(out, s) for a string already measured: one scan fewer, and the caller can
// make room for all it appends at once (bytes()).
void AppendJsonString(std::string& out, const JsonSizedString& s);

}  // namespace edge
