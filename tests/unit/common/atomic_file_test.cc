#include "common/atomic_file.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace edge {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void TearDown() override { fs::permissions(dir_, fs::perms::owner_all); }
  size_t EntryCount() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  edge::testing::TempDir tmp_{"atomic"};
  std::string dir_ = tmp_.path();
};

TEST_F(AtomicFileTest, WritesContentWithExactModeDespiteUmask) {
  mode_t old = ::umask(0);
  ::umask(0077);
  auto path = dir_ + "/secret";
  ASSERT_TRUE(WriteFileAtomic(path, "hello", {.mode = 0644}));
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(*ReadFile(path), "hello");
}

TEST_F(AtomicFileTest, ReplacesExistingFileAndLeavesNoTemp) {
  auto path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomic(path, "one"));
  ASSERT_TRUE(WriteFileAtomic(path, "two"));
  EXPECT_EQ(*ReadFile(path), "two");
  EXPECT_EQ(EntryCount(), 1u);
}

TEST_F(AtomicFileTest, CreatesParentsWhenAsked) {
  auto path = dir_ + "/a/b/c";
  ASSERT_TRUE(WriteFileAtomic(path, "x", {.mode = 0600, .create_parents_mode = 0700}));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(AtomicFileTest, FailedRenameLeavesTargetAndNoTemp) {
  // A non-empty directory in the target's place makes rename(2) fail, even for root.
  auto path = dir_ + "/target";
  fs::create_directory(path);
  ASSERT_TRUE(WriteFileAtomic(path + "/keep", "old"));
  auto st = WriteFileAtomic(path, "new");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("rename"), std::string::npos) << st.error().message;
  EXPECT_EQ(*ReadFile(path + "/keep"), "old");
  EXPECT_EQ(EntryCount(), 1u) << "the temp file must be removed";
}

TEST_F(AtomicFileTest, MissingDirectoryIsNotFound) {
  auto st = WriteFileAtomic(dir_ + "/nope/f", "x");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
  EXPECT_NE(st.error().message.find("nope"), std::string::npos);
}

TEST_F(AtomicFileTest, ReadFileRefusesOversizeAndNonRegular) {
  auto path = dir_ + "/big";
  ASSERT_TRUE(WriteFileAtomic(path, std::string(100, 'x')));
  auto r = ReadFile(path, 10);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  auto d = ReadFile(dir_);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace edge
