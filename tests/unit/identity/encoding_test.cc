#include "agent/identity/encoding.h"

#include <gtest/gtest.h>

namespace edge::identity {
namespace {

// RFC 4648 §10 test vectors.
TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> v[] = {{"", ""},
                                                   {"f", "Zg=="},
                                                   {"fo", "Zm8="},
                                                   {"foo", "Zm9v"},
                                                   {"foob", "Zm9vYg=="},
                                                   {"fooba", "Zm9vYmE="},
                                                   {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : v) {
    EXPECT_EQ(Base64Encode(plain), enc);
    EXPECT_EQ(Base64Decode(enc), std::string(plain));
  }
}

TEST(Base64, RejectsMalformed) {
  for (const char* bad : {"Zg", "Zg=", "Z===", "Zm9v!", "Zm 9v", "Zh=="}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
}

TEST(Base64Url, NoPaddingAndUrlAlphabet) {
  EXPECT_EQ(Base64UrlEncode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(Base64UrlEncode(std::string("\xfb\xff", 2)), "-_8");
  EXPECT_EQ(Base64UrlDecode("-_8"), std::string("\xfb\xff", 2));
  EXPECT_FALSE(Base64UrlDecode("Zm8=").has_value());
  EXPECT_FALSE(Base64UrlDecode("+/8").has_value());
  EXPECT_FALSE(Base64UrlDecode("Z").has_value());
}

TEST(Hex, RoundTripAndRejects) {
  EXPECT_EQ(HexEncode(std::string("\x00\xab\xff", 3)), "00abff");
  EXPECT_EQ(HexDecode("00ABff"), std::string("\x00\xab\xff", 3));
  EXPECT_FALSE(HexDecode("abc").has_value());
  EXPECT_FALSE(HexDecode("zz").has_value());
}

// FIPS 180-2 "abc" vector.
TEST(Sha256, KnownVector) {
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// FIPS 180-2 "abc", fed in parts (an empty one among them), and the empty message.
TEST(Sha256, ConcatHashesThePartsAsOneMessage) {
  EXPECT_EQ(HexEncode(Sha256Concat({"a", "", "bc"})),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexEncode(Sha256Concat({})),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// RFC 4231 test cases 1 and 2.
TEST(HmacSha256, Rfc4231Vectors) {
  EXPECT_EQ(HexEncode(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

}  // namespace
}  // namespace edge::identity
