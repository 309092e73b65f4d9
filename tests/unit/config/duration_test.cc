#include "config/duration.h"

#include <gtest/gtest.h>

namespace edge::config {
namespace {

using std::chrono::milliseconds;

TEST(Duration, ParsesGoStyle) {
  EXPECT_EQ(ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(ParseDuration("30s"), milliseconds(30'000));
  EXPECT_EQ(ParseDuration("5m"), milliseconds(300'000));
  EXPECT_EQ(ParseDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(ParseDuration("1m30s500ms"), milliseconds(90'500));
  EXPECT_EQ(ParseDuration("0"), milliseconds(0));
}

TEST(Duration, RejectsEverythingElse) {
  for (const char* bad :
       {"", "30", "s", "1d", "1.5s", "-1s", "1h 30m", "30S", "99999999999999999h"}) {
    EXPECT_FALSE(ParseDuration(bad).has_value()) << bad;
  }
}

TEST(Duration, FormatsShortestSpelling) {
  EXPECT_EQ(FormatDuration(milliseconds(90'000)), "1m30s");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(3'600'000)), "1h");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
}

TEST(Size, ParsesBinaryUnitsAndBytes) {
  EXPECT_EQ(ParseSize("512KiB"), 512u << 10);
  EXPECT_EQ(ParseSize("64MiB"), 64u << 20);
  EXPECT_EQ(ParseSize("1GiB"), 1ull << 30);
  EXPECT_EQ(ParseSize("1234"), 1234u);
  for (const char* bad : {"", "MiB", "1MB", "1.5GiB", "-1", "1 KiB", "99999999999TiB"}) {
    EXPECT_FALSE(ParseSize(bad).has_value()) << bad;
  }
  EXPECT_EQ(FormatSize(64ull << 20), "64MiB");
  EXPECT_EQ(FormatSize(1000), "1000");
}

}  // namespace
}  // namespace edge::config
