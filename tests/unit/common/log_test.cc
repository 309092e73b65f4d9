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

TEST(LogEscape, KeepsPrintableAsciiAndValidUtf8) {
  EXPECT_EQ(Escape("edge-01"), "edge-01");
  EXPECT_EQ(Escape("a b ~ {}\"'"), "a b ~ {}\"'");
  EXPECT_EQ(Escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")
      << "é, €, an emoji";
  EXPECT_EQ(Escape(""), "");
}

TEST(LogEscape, EscapesControlCharactersBackslashAndDel) {
  EXPECT_EQ(Escape("a\nb"), "a\\nb");
  EXPECT_EQ(Escape("a\r\tb"), "a\\r\\tb");
  EXPECT_EQ(Escape("\x1b[31mred"), "\\e[31mred");
  EXPECT_EQ(Escape(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Escape("\x07\x7f"), "\\x07\\x7f");
  EXPECT_EQ(Escape("C:\\path"), "C:\\\\path") << "a literal backslash cannot fake an escape";
  EXPECT_EQ(Escape("n1\n2024-01-01T00:00:00Z info  [audit] forged"),
            "n1\\n2024-01-01T00:00:00Z info  [audit] forged");
}

TEST(LogEscape, EscapesInvalidUtf8ByteByByte) {
  EXPECT_EQ(Escape("x\xff"), "x\\xff");
  EXPECT_EQ(Escape("\xc3"), "\\xc3") << "truncated sequence";
  EXPECT_EQ(Escape("\xc3("), "\\xc3(") << "bad continuation";
  EXPECT_EQ(Escape("\xc0\xaf"), "\\xc0\\xaf") << "overlong '/'";
  EXPECT_EQ(Escape("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a UTF-16 surrogate";
  EXPECT_EQ(Escape("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80") << "above U+10FFFF";
  EXPECT_EQ(Escape("\x80"), "\\x80") << "a lone continuation byte";
}

TEST(LogEscape, EscapesCharactersThatHideOrMoveText) {
  EXPECT_EQ(Escape("\xc2\x9b"
                   "2J"),
            "\\u{009b}2J")
      << "C1 CSI";
  EXPECT_EQ(Escape("a\xe2\x80\xa8"
                   "b"),
            "a\\u{2028}b")
      << "line separator";
  EXPECT_EQ(Escape("\xe2\x80\xae"
                   "cod.exe"),
            "\\u{202e}cod.exe")
      << "right-to-left override";
}

TEST(LogEscape, TruncatesAtACharacterBoundaryWithAMarker) {
  EXPECT_EQ(Escape(std::string(300, 'a')), std::string(256, 'a') + "...[44 more bytes]");
  EXPECT_EQ(Escape("abcdef", 4), "abcd...[2 more bytes]");
  EXPECT_EQ(Escape("ab\ncd", 3), "ab...[3 more bytes]") << "an escape is never cut in half";
  EXPECT_EQ(Escape("a\xe2\x82\xac", 3), "a...[3 more bytes]") << "nor a UTF-8 character";
  EXPECT_EQ(Escape("abcd", 4), "abcd") << "exactly fits";
  EXPECT_EQ(Escape(std::string(100'000, '\n')).size(),
            256 + std::string("...[99872 more bytes]").size());
}

}  // namespace
}  // namespace edge::log
