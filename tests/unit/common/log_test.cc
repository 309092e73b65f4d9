#include "common/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mutex>
#include <vector>

namespace edge::log {
namespace {

class LogCapture {
 public:
  explicit LogCapture(Format format, spdlog::level::level_enum level = spdlog::level::debug) {
    Init({.level = level, .format = format, .writer = [this](std::string_view l) {
            std::lock_guard lock(mu_);
            lines_.emplace_back(l);
          }});
  }
  ~LogCapture() { Init({}); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(Log, TextLineNamesLevelModuleAndMessage) {
  LogCapture cap(Format::kText);
  Get("enroll")->info("enrolled node {}", "edge-01");
  auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("info"), std::string::npos);
  EXPECT_NE(lines[0].find("[enroll] enrolled node edge-01"), std::string::npos);
}

TEST(Log, JsonLineIsOneParsableObject) {
  LogCapture cap(Format::kJson);
  Get("edge")->warn("quote \" and newline \n inside");
  auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  auto j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["module"], "edge");
  EXPECT_EQ(j["msg"], "quote \" and newline \n inside");
}

TEST(Log, LevelFiltersLines) {
  LogCapture cap(Format::kText, spdlog::level::warn);
  Get("x")->info("hidden");
  Get("x")->error("shown");
  auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("shown"), std::string::npos);
}

TEST(Log, RegisteredSecretNeverReachesALine) {
  LogCapture cap(Format::kJson);
  const std::string secret = "eyJhbGciOiJFUzI1NiJ9.c2VjcmV0LXRva2Vu.sig";
  RegisterSecret(secret);
  Get("enroll")->error("redeeming {} failed", secret);
  Get("enroll")->info("prefix{}suffix", secret);
  for (const auto& l : cap.lines()) {
    EXPECT_EQ(l.find(secret), std::string::npos) << l;
    EXPECT_NE(l.find("[REDACTED]"), std::string::npos) << l;
  }
}

TEST(Log, ParseLevelAndFormatRejectUnknownWithTheValue) {
  EXPECT_EQ(*ParseLevel("debug"), spdlog::level::debug);
  auto bad = ParseLevel("loud");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"loud\""), std::string::npos);
  EXPECT_EQ(*ParseFormat("json"), Format::kJson);
  EXPECT_FALSE(ParseFormat("xml"));
}

}  // namespace
}  // namespace edge::log
