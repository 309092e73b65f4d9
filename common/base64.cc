#include "common/base64.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>

#include "common/huge_pages.h"
#include "common/string_fill.h"

#if defined(__x86_64__) && !defined(EDGE_SCALAR_SCAN)
#define EDGE_BASE64_AVX2 1
#include <immintrin.h>
#endif

namespace edge {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's value in the alphabet, 0xFF for a byte outside it.
constexpr std::array<uint8_t, 256> kValues = [] {
  std::array<uint8_t, 256> t{};
  t.fill(0xFF);
  for (uint8_t i = 0; i < 64; ++i)
    t[static_cast<unsigned char>(kAlphabet[i])] = i;
  return t;
}();

#ifdef EDGE_BASE64_AVX2

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// Encodes whole steps of 24 bytes into 32 characters while 28 bytes can be read (each step
// loads 16 bytes at +0 and at +12). Returns the bytes consumed, a multiple of 24; `out` gets
// 4/3 of that.
__attribute__((target("avx2"))) size_t EncodeAvx2(const unsigned char* in, size_t n, char* out) {
  // Per 32-bit lane, bytes (1, 0, 2, 1) of its group of 3: the four 6-bit indices then sit in
  // two 16-bit halves that one multiply each moves into place.
  const __m256i shuffle = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10, 1, 0,
                                           2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
  // The offset from an index to its character, chosen by the index's range (see below).
  const __m256i offsets =
      _mm256_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                       '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0,
                       'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                       '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
  size_t i = 0;
  for (; n - i >= 28; i += 24, out += 32) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 12));
    __m256i v = _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), shuffle);
    // Low half aaaaaabb bbbbcccc, high half bbbbcccc ccdddddd: a and c by a high multiply, b
    // and d by a low one, each into its own byte.
    const __m256i ac = _mm256_mulhi_epu16(_mm256_and_si256(v, _mm256_set1_epi32(0x0fc0fc00)),
                                          _mm256_set1_epi32(0x04000040));
    const __m256i bd = _mm256_mullo_epi16(_mm256_and_si256(v, _mm256_set1_epi32(0x003f03f0)),
                                          _mm256_set1_epi32(0x01000010));
    const __m256i index = _mm256_or_si256(ac, bd);
    // 0..25 → offset 13 ('A'), 26..51 → 0 ('a' - 26), 52..61 → 1..10 ('0' - 52), 62 → 11,
    // 63 → 12.
    __m256i range = _mm256_subs_epu8(index, _mm256_set1_epi8(51));
    const __m256i upper = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), index);
    range = _mm256_or_si256(range, _mm256_and_si256(upper, _mm256_set1_epi8(13)));
    v = _mm256_add_epi8(_mm256_shuffle_epi8(offsets, range), index);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
  }
  return i;
}

// Decodes whole steps of 32 characters into 24 bytes while 48 characters remain (the last
// group, which may hold '=', is always left to the scalar loop, and each step stores 32
// bytes). Stops before the first step holding a character outside the alphabet, which the
// scalar loop then names. Returns the characters consumed, a multiple of 32; `out` gets 3/4
// of that.
__attribute__((target("avx2"))) size_t DecodeAvx2(const unsigned char* in, size_t n, char* out) {
  // A character is valid when the bit masks chosen by its low and its high nibble share no
  // bit; the nibbles then also choose the offset that takes it to its 6-bit value.
  const __m256i lut_lo =
      _mm256_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B,
                       0x1B, 0x1B, 0x1A, 0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
                       0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
  const __m256i lut_hi =
      _mm256_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10,
                       0x10, 0x10, 0x10, 0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10,
                       0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
  const __m256i lut_roll =
      _mm256_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 19, 4, -65,
                       -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i mask_2f = _mm256_set1_epi8(0x2F);
  size_t i = 0;
  for (; n - i >= 48; i += 32, out += 24) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m256i hi_nibbles = _mm256_and_si256(_mm256_srli_epi32(v, 4), mask_2f);
    const __m256i lo_nibbles = _mm256_and_si256(v, mask_2f);
    const __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_nibbles);
    const __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_nibbles);
    if (!_mm256_testz_si256(lo, hi)) break;
    const __m256i eq_2f = _mm256_cmpeq_epi8(v, mask_2f);  // '/' shares '+'s nibble row
    v = _mm256_add_epi8(v, _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(eq_2f, hi_nibbles)));
    // Four 6-bit values per 32-bit lane into 24 bits, then 12 bytes per 128-bit half, then
    // the two halves' 12 bytes side by side.
    const __m256i pairs = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140));
    __m256i packed = _mm256_madd_epi16(pairs, _mm256_set1_epi32(0x00011000));
    packed = _mm256_shuffle_epi8(
        packed, _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1, 2, 1, 0, 6,
                                 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1));
    packed = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, -1, -1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
  }
  return i;
}

#endif  // EDGE_BASE64_AVX2

size_t EncodeVector(const unsigned char* in, size_t n, char* out, bool vector) {
#ifdef EDGE_BASE64_AVX2
  if (vector && CpuHasAvx2()) return EncodeAvx2(in, n, out);
#else
  (void)in, (void)n, (void)out, (void)vector;
#endif
  return 0;
}

size_t DecodeVector(const unsigned char* in, size_t n, char* out, bool vector) {
#ifdef EDGE_BASE64_AVX2
  if (vector && CpuHasAvx2()) return DecodeAvx2(in, n, out);
#else
  (void)in, (void)n, (void)out, (void)vector;
#endif
  return 0;
}

}  // namespace

namespace base64_internal {

bool HasVectorPath() {
#ifdef EDGE_BASE64_AVX2
  return CpuHasAvx2();
#else
  return false;
#endif
}

// Both directions write into a string sized once (no zero fill; the callback returns the size
// computed here, see common/string_fill.h).
namespace {

// Writes the Base64EncodedSize(n) characters of in[0, n) to `o`.
void EncodeTo(const unsigned char* in, size_t n, char* o, bool vector) {
  size_t i = EncodeVector(in, n, o, vector);
  o += i / 3 * 4;
  for (; i + 3 <= n; i += 3, o += 4) {
    const uint32_t v = uint32_t{in[i]} << 16 | uint32_t{in[i + 1]} << 8 | in[i + 2];
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = kAlphabet[(v >> 6) & 63];
    o[3] = kAlphabet[v & 63];
  }
  if (i < n) {
    const uint32_t v = uint32_t{in[i]} << 16 | (i + 1 < n ? uint32_t{in[i + 1]} << 8 : 0);
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    o[3] = '=';
  }
}

}  // namespace

std::string Encode(std::string_view bytes, bool vector) {
  std::string out;
  EncodeAppend(bytes, out, vector);
  return out;
}

void EncodeAppend(std::string_view bytes, std::string& out, bool vector) {
  const size_t before = out.size(), size = before + Base64EncodedSize(bytes.size());
  ResizeAndOverwrite(out, size, [&](char* o) {
    EncodeTo(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), o + before,
             vector);
    return size;
  });
}

namespace {

// Decodes in[0, n) (n a multiple of 4, the last group ending in `pad` '='s) into `o`, which
// has room for n / 4 * 3 - pad bytes. Returns the offset of the first character outside the
// alphabet (nothing after it is written), or n.
size_t DecodeTo(const unsigned char* in, size_t n, size_t pad, char* o, bool vector) {
  size_t i = DecodeVector(in, n, o, vector);
  o += i / 4 * 3;
  for (; i < n; i += 4) {
    const bool last = i + 4 == n;
    const uint8_t a = kValues[in[i]], b = kValues[in[i + 1]];
    const uint8_t c = last && pad == 2 ? 0 : kValues[in[i + 2]];
    const uint8_t d = last && pad >= 1 ? 0 : kValues[in[i + 3]];
    if ((a | b | c | d) & 0x80) {
      for (size_t k = i; k < i + 4; ++k) {
        if (kValues[in[k]] == 0xFF && !(last && k >= n - pad)) return k;
      }
    }
    const uint32_t v = uint32_t{a} << 18 | uint32_t{b} << 12 | uint32_t{c} << 6 | d;
    *o++ = static_cast<char>(v >> 16);
    if (last && pad == 2) break;
    *o++ = static_cast<char>((v >> 8) & 0xff);
    if (last && pad == 1) break;
    *o++ = static_cast<char>(v & 0xff);
  }
  return n;
}

// The '='s that end `text` (one or two, in the last group's last places; 0 for none).
size_t PaddingOf(std::string_view text) {
  const size_t n = text.size();
  return n == 0 ? 0 : text[n - 1] != '=' ? 0 : text[n - 2] != '=' ? 1 : 2;
}

std::unexpected<Error> BadLength(std::string_view field, size_t n) {
  return MakeError(ErrorCode::kInvalidArgument, std::string(field) + ": base64 length " +
                                                    std::to_string(n) + " is not a multiple of 4");
}

std::unexpected<Error> BadCharacter(std::string_view field, size_t offset) {
  return MakeError(
      ErrorCode::kInvalidArgument,
      std::string(field) + ": invalid base64 character at offset " + std::to_string(offset));
}

}  // namespace

Result<std::string> Decode(std::string_view text, std::string_view field, bool vector) {
  const size_t n = text.size();
  if (n % 4 != 0) return BadLength(field, n);
  const size_t pad = PaddingOf(text);
  const size_t size = n / 4 * 3 - pad;
  size_t bad = n;
  std::string out;
  ResizeAndOverwrite(out, size, [&](char* o) {
    bad = DecodeTo(reinterpret_cast<const unsigned char*>(text.data()), n, pad, o, vector);
    return bad == n ? size : size_t{0};
  });
  if (bad != n) return BadCharacter(field, bad);
  return out;
}

Result<size_t> Validate(std::string_view text, std::string_view field, bool vector) {
  const size_t n = text.size();
  if (n % 4 != 0) return BadLength(field, n);
  const size_t pad = PaddingOf(text);
  // Decoded a slice at a time into a scratch buffer, so the answer (errors included) is
  // exactly Decode's.
  constexpr size_t kSliceChars = 64 << 10;
  const auto scratch = std::make_unique_for_overwrite<char[]>(kSliceChars / 4 * 3);
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t off = 0; off < n; off += kSliceChars) {
    const size_t len = std::min(kSliceChars, n - off);
    const size_t bad = DecodeTo(in + off, len, off + len == n ? pad : 0, scratch.get(), vector);
    if (bad != len) return BadCharacter(field, off + bad);
  }
  return n / 4 * 3 - pad;
}

}  // namespace base64_internal

std::string Base64Encode(std::string_view bytes) {
  return base64_internal::Encode(bytes, /*vector=*/true);
}

void Base64EncodeAppend(std::string_view bytes, std::string& out) {
  base64_internal::EncodeAppend(bytes, out, /*vector=*/true);
}

Result<std::string> Base64Decode(std::string_view text, std::string_view field) {
  return base64_internal::Decode(text, field, /*vector=*/true);
}

Result<size_t> Base64Validate(std::string_view text, std::string_view field) {
  return base64_internal::Validate(text, field, /*vector=*/true);
}

Base64PieceDecoder::Base64PieceDecoder(std::string_view valid_text, size_t piece_bytes)
    : text_(valid_text.substr(0, valid_text.size() / 4 * 4)),  // whole groups only
      pad_(base64_internal::PaddingOf(text_)),
      piece_chars_(std::max<size_t>(piece_bytes / 3, 1) * 4) {}

std::string_view Base64PieceDecoder::Next() {
  const size_t n = text_.size();
  if (pos_ >= n) return {};
  if (!buffer_) {
    const size_t room = std::min(piece_chars_, n) / 4 * 3;
    buffer_ = std::make_unique_for_overwrite<char[]>(room);
    AdviseHugePages(buffer_.get(), room);
  }
  const size_t len = std::min(piece_chars_, n - pos_);
  const size_t pad = pos_ + len == n ? pad_ : 0;
  base64_internal::DecodeTo(reinterpret_cast<const unsigned char*>(text_.data()) + pos_, len, pad,
                            buffer_.get(), /*vector=*/true);
  pos_ += len;
  return {buffer_.get(), len / 4 * 3 - pad};
}

}  // namespace edge
