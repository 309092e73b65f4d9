// Base64Encode / Base64Decode (common/base64.h): RFC 4648's vectors and others written out by
// hand (or by Python's base64 module, never by this code), on both the AVX2 path and the
// scalar one, which must agree byte for byte and error for error.
#include "common/base64.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>

namespace edge {
namespace {

using base64_internal::Decode;
using base64_internal::Encode;
using base64_internal::HasVectorPath;

std::string Repeat(std::string_view s, int times) {
  std::string out;
  for (int i = 0; i < times; ++i)
    out.append(s);
  return out;
}

// `plain` encodes to `encoded` and decodes back, on both paths.
void ExpectBoth(const std::string& plain, const std::string& encoded) {
  for (bool vector : {false, true}) {
    EXPECT_EQ(Encode(plain, vector), encoded) << "vector " << vector;
    auto d = Decode(encoded, "x", vector);
    ASSERT_TRUE(d.has_value()) << encoded << " vector " << vector;
    EXPECT_EQ(*d, plain) << "vector " << vector;
  }
  EXPECT_EQ(Base64Encode(plain), encoded);
  auto d = Base64Decode(encoded, "x");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, plain);
}

// RFC 4648 §10 test vectors, and errors that name the field.
TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<const char*, const char*> kVectors[] = {{"", ""},
                                                          {"f", "Zg=="},
                                                          {"fo", "Zm8="},
                                                          {"foo", "Zm9v"},
                                                          {"foob", "Zm9vYg=="},
                                                          {"fooba", "Zm9vYmE="},
                                                          {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : kVectors)
    ExpectBoth(plain, encoded);
  EXPECT_EQ(Base64Encode(std::string("\xff\xfe\x00", 3)), "//4A");
  for (const char* bad : {"Zg=", "Z===", "Zg=a", "Zm9v!A==", "=Zg="}) {
    auto d = Base64Decode(bad, "content");
    ASSERT_FALSE(d.has_value()) << bad;
    EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(d.error().message.find("content"), std::string::npos);
  }
}

// Results of 16 to 29 bytes: a fresh string reallocates to hold them, where libstdc++ 12's
// resize_and_overwrite once made them 30 bytes long (vectors from Python's base64 module).
TEST(Base64Test, ShortVectorsAreExact) {
  const std::pair<std::string, std::string> kVectors[] = {
      {"0123456789", "MDEyMzQ1Njc4OQ=="},
      {"hello, world!!", "aGVsbG8sIHdvcmxkISE="},
      {"The quick brown fox", "VGhlIHF1aWNrIGJyb3duIGZveA=="},
      {std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
                   "\x11\x12\x13\x14",
                   21),
       "AAECAwQFBgcICQoLDA0ODxAREhMU"},
      {"abcdefghijklmnopqrstuvwx", "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4"}};
  for (const auto& [plain, encoded] : kVectors)
    ExpectBoth(plain, encoded);
}

// Long enough for many vector steps and a scalar tail: every byte value (up and down; Python's
// base64 module), and 24-byte groups, which encode to their own 32 characters one after
// another.
TEST(Base64Test, LongVectorsAreExact) {
  std::string up, down;
  for (int i = 0; i < 256; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(255 - i));
  }
  ExpectBoth(up,
             "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0"
             "+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9"
             "fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8"
             "vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7"
             "/P3+/w==");
  ExpectBoth(down,
             "//79/Pv6+fj39vX08/Lx8O/u7ezr6uno5+bl5OPi4eDf3t3c29rZ2NfW1dTT0tHQz87NzMvKycjHxsXEw8LB"
             "wL++vby7urm4t7a1tLOysbCvrq2sq6qpqKempaSjoqGgn56dnJuamZiXlpWUk5KRkI+OjYyLiomIh4aFhIOC"
             "gYB/fn18e3p5eHd2dXRzcnFwb25tbGtqaWhnZmVkY2JhYF9eXVxbWllYV1ZVVFNSUVBPTk1MS0pJSEdGRURD"
             "QkFAPz49PDs6OTg3NjU0MzIxMC8uLSwrKikoJyYlJCMiISAfHh0cGxoZGBcWFRQTEhEQDw4NDAsKCQgHBgUE"
             "AwIBAA==");
  ExpectBoth(Repeat("abcdefghijklmnopqrstuvwx", 41),
             Repeat("YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4", 41));
  // Three bytes that use all of 62 and 63: 0xFB 0xEF 0xBE is "++++", 0xFF 0xFF 0xFF "////".
  ExpectBoth(Repeat("\xfb\xef\xbe\xff\xff\xff", 40) + "\xff", Repeat("++++////", 40) + "/w==");
}

// Pieces whose lengths are multiples of 3 (the last one need not be) append to the whole's
// text; what `out` held before stays.
TEST(Base64Test, AppendedPiecesMakeTheWholeText) {
  std::string out = "prefix:";
  Base64EncodeAppend("foo", out);
  Base64EncodeAppend("bar", out);
  Base64EncodeAppend("f", out);
  EXPECT_EQ(out, "prefix:Zm9vYmFyZg==");
  std::mt19937 rng(9);
  std::string plain(100000, '\0');
  for (auto& c : plain)
    c = static_cast<char>(rng());
  for (bool vector : {false, true}) {
    std::string joined;
    for (size_t at = 0; at < plain.size(); at += 3 * 1001) {
      base64_internal::EncodeAppend(std::string_view(plain).substr(at, 3 * 1001), joined, vector);
    }
    EXPECT_EQ(joined, Encode(plain, false)) << "vector " << vector;
  }
}

// Every length up to 300 (the vector steps start at 28 bytes and 48 characters): 4 characters
// per started group of 3, the two paths the same, and back unchanged.
TEST(Base64Test, EveryLengthRoundTripsOnBothPaths) {
  std::mt19937 rng(7);
  for (size_t n = 0; n <= 300; ++n) {
    std::string plain(n, '\0');
    for (auto& c : plain)
      c = static_cast<char>(rng());
    const std::string encoded = Encode(plain, false);
    ASSERT_EQ(encoded.size(), Base64EncodedSize(n)) << n;
    ASSERT_EQ(Encode(plain, true), encoded) << n;
    for (bool vector : {false, true}) {
      auto d = Decode(encoded, "x", vector);
      ASSERT_TRUE(d.has_value()) << n;
      ASSERT_EQ(*d, plain) << n;
    }
  }
}

// A megabyte of random bytes, both paths, both directions.
TEST(Base64Test, PathsAgreeOnAMegabyte) {
  if (!HasVectorPath()) GTEST_SKIP() << "this CPU (or build) has no AVX2 path";
  std::mt19937_64 rng(11);
  std::string plain((1 << 20) + 7, '\0');
  for (auto& c : plain)
    c = static_cast<char>(rng());
  const std::string encoded = Encode(plain, true);
  EXPECT_EQ(encoded, Encode(plain, false));
  auto v = Decode(encoded, "x", true);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, plain);
}

// Every byte outside the alphabet, at every offset of a text long enough for vector steps:
// INVALID_ARGUMENT naming that exact offset, the same on both paths. '=' counts as outside
// except in the last one or two places.
TEST(Base64Test, EveryBadByteAtEveryOffsetIsNamed) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string good;
  for (int i = 0; i < 160; ++i)
    good.push_back(alphabet[(i * 7) % 64]);  // 160 characters, no padding
  int checked = 0;
  for (int byte = 0; byte < 256; ++byte) {
    if (alphabet.find(static_cast<char>(byte)) != std::string::npos) continue;
    for (size_t at = 0; at < good.size(); ++at) {
      std::string text = good;
      text[at] = static_cast<char>(byte);
      // "=" in the last place, or in both of the last two, is padding, not an error.
      if (byte == '=' && at == good.size() - 1) continue;
      const std::string want = "content: invalid base64 character at offset " + std::to_string(at);
      for (bool vector : {false, true}) {
        auto d = Decode(text, "content", vector);
        ASSERT_FALSE(d.has_value()) << byte << " at " << at;
        ASSERT_EQ(d.error().code, ErrorCode::kInvalidArgument);
        ASSERT_EQ(d.error().message, want) << "vector " << vector;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 192 * 160 - 1);  // 256 - 64 byte values (with '='), less "…=" itself
}

// A length that is not a multiple of 4 is refused before anything is decoded, by its length.
TEST(Base64Test, LengthNotAMultipleOfFour) {
  auto d = Base64Decode(std::string(4 * 20 + 3, 'A'), "params.content");
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(d.error().message, "params.content: base64 length 83 is not a multiple of 4");
}

// Base64Validate answers exactly what Base64Decode would: the decoded size, or the same error
// at the same offset, also past its first 64 KiB slice.
TEST(Base64Test, ValidateAgreesWithDecode) {
  std::mt19937 rng(3);
  std::string plain(200000, '\0');
  for (auto& c : plain)
    c = static_cast<char>(rng());
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{47}, size_t{49151},
                   size_t{49152}, size_t{49153}, plain.size()}) {
    const std::string text = Base64Encode(std::string_view(plain).substr(0, n));
    for (bool vector : {false, true}) {
      auto size = base64_internal::Validate(text, "x", vector);
      ASSERT_TRUE(size.has_value()) << n;
      EXPECT_EQ(*size, n);
    }
  }
  std::string text = Base64Encode(plain);
  for (size_t at : {size_t{0}, size_t{65535}, size_t{65536}, size_t{131075}, text.size() - 3}) {
    std::string bad = text;
    bad[at] = '*';
    auto v = Base64Validate(bad, "params.content");
    ASSERT_FALSE(v.has_value()) << at;
    EXPECT_EQ(v.error().message,
              "params.content: invalid base64 character at offset " + std::to_string(at));
    EXPECT_EQ(v.error().message, Base64Decode(bad, "params.content").error().message);
  }
  auto odd = Base64Validate("Zm9vY", "c");
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.error().message, "c: base64 length 5 is not a multiple of 4");
}

// Base64PieceDecoder gives the bytes in pieces of at most the size asked for (whole groups of
// 3), the last one without its padding, and then only empty pieces.
TEST(Base64Test, PieceDecoderGivesTheBytesInPieces) {
  std::mt19937 rng(5);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{299}, size_t{300},
                   size_t{301}, size_t{100000}}) {
    std::string plain(n, '\0');
    for (auto& c : plain)
      c = static_cast<char>(rng());
    const std::string text = Base64Encode(plain);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
      Base64PieceDecoder decoder(text, piece);
      std::string joined;
      size_t pieces = 0;
      for (std::string_view p = decoder.Next(); !p.empty(); p = decoder.Next()) {
        ASSERT_LE(p.size(), std::max<size_t>(piece / 3, 1) * 3) << n << " " << piece;
        joined.append(p);
        ++pieces;
      }
      EXPECT_EQ(joined, plain) << n << " " << piece;
      const size_t per = std::max<size_t>(piece / 3, 1) * 3;
      EXPECT_EQ(pieces, (n + per - 1) / per) << n << " " << piece;
      EXPECT_TRUE(decoder.Next().empty());
    }
  }
  // A text Base64Validate refuses: bytes unspecified, but nothing read past its end (ASan
  // builds check), and a last group cut short is dropped.
  for (std::string_view refused : {"Zm9vY", "Zm9vYm", "*m9vYmFy", "Zm9v====", "="}) {
    Base64PieceDecoder decoder(refused, 3);
    size_t total = 0;
    for (std::string_view p = decoder.Next(); !p.empty(); p = decoder.Next())
      total += p.size();
    EXPECT_LE(total, refused.size() / 4 * 3) << refused;
  }
  // By hand: "foobar" + "f" in pieces of 3 bytes.
  Base64PieceDecoder decoder("Zm9vYmFyZg==", 3);
  EXPECT_EQ(decoder.Next(), "foo");
  EXPECT_EQ(decoder.Next(), "bar");
  EXPECT_EQ(decoder.Next(), "f");
  EXPECT_EQ(decoder.Next(), "");
}

}  // namespace
}  // namespace edge
