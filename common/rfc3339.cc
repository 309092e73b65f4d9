#include "common/rfc3339.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace edge {
namespace {

std::unexpected<Error> Bad(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

int Digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

Result<Clock::WallTime> ParseRfc3339(std::string_view s) {
  auto bad = [&] {
    return Bad("\"" + std::string(s.substr(0, 64)) +
               "\" is not an RFC 3339 time such as 2026-05-09T10:31:00Z");
  };
  // YYYY-MM-DDTHH:MM:SS
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':') {
    return bad();
  }
  int y = Digits(s, 0, 4), mo = Digits(s, 5, 2), d = Digits(s, 8, 2), h = Digits(s, 11, 2),
      mi = Digits(s, 14, 2), se = Digits(s, 17, 2);
  // Years the clock can hold (nanoseconds since 1970 in 64 bits end in 2262).
  if (y < 1970 || y > 2200) {
    return Bad("\"" + std::string(s.substr(0, 64)) + "\": the year must be 1970-2200");
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 ||
      se > 60) {
    return bad();
  }
  size_t pos = 19;
  int64_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t start = pos;
    int64_t scale = 100'000'000;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      nanos += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return bad();
  }
  if (pos >= s.size()) return bad();
  int64_t offset = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    int oh = Digits(s, pos + 1, 2), om = Digits(s, pos + 4, 2);
    if (oh < 0 || om < 0 || pos + 3 >= s.size() || s[pos + 3] != ':' || oh > 23 || om > 59) {
      return bad();
    }
    offset = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != s.size()) return bad();
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  const time_t t = ::timegm(&tm);
  return Clock::WallTime(std::chrono::seconds(t - offset)) +
         std::chrono::duration_cast<Clock::WallTime::duration>(std::chrono::nanoseconds(nanos));
}

std::string FormatRfc3339(Clock::WallTime t) {
  auto secs = std::chrono::floor<std::chrono::seconds>(t);
  auto frac = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();  // 0..999
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf);
  if (frac != 0) {
    char f[8];
    std::snprintf(f, sizeof f, ".%03d", static_cast<int>(frac));
    out += f;
  }
  return out + "Z";
}

}  // namespace edge
