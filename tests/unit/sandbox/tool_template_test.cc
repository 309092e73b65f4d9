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
  EXPECT_EQ(Render({"x", "{f}", "{neg:opt}", "{b}"}, json{{"f", 1.5}, {"neg", -3}, {"b", false}}),
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
                        Case{{"echo", "{" + std::string(65, 'a') + "}"}, "1-64"},
                        Case{{"echo", "{a:}"}, "unknown modifier ':' at offset 2"},
                        Case{{"echo", "{a:OPT}"}, "unknown modifier ':OPT' at offset 2"},
                        Case{{"echo", "x", "ab{p:x}"},
                             "command[2] 'ab{p:x}': unknown modifier "
                             "':x' at offset 4"},
                        Case{{"echo", "{:opt}"}, "placeholder"}, Case{{"{p:opt}"}, "command[0]"},
                        Case{{"echo", "--x={v:opt}"}, "start of its element"}}) {
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

// The option-injection rule: a value may not start an argv element with '-' (issue 15: with
// ["du", "-sh", "{path}"], path="--files0-from=/etc/shadow" made du print the file).
TEST(ToolTemplateTest, ValueStartingAnElementWithDashIsRefused) {
  auto t = ToolTemplate::Parse({"du", "-sh", "{path}"});
  ASSERT_TRUE(t.has_value());
  for (const json& v :
       {json("-x"), json("--files0-from=/etc/shadow"), json("-"), json(-3), json(-0.5)}) {
    auto out = t->Render(json{{"path", v}});
    ASSERT_FALSE(out.has_value()) << v.dump();
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
    const std::string& m = out.error().message;
    EXPECT_NE(m.find("arg 'path'"), std::string::npos) << m;
    EXPECT_NE(m.find("command[2]"), std::string::npos) << m;
    EXPECT_NE(m.find(v.is_string() ? v.get<std::string>() : v.dump()), std::string::npos) << m;
    EXPECT_NE(m.find("{path:opt}"), std::string::npos) << m;  // says how to allow it
  }
  // Plain values are unchanged.
  EXPECT_EQ(Render({"du", "-sh", "{path}"}, json{{"path", "/var/log"}}),
            (std::vector<std::string>{"du", "-sh", "/var/log"}));
  EXPECT_EQ(Render({"du", "-sh", "{path}"}, json{{"path", "a-b"}}),
            (std::vector<std::string>{"du", "-sh", "a-b"}));
}

TEST(ToolTemplateTest, LongRefusedValueIsCutInTheMessage) {
  auto t = ToolTemplate::Parse({"cat", "{f}"});
  ASSERT_TRUE(t.has_value());
  std::string value = "--" + std::string(5000, 'z');
  auto out = t->Render(json{{"f", value}});
  ASSERT_FALSE(out.has_value());
  EXPECT_LT(out.error().message.size(), 600u) << out.error().message;
  EXPECT_NE(out.error().message.find("5002 bytes"), std::string::npos) << out.error().message;
}

TEST(ToolTemplateTest, OptSlotAllowsOptions) {
  EXPECT_EQ(Render({"du", "{flags:opt}", "{path}"}, json{{"flags", "-sh"}, {"path", "/tmp"}}),
            (std::vector<std::string>{"du", "-sh", "/tmp"}));
  EXPECT_EQ(Render({"du", "{path:opt}"}, json{{"path", "--files0-from=/x"}}),
            (std::vector<std::string>{"du", "--files0-from=/x"}));
  auto t = ToolTemplate::Parse({"du", "{flags:opt}", "{path}"});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->placeholders(), (std::vector<std::string>{"flags", "path"}));
  // The modifier marks the slot, not the name: the same arg elsewhere stays guarded.
  auto twice = ToolTemplate::Parse({"echo", "{a:opt}", "{a}"});
  ASSERT_TRUE(twice.has_value());
  auto out = twice->Render(json{{"a", "-n"}});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().message.find("command[2]"), std::string::npos) << out.error().message;
}

TEST(ToolTemplateTest, DashInsideAnElementIsFine) {
  EXPECT_EQ(Render({"cat", "file-{n}", "--name={v}", "x{v}"}, json{{"n", -1}, {"v", "-x"}}),
            (std::vector<std::string>{"cat", "file--1", "--name=-x", "x-x"}));
  // A literal dash the template starts with is the author's choice.
  EXPECT_EQ(Render({"ls", "-{flag}"}, json{{"flag", "l"}}), (std::vector<std::string>{"ls", "-l"}));
}

TEST(ToolTemplateTest, EmptyValueCannotLeaveALiteralDashFirst) {
  auto t = ToolTemplate::Parse({"ls", "{a}-l"});
  ASSERT_TRUE(t.has_value());
  auto out = t->Render(json{{"a", ""}});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().message.find("arg 'a'"), std::string::npos) << out.error().message;
  EXPECT_NE(out.error().message.find("empty"), std::string::npos) << out.error().message;
  // Two placeholders: the second value is the one starting the element.
  auto two = ToolTemplate::Parse({"ls", "{a}{b}"});
  ASSERT_TRUE(two.has_value());
  auto out2 = two->Render(json{{"a", ""}, {"b", "-la"}});
  ASSERT_FALSE(out2.has_value());
  EXPECT_NE(out2.error().message.find("arg 'b'"), std::string::npos) << out2.error().message;
  EXPECT_EQ(Render({"ls", "{a}{b}"}, json{{"a", "x"}, {"b", "-la"}}),
            (std::vector<std::string>{"ls", "x-la"}));
}

// Choice: after a literal "--" element every placeholder is an operand for programs that honour
// the convention, so a value starting with '-' is allowed there (documented in the header).
TEST(ToolTemplateTest, AfterLiteralDoubleDashDashValuesAreOperands) {
  EXPECT_EQ(Render({"du", "-sh", "--", "{path}"}, json{{"path", "--files0-from=/etc/shadow"}}),
            (std::vector<std::string>{"du", "-sh", "--", "--files0-from=/etc/shadow"}));
  EXPECT_EQ(Render({"du", "-sh", "--", "{path}"}, json{{"path", "/var/log"}}),
            (std::vector<std::string>{"du", "-sh", "--", "/var/log"}));
  // Only a whole literal "--" element counts, not one in argv[0], one with a placeholder, or
  // one produced by a value; and placeholders before it stay guarded.
  for (const std::vector<std::string>& tmpl : std::vector<std::vector<std::string>>{
           {"--", "{p}"}, {"du", "--{e}", "{p}"}, {"du", "{p}", "--"}, {"du", "{p}", "--", "x"}}) {
    auto t = ToolTemplate::Parse(tmpl);
    ASSERT_TRUE(t.has_value()) << t.error().ToString();
    auto out = t->Render(json{{"p", "-x"}, {"e", ""}});
    EXPECT_FALSE(out.has_value()) << tmpl[0] << " " << tmpl[1];
  }
}

TEST(ToolTemplateTest, ProgramCannotBeRewrittenByAValue) {
  EXPECT_EQ(Render({"{prog}", "x"}, json{{"prog", "ls"}}), (std::vector<std::string>{"ls", "x"}));
  EXPECT_EQ(Render({"/opt/tools/{t}"}, json{{"t", "check-disk"}}),
            (std::vector<std::string>{"/opt/tools/check-disk"}));
  struct Case {
    std::vector<std::string> tmpl;
    std::string value;
    std::string words;
  };
  for (const Case& c : {Case{{"{prog}"}, "-x", "must not start with '-'"},
                        Case{{"{prog}"}, "--help", "must not start with '-'"},
                        Case{{"{prog}"}, "/bin/sh", "must not contain '/'"},
                        Case{{"/opt/tools/{t}"}, "../../bin/sh", "must not contain '/'"},
                        Case{{"tool-{t}"}, "x/../../sh", "must not contain '/'"}}) {
    auto t = ToolTemplate::Parse(c.tmpl);
    ASSERT_TRUE(t.has_value());
    auto out = t->Render(json{{"prog", c.value}, {"t", c.value}});
    ASSERT_FALSE(out.has_value()) << c.value;
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(out.error().message.find("command[0]"), std::string::npos) << out.error().message;
    EXPECT_NE(out.error().message.find(c.words), std::string::npos) << out.error().message;
    EXPECT_NE(out.error().message.find(c.value), std::string::npos) << out.error().message;
  }
}

}  // namespace
}  // namespace edge::sandbox
