#include "common/random.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace edge {
namespace {

TEST(Uuid, IsVersion4Rfc4122AndUnique) {
  std::regex re("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto u = NewUuidV4();
    ASSERT_TRUE(std::regex_match(u, re)) << u;
    seen.insert(u);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(SecureRandomBytes, ReturnsRequestedLengthAndVaries) {
  EXPECT_EQ(SecureRandomBytes(32).size(), 32u);
  EXPECT_NE(SecureRandomBytes(32), SecureRandomBytes(32));
  EXPECT_TRUE(SecureRandomBytes(0).empty());
}

}  // namespace
}  // namespace edge
