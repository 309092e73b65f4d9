// RFC 3339 times as every wire and CLI of the project writes and reads them (UTC, "Z").
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"

namespace edge {

// RFC 3339 ("2026-05-09T10:31:00Z", fractions and ±hh:mm offsets accepted); INVALID_ARGUMENT
// quoting the text otherwise.
Result<Clock::WallTime> ParseRfc3339(std::string_view text);
// UTC, seconds precision unless the time has a fraction ("…T10:31:00.123Z").
std::string FormatRfc3339(Clock::WallTime t);

}  // namespace edge
