#include "common/json_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace edge {
namespace {

std::string Nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonParse, ParsesOrdinaryDocuments) {
  auto j = ParseJsonBounded(R"({"a":[1,2,{"b":"c"}],"d":true})", "args");
  ASSERT_TRUE(j) << j.error().ToString();
  EXPECT_EQ((*j)["a"][2]["b"], "c");
  EXPECT_TRUE(ParseJsonBounded("42", "x"));
  EXPECT_TRUE(ParseJsonBounded(R"("str")", "x"));
}

TEST(JsonParse, DepthAtTheLimitIsAcceptedOneMoreIsRefused) {
  EXPECT_TRUE(ParseJsonBounded(Nested(64), "args_json"));
  EXPECT_TRUE(ParseJsonBounded(Nested(3), "args_json", 3));
  auto deep = ParseJsonBounded(Nested(65), "args_json");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(deep.error().message,
            "args_json is nested 65 levels deep at byte 64, deeper than the limit of 64 nested "
            "arrays/objects");
  auto objects = ParseJsonBounded(R"({"a":{"b":{"c":{}}}})", "delta", 3);
  ASSERT_FALSE(objects);
  EXPECT_NE(objects.error().message.find("delta is nested 4 levels deep at byte 15"),
            std::string::npos)
      << objects.error().message;
}

TEST(JsonParse, OneHundredThousandLevelsAreRefusedWithoutRecursion) {
  // The finding: 100 000 levels overflowed the stack in a recursive dump.
  const std::string text = Nested(100'000);
  auto r = ParseJsonBounded(text, "args_json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("limit of 64"), std::string::npos);
  // Unbalanced (never closed) is measured the same way.
  EXPECT_FALSE(CheckJsonDepth(std::string(100'000, '{'), "x"));
}

TEST(JsonParse, BracketsInsideStringsDoNotCountAndEscapesAreHonoured) {
  const std::string in_string = "[\"" + std::string(500, '[') + "\"]";
  auto r = ParseJsonBounded(in_string, "args");
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ((*r)[0].get<std::string>().size(), 500u);
  // An escaped quote does not end the string: the brackets after it are still inside.
  const std::string escaped_quote = R"(["\")" + std::string(100, '{') + R"("])";
  EXPECT_TRUE(CheckJsonDepth(escaped_quote, "x"));
  // An escaped backslash does end before the quote: the brackets after it count.
  const std::string escaped_backslash =
      R"(["\\",)" + std::string(70, '[') + std::string(70, ']') + "]";
  auto deep = CheckJsonDepth(escaped_backslash, "x");
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("65 levels"), std::string::npos) << deep.error().message;
}

TEST(JsonParse, ParseErrorsNameWhatAndTheBytePosition) {
  auto r = ParseJsonBounded(R"({"a": tru})", "args_json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("args_json is not valid JSON: at byte 10: "), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("syntax error"), std::string::npos) << r.error().message;
  auto empty = ParseJsonBounded("", "payload");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("payload is not valid JSON: at byte 1"), std::string::npos)
      << empty.error().message;
  auto bad_utf8 = ParseJsonBounded("[\"\xff\"]", "args");
  ASSERT_FALSE(bad_utf8);
  EXPECT_NE(bad_utf8.error().message.find("args is not valid JSON"), std::string::npos);
  EXPECT_FALSE(ParseJsonBounded("[1] trailing", "x"));
}

TEST(AppendJsonString, EscapesExactlyAsNlohmannDumps) {
  // Every byte that needs care, valid multi-byte UTF-8 (2, 3 and 4 bytes), DEL, and long
  // runs; the oracle is nlohmann::json::dump, another implementation.
  std::vector<std::string> cases = {"",
                                    "plain",
                                    "quote\" back\\ slash",
                                    std::string("\0\x01\x1f\x7f", 4),
                                    "\b\f\n\r\t",
                                    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                    std::string(100000, 'x') + "\n" + std::string(3, '"')};
  std::string all;
  for (int c = 0; c < 0x80; ++c)
    all.push_back(static_cast<char>(c));
  cases.push_back(all);
  for (const auto& s : cases) {
    std::string out = "prefix:";
    AppendJsonString(out, s);
    EXPECT_EQ(out, "prefix:" + nlohmann::json(s).dump()) << nlohmann::json(s).dump();
  }
  std::string out;
  AppendJsonString(out, "\x01");
  EXPECT_EQ(out, "\"\\u0001\"");  // by hand: lowercase hex, four digits
}

}  // namespace
}  // namespace edge
