#include "sandbox/shell_quote.h"

#include <gtest/gtest.h>

namespace edge::sandbox {
namespace {

// Vectors written by hand from the worker contract: each arg in single quotes, an embedded
// single quote written as '"'"'.
TEST(ShellQuoteTest, PlainArgIsSingleQuoted) {
  EXPECT_EQ(ShellQuote("hello"), "'hello'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
}

TEST(ShellQuoteTest, SingleQuotesAreEscaped) {
  EXPECT_EQ(ShellQuote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(ShellQuote("'"), "''\"'\"''");
  EXPECT_EQ(ShellQuote("''"), "''\"'\"''\"'\"''");
}

TEST(ShellQuoteTest, ShellMetacharactersStayLiteral) {
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(ShellQuote("`x`;|&>\"\\\n"), "'`x`;|&>\"\\\n'");
}

TEST(ShellQuoteTest, CommandLineJoinsQuotedArgs) {
  EXPECT_EQ(ShellCommandLine("ls -l", {}), "ls -l");
  EXPECT_EQ(ShellCommandLine("echo", {"a", "b c", "d'e"}), "echo 'a' 'b c' 'd'\"'\"'e'");
  EXPECT_EQ(ShellArgv("echo", {"x"}), (std::vector<std::string>{"/bin/sh", "-c", "echo 'x'"}));
}

}  // namespace
}  // namespace edge::sandbox
