// Go-style durations ("250ms", "30s", "5m", "1h30m") and binary sizes ("512KiB", "64MiB",
// "1GiB", or a bare byte count), as the config and the worker contract write them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace edge::config {

// nullopt when `text` is not a duration (units ns? no: ms, s, m, h; one or more parts).
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);
// The shortest Go-style spelling: 90000 ms -> "1m30s", 250 ms -> "250ms", 0 -> "0s".
std::string FormatDuration(std::chrono::milliseconds d);

std::optional<uint64_t> ParseSize(std::string_view text);
// "64MiB" when exact, else a byte count.
std::string FormatSize(uint64_t bytes);

}  // namespace edge::config
