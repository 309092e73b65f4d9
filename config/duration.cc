#include "config/duration.h"

#include <cctype>
#include <charconv>

namespace edge::config {

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text == "0") return std::chrono::milliseconds(0);
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
      ++i;
    if (i == start) return std::nullopt;
    int64_t n = 0;
    auto [p, ec] = std::from_chars(text.data() + start, text.data() + i, n);
    if (ec != std::errc() || p != text.data() + i) return std::nullopt;
    size_t ustart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])))
      ++i;
    std::string_view unit = text.substr(ustart, i - ustart);
    int64_t mult;
    if (unit == "ms") {
      mult = 1;
    } else if (unit == "s") {
      mult = 1000;
    } else if (unit == "m") {
      mult = 60'000;
    } else if (unit == "h") {
      mult = 3'600'000;
    } else {
      return std::nullopt;
    }
    if (n > (INT64_MAX / 4) / mult) return std::nullopt;
    total += n * mult;
    if (total > INT64_MAX / 4) return std::nullopt;
  }
  return std::chrono::milliseconds(total);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms % 1000 != 0 && ms < 1000) return out + std::to_string(ms) + "ms";
  int64_t h = ms / 3'600'000, m = (ms / 60'000) % 60, s = (ms / 1000) % 60, rest = ms % 1000;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  if (rest) out += std::to_string(rest) + "ms";
  return out;
}

std::optional<uint64_t> ParseSize(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
    ++i;
  if (i == 0) return std::nullopt;
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + i, n);
  if (ec != std::errc() || p != text.data() + i) return std::nullopt;
  std::string_view unit = text.substr(i);
  uint64_t mult;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "KiB") {
    mult = 1ull << 10;
  } else if (unit == "MiB") {
    mult = 1ull << 20;
  } else if (unit == "GiB") {
    mult = 1ull << 30;
  } else if (unit == "TiB") {
    mult = 1ull << 40;
  } else {
    return std::nullopt;
  }
  if (n > UINT64_MAX / mult) return std::nullopt;
  return n * mult;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr std::pair<uint64_t, const char*> kUnits[] = {
      {1ull << 40, "TiB"}, {1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
  for (auto [mult, name] : kUnits) {
    if (bytes >= mult && bytes % mult == 0) return std::to_string(bytes / mult) + name;
  }
  return std::to_string(bytes);
}

}  // namespace edge::config
