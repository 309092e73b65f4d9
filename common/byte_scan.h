// Sixteen-byte scans for the hot loops over text: which bytes of a block a JSON string writer
// or reader must look at one by one, and which are not ASCII.
//
// SSE2 (every x86-64) where the compiler has it, else (or with EDGE_SCALAR_SCAN defined) the
// same answer a byte at a time. The callers (AppendJsonString, the JSON reader's strings,
// ValidUtf8Prefix) skip the blocks whose mask is zero and handle the marked bytes themselves;
// the mask is exact, never a superset.
// Stateless inline functions; `p` must have 16 readable bytes.
#pragma once

#include <cstdint>

#if defined(__SSE2__) && !defined(EDGE_SCALAR_SCAN)
#include <emmintrin.h>
#endif

namespace edge {

inline constexpr unsigned kScanBlock = 16;

// Bit k set when p[k] is a quote, a backslash or a control character (< 0x20), and, when
// `ascii_only`, when p[k] >= 0x80.
inline uint32_t JsonCareMask16(const char* p, bool ascii_only) {
#if defined(__SSE2__) && !defined(EDGE_SCALAR_SCAN)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // v <= 0x1F, unsigned: saturating v - 0x1F is zero exactly there.
  const __m128i control =
      _mm_cmpeq_epi8(_mm_subs_epu8(v, _mm_set1_epi8(0x1F)), _mm_setzero_si128());
  __m128i care = _mm_or_si128(control, _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
  uint32_t mask = static_cast<uint32_t>(_mm_movemask_epi8(care));
  if (ascii_only) mask |= static_cast<uint32_t>(_mm_movemask_epi8(v));
  return mask;
#else
  uint32_t mask = 0;
  for (unsigned k = 0; k < kScanBlock; ++k) {
    const auto c = static_cast<unsigned char>(p[k]);
    if (c < 0x20 || c == '"' || c == '\\' || (ascii_only && c >= 0x80)) mask |= 1u << k;
  }
  return mask;
#endif
}

// Bit k set when p[k] >= 0x80 (not ASCII).
inline uint32_t HighBitMask16(const char* p) {
#if defined(__SSE2__) && !defined(EDGE_SCALAR_SCAN)
  return static_cast<uint32_t>(
      _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  uint32_t mask = 0;
  for (unsigned k = 0; k < kScanBlock; ++k)
    if (static_cast<unsigned char>(p[k]) >= 0x80) mask |= 1u << k;
  return mask;
#endif
}

}  // namespace edge
