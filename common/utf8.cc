#include "common/utf8.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include "common/byte_scan.h"

namespace edge {
namespace {

// Length of the well-formed sequence starting at s[i] (1..4), or 0 when none starts there.
// For an ill-formed start, `bad` receives the length of the maximal subpart to replace.
size_t SequenceAt(std::string_view s, size_t i, size_t& bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  bad = 1;
  if (c < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    need = 2;
  } else if (c == 0xED) {
    need = 2, hi = 0x9F;  // no UTF-16 surrogates
  } else if (c == 0xF0) {
    need = 3, lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    need = 3;
  } else if (c == 0xF4) {
    need = 3, hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;  // 0x80-0xC1 (continuation or overlong lead), 0xF5-0xFF
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      bad = k;
      return 0;
    }
    const unsigned char n = b(i + k);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (n < l || n > h) {
      bad = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  return ValidUtf8Prefix(s) == s.size();
}

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  size_t bad = 0;
  return SequenceAt(s, i, bad);
}

size_t ValidUtf8Prefix(std::string_view s) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    // ASCII sixteen bytes at a time, on to the first byte that is not; then eight at a time
    // near the end.
    if (i + kScanBlock <= s.size()) {
      const uint32_t high = HighBitMask16(s.data() + i);
      if (high == 0) {
        i += kScanBlock;
        continue;
      }
      i += static_cast<size_t>(std::countr_zero(high));
    } else if (i + 8 <= s.size()) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const size_t n = SequenceAt(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return i;
}

std::string ToValidUtf8(std::string_view s) {
  size_t valid = ValidUtf8Prefix(s);
  if (valid == s.size()) return std::string(s);
  std::string out(s.substr(0, valid));
  out.reserve(s.size() + 8);
  size_t i = valid, bad = 0;
  while (i < s.size()) {
    const size_t n = SequenceAt(s, i, bad);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

size_t Utf8TailStart(std::string_view s, size_t limit) {
  size_t start = s.size() > limit ? s.size() - limit : 0;
  for (int k = 0;
       k < 3 && start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80; ++k)
    ++start;
  return start;
}

size_t Utf8CutPoint(std::string_view s, size_t limit) {
  if (limit >= s.size()) return s.size();
  size_t n = limit;
  // Step back over at most 3 continuation bytes to the start of the character at `limit`.
  for (int k = 0; k < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++k)
    --n;
  return n;
}

size_t Utf8IncompleteTail(std::string_view s) {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[s.size() - k]);
    if (c < 0x80) return 0;
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    if (c < 0xC2 || c > 0xF4) return 0;
    const size_t announced = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return announced > k ? k : 0;
  }
  return 0;
}

}  // namespace edge
