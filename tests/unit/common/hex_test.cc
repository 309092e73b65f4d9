#include "common/hex.h"

#include <gtest/gtest.h>

namespace edge {
namespace {

TEST(HexTest, EncodesLowercaseAndRoundTripsEveryByte) {
  EXPECT_EQ(HexEncode(""), "");
  EXPECT_EQ(HexEncode(std::string("\x00\x0f\xa0\xff", 4)), "000fa0ff");
  std::string all;
  for (int i = 0; i < 256; ++i)
    all.push_back(static_cast<char>(i));
  auto back = HexDecode(HexEncode(all));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, all);
}

TEST(HexTest, DecodesEitherCaseAndRefusesAnythingElse) {
  EXPECT_EQ(HexDecode("").value(), "");
  EXPECT_EQ(HexDecode("ABcd").value(), "\xab\xcd");
  EXPECT_FALSE(HexDecode("abc")) << "odd length";
  EXPECT_FALSE(HexDecode("zz")) << "not a hex digit";
  EXPECT_FALSE(HexDecode("0x12"));
}

}  // namespace
}  // namespace edge
