#include "config/join_token_remover.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace edge::config {
namespace {

std::string Remove(const std::string& in, bool expect_removed = true) {
  bool removed = false;
  auto out = JoinTokenRemover::RemoveFromText(in, &removed);
  EXPECT_TRUE(out) << out.error().ToString();
  EXPECT_EQ(removed, expect_removed);
  return out ? *out : "";
}

TEST(JoinTokenRemover, RemovesOnlyThatLineByteForByte) {
  const std::string in =
      "# agent config\r\nnode_id: edge-01   # me\n\ncontroller:\n  address: ctl:50056  # ctl\n"
      "  join_token: \"eyJ.abc.def\"   # one-time\n  ca_pin: \"sha256:00\"\nlog:\n  level: info";
  const std::string want =
      "# agent config\r\nnode_id: edge-01   # me\n\ncontroller:\n  address: ctl:50056  # ctl\n"
      "  ca_pin: \"sha256:00\"\nlog:\n  level: info";
  EXPECT_EQ(Remove(in), want);
}

TEST(JoinTokenRemover, RemovesBlockScalarsAndContinuations) {
  EXPECT_EQ(Remove("controller:\n  join_token: |\n    eyJ\n\n    more\n  address: a:1\n"),
            "controller:\n  address: a:1\n");
  EXPECT_EQ(Remove("controller:\n  join_token: 'abc\n    def'\nx: 1\n"), "controller:\nx: 1\n");
  EXPECT_EQ(Remove("controller:\n    # comment stays\n    join_token: t\n"),
            "controller:\n    # comment stays\n");
}

TEST(JoinTokenRemover, LeavesOtherKeysAndOtherSectionsAlone) {
  const std::string keep_file =
      "controller:\n  join_token_file: /etc/t\nworker:\n  join_token: x\n";
  EXPECT_EQ(Remove(keep_file, false), keep_file);
  const std::string none = "node_id: a\n";
  EXPECT_EQ(Remove(none, false), none);
}

TEST(JoinTokenRemover, RefusesFlowStyleControllerMap) {
  bool removed = false;
  auto out = JoinTokenRemover::RemoveFromText("controller: {join_token: t}\n", &removed);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(out.error().message.find("flow-style"), std::string::npos);
}

class JoinTokenFileTest : public ::testing::Test {
 protected:
  edge::testing::TempDir tmp_{"jtr"};
  std::string dir_ = tmp_.path();
};

TEST_F(JoinTokenFileTest, RewritesAtomicallyKeepingTheMode) {
  const std::string path = dir_ + "/agent.yaml";
  std::ofstream(path) << "controller:\n  join_token: t\n  address: a:1\n";
  ::chmod(path.c_str(), 0640);
  auto r = JoinTokenRemover::RemoveJoinToken(path);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_TRUE(*r);
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  EXPECT_EQ(ss.str(), "controller:\n  address: a:1\n");
  struct stat st {};
  ::stat(path.c_str(), &st);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(JoinTokenFileTest, RefusesSymlinksAndNonRegularFiles) {
  const std::string real = dir_ + "/real.yaml", link = dir_ + "/agent.yaml";
  std::ofstream(real) << "controller:\n  join_token: t\n";
  ::symlink(real.c_str(), link.c_str());
  auto st = JoinTokenRemover::CheckRewritable(link);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message.find("is a symlink to " + real), std::string::npos)
      << st.error().message;
  EXPECT_FALSE(JoinTokenRemover::RemoveJoinToken(link));
  std::stringstream ss;
  ss << std::ifstream(real).rdbuf();
  EXPECT_EQ(ss.str(), "controller:\n  join_token: t\n") << "target untouched";
  auto dir = JoinTokenRemover::CheckRewritable(dir_);
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message.find("not a regular file"), std::string::npos);
  EXPECT_FALSE(JoinTokenRemover::CheckRewritable(dir_ + "/absent.yaml"));
}

// An enrolled agent whose token came from the environment asks at every start: a config
// without the entry is left alone without an error, even where it could not be rewritten.
TEST_F(JoinTokenFileTest, AFileWithoutTheEntryIsLeftAloneEvenWhenItCannotBeRewritten) {
  const std::string real = dir_ + "/real.yaml", link = dir_ + "/agent.yaml";
  std::ofstream(real) << "controller:\n  address: a:1\n";
  ::symlink(real.c_str(), link.c_str());
  ASSERT_FALSE(JoinTokenRemover::CheckRewritable(link));
  auto r = JoinTokenRemover::RemoveJoinToken(link);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_FALSE(*r);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
}

// A config in JSON (or flow-style YAML) holds the token where no line rewrite can reach it:
// nothing is changed, and a caller that names the token hears that it stays on disk.
TEST_F(JoinTokenFileTest, ATokenInAFormThatCannotBeRewrittenIsReportedNotLeftSilently) {
  const std::string path = dir_ + "/agent.json";
  const std::string text = R"({"controller": {"join_token": "tok.en.value", "address": "a:1"}})";
  std::ofstream(path) << text;
  auto quiet = JoinTokenRemover::RemoveJoinToken(path);
  ASSERT_TRUE(quiet) << quiet.error().ToString();
  EXPECT_FALSE(*quiet);
  auto told = JoinTokenRemover::RemoveJoinToken(path, "tok.en.value");
  ASSERT_FALSE(told);
  EXPECT_EQ(told.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(told.error().message.find("remove it by hand"), std::string::npos);
  EXPECT_NE(told.error().message.find(path), std::string::npos);
  EXPECT_EQ(told.error().message.find("tok.en.value"), std::string::npos) << "never the token";
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  EXPECT_EQ(ss.str(), text);
  // A token from elsewhere (the environment) that the file does not hold: nothing to say.
  auto other = JoinTokenRemover::RemoveJoinToken(path, "another.token.value");
  ASSERT_TRUE(other);
  EXPECT_FALSE(*other);
}

}  // namespace
}  // namespace edge::config
