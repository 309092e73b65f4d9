// UTF-8 checks and lossless/lossy conversions for bytes that must travel as text.
//
// Output of processes, file names and file contents are bytes; JSON strings, protobuf
// `string` fields and log lines must be valid UTF-8 (nlohmann::json::dump throws on invalid
// UTF-8, protobuf refuses to parse it). Every place that turns bytes into text goes through
// here, so the rule is one rule: text fields carry valid UTF-8 (invalid sequences replaced by
// U+FFFD), and where the exact bytes matter a `<key>_base64` field carries them
// (sandbox::PutBytes).
// Stateless functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace edge {

// True when `s` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Length of the longest prefix of `s` that is well-formed UTF-8 (where a valid text ends).
// Runs of ASCII are checked sixteen bytes at a time (common/byte_scan.h).
size_t ValidUtf8Prefix(std::string_view s);

// Length (1-4) of the well-formed UTF-8 sequence that starts at s[i], or 0 when none does
// (a stray continuation byte, an overlong form, a surrogate, > U+10FFFF, or cut off by the
// end of `s`). Requires i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

// `s` with each maximal invalid subsequence replaced by U+FFFD (the WHATWG/Unicode
// "substitution of maximal subparts" rule); valid input is returned unchanged.
std::string ToValidUtf8(std::string_view s);

// Where a cut at `limit` bytes does not split a UTF-8 character: the largest n <= limit
// such that s[n] does not continue a multi-byte sequence started before it.
size_t Utf8CutPoint(std::string_view s, size_t limit);

// Where the last `limit` bytes of `s` start (0 when `s` is no longer than `limit`), moved on
// past at most three UTF-8 continuation bytes so the tail starts on a character — at 0 too:
// `s` may itself be cut out of a longer text. s.size() when only continuation bytes are left.
// (Utf8CutPoint's mirror, for tails.)
size_t Utf8TailStart(std::string_view s, size_t limit);

// How many bytes (0-3) at the end of `s` begin a character that the end cuts off: a lead
// byte (0xC2-0xF4) followed by fewer continuation bytes than it announces. 0 when `s` ends
// on a whole character, on ASCII, or on bytes that no continuation could make a character.
// For a stream cut into pieces: held back and put in front of the next piece, the character
// arrives whole.
size_t Utf8IncompleteTail(std::string_view s);

}  // namespace edge
