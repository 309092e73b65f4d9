// Logging: one spdlog logger per module ("config", "enroll", "edge", ...) sharing one sink
// that writes text or JSON lines and scrubs every registered secret before a line leaves
// the process. Code must never log a secret; the scrubber is the second line of defence.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "common/error.h"

namespace edge::log {

enum class Format { kText, kJson };

struct Options {
  spdlog::level::level_enum level = spdlog::level::info;
  Format format = Format::kText;
  // Where lines go; defaults to stderr. Tests install a capture here.
  std::function<void(std::string_view line)> writer;
};

// Parses "trace|debug|info|warn|error|critical|off" and "text|json".
Result<spdlog::level::level_enum> ParseLevel(std::string_view s);
Result<Format> ParseFormat(std::string_view s);

// (Re)configures every logger, present and future. Safe to call more than once.
void Init(const Options& options);

// The logger of one module, created on first use.
std::shared_ptr<spdlog::logger> Get(std::string_view module);

// Any later log line containing `secret` shows "[REDACTED]" in its place. Secrets shorter
// than 6 bytes are ignored (they would redact ordinary words).
void RegisterSecret(std::string_view secret);

// Replaces registered secrets in `text` (what the sink applies to every line).
std::string Redact(std::string_view text);

// A peer-supplied string made safe for one log line. Kept as is: printable ASCII and valid
// UTF-8. Escaped: backslash (\\), \n, \r, \t, ESC (\e), other C0 controls and DEL (\xNN),
// each byte of invalid UTF-8 (\xNN), and the valid-UTF-8 characters that move or hide text
// in a terminal — C1 controls U+0080..U+009F, line/paragraph separators U+2028/U+2029 and
// the bidi controls U+200E/F, U+202A..U+202E, U+2066..U+2069 (\u{XXXX}). The escaped text is
// at most `max_len` bytes; when the input does not fit, it is cut at a character boundary
// and "...[N more bytes]" (N = input bytes not shown) is appended.
std::string Escape(std::string_view s, size_t max_len = 256);

}  // namespace edge::log
