// EdgeApiLimits' stored form: the five wire.md §5.2 keys as a JSON object, read back strictly
// (a damaged or partial row reads as "not set", never as half the values).
#include "controller/edge_api_limits.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace edge::controller {
namespace {

TEST(EdgeApiLimitsTest, TheStoredFormHasTheFiveKeysAndReadsBack) {
  EdgeApiLimits l{.rate_limit = 7,
                  .max_frame_size = 2048,
                  .reattach_window = 60,
                  .max_buffer_size = 8192,
                  .buffer_overflow_policy = "disconnect"};
  EXPECT_EQ(nlohmann::json::parse(LimitsToJson(l)),
            nlohmann::json::parse(R"({"rate_limit":7,"max_frame_size":2048,"reattach_window":60,
                                      "max_buffer_size":8192,
                                      "buffer_overflow_policy":"disconnect"})"));
  auto back = LimitsFromJson(R"({"buffer_overflow_policy":"drop_oldest","max_buffer_size":4096,
      "reattach_window":1,"max_frame_size":1024,"rate_limit":1})");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rate_limit, 1);
  EXPECT_EQ(back->max_frame_size, 1024);
  EXPECT_EQ(back->reattach_window, 1);
  EXPECT_EQ(back->max_buffer_size, 4096);
  EXPECT_EQ(back->buffer_overflow_policy, "drop_oldest");
  EXPECT_EQ(LimitsFromJson(LimitsToJson(l)), l);
}

TEST(EdgeApiLimitsTest, DamagedRowsReadAsNotSet) {
  const char* bad[] = {
      "",
      "not json",
      "[]",
      R"({"rate_limit":7})",                          // keys missing
      R"({"rate_limit":"7","max_frame_size":1024,"reattach_window":1,"max_buffer_size":4096,
          "buffer_overflow_policy":"drop_oldest"})",  // a string for a number
      R"({"rate_limit":0,"max_frame_size":1024,"reattach_window":1,"max_buffer_size":4096,
          "buffer_overflow_policy":"drop_oldest"})",  // not positive
      R"({"rate_limit":1.5,"max_frame_size":1024,"reattach_window":1,"max_buffer_size":4096,
          "buffer_overflow_policy":"drop_oldest"})",  // not an integer
      R"({"rate_limit":1,"max_frame_size":1024,"reattach_window":1,"max_buffer_size":4096,
          "buffer_overflow_policy":"keep"})",         // unknown policy
  };
  for (const char* text : bad)
    EXPECT_FALSE(LimitsFromJson(text)) << text;
}

TEST(EdgeApiLimitsTest, TheConfigFormConvertsBothWays) {
  config::ControllerConfig::EdgeApi c;
  c.rate_limit = 3;
  c.max_frame_size = 4096;
  c.reattach_window_secs = 9;
  c.max_buffer_size = 1 << 20;
  c.buffer_overflow_policy = "disconnect";
  EdgeApiLimits l = LimitsFromConfig(c);
  EXPECT_EQ(l.rate_limit, 3);
  EXPECT_EQ(l.max_frame_size, 4096);
  EXPECT_EQ(l.reattach_window, 9);
  EXPECT_EQ(l.max_buffer_size, 1 << 20);
  EXPECT_EQ(l.buffer_overflow_policy, "disconnect");
  EXPECT_EQ(LimitsFromConfig(LimitsToConfig(l)), l);
}

}  // namespace
}  // namespace edge::controller
