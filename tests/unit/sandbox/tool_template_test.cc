#include "sandbox/tool_template.h"

#include <gtest/gtest.h>

namespace edge::sandbox {
namespace {

using json = nlohmann::json;

std::vector<std::string> Render(const std::vector<std::string>& tmpl, const json& args) {
  auto t = ToolTemplate::Parse(tmpl);
  EXPECT_TRUE(t.has_value()) << t.error().ToString();
  auto out = t->Render(args);
  EXPECT_TRUE(out.has_value()) << out.error().ToString();
  return out.value_or(std::vector<std::string>{});
}

TEST(ToolTemplateTest, FillsTypedScalarsIntoSingleElements) {
  EXPECT_EQ(Render({"grep", "-n", "{pattern}", "file-{n}.txt", "--flag={on}"},
                   json{{"pattern", "a b; rm -rf /"}, {"n", 7}, {"on", true}}),
            (std::vector<std::string>{"grep", "-n", "a b; rm -rf /", "file-7.txt", "--flag=true"}));
  EXPECT_EQ(Render({"x", "{f}", "{neg}", "{b}"}, json{{"f", 1.5}, {"neg", -3}, {"b", false}}),
            (std::vector<std::string>{"x", "1.5", "-3", "false"}));
}

TEST(ToolTemplateTest, ValuesNeverSplitOrAddElements) {
  auto out = Render({"echo", "{a}"}, json{{"a", "x y\nz' \"$(id)\" `id` {b}"}, {"b", "no"}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], "x y\nz' \"$(id)\" `id` {b}");  // a value is not expanded again
  EXPECT_EQ(Render({"echo", "{a}"}, json{{"a", ""}}), (std::vector<std::string>{"echo", ""}));
}

TEST(ToolTemplateTest, DoubledBracesAreLiteral) {
  EXPECT_EQ(Render({"printf", "{{{x}}}"}, json{{"x", "v"}}),
            (std::vector<std::string>{"printf", "{v}"}));
  EXPECT_EQ(Render({"a", "{{}}"}, json::object()), (std::vector<std::string>{"a", "{}"}));
}

TEST(ToolTemplateTest, PlaceholdersListedOnce) {
  auto t = ToolTemplate::Parse({"{a}", "{b}-{a}"});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->placeholders(), (std::vector<std::string>{"a", "b"}));
  // Extra args are ignored; null args count as {} when no placeholder is used.
  EXPECT_EQ(Render({"true"}, nullptr), (std::vector<std::string>{"true"}));
  EXPECT_EQ(Render({"true"}, json{{"unused", 1}}), (std::vector<std::string>{"true"}));
}

TEST(ToolTemplateTest, MissingOrNonScalarArgIsNamed) {
  auto t = ToolTemplate::Parse({"cat", "{path}"});
  ASSERT_TRUE(t.has_value());
  for (const json& args : {json::object(), json{{"other", "x"}}}) {
    auto out = t->Render(args);
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(out.error().message.find("'path'"), std::string::npos);
    EXPECT_NE(out.error().message.find("missing"), std::string::npos);
  }
  for (const json& bad : {json::array({1}), json{{"k", 1}}, json(nullptr)}) {
    auto out = t->Render(json{{"path", bad}});
    ASSERT_FALSE(out.has_value());
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(out.error().message.find("'path'"), std::string::npos);
    EXPECT_NE(out.error().message.find("string, number or bool"), std::string::npos);
  }
  auto nul = t->Render(json{{"path", std::string("a\0b", 3)}});
  ASSERT_FALSE(nul.has_value());
  EXPECT_NE(nul.error().message.find("NUL"), std::string::npos);
  auto not_object = t->Render(json::array());
  ASSERT_FALSE(not_object.has_value());
  EXPECT_NE(not_object.error().message.find("object"), std::string::npos);
}

TEST(ToolTemplateTest, BadTemplatesAreRejected) {
  struct Case {
    std::vector<std::string> tmpl;
    std::string words;
  };
  for (const Case& c : {Case{{}, "empty"}, Case{{"", "x"}, "command[0]"},
                        Case{{"echo", "{open"}, "unclosed"}, Case{{"echo", "a}b"}, "stray"},
                        Case{{"echo", "{}"}, "placeholder"}, Case{{"echo", "{a b}"}, "placeholder"},
                        Case{{"echo", "{" + std::string(65, 'a') + "}"}, "1-64"}}) {
    auto t = ToolTemplate::Parse(c.tmpl);
    ASSERT_FALSE(t.has_value()) << c.words;
    EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(t.error().message.find(c.words), std::string::npos) << t.error().message;
  }
  auto empty_program = ToolTemplate::Parse({"{prog}", "x"});
  ASSERT_TRUE(empty_program.has_value());
  auto out = empty_program->Render(json{{"prog", ""}});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().message.find("command[0]"), std::string::npos);
}

}  // namespace
}  // namespace edge::sandbox
