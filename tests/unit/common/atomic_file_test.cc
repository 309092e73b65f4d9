#include "common/atomic_file.h"
#include "tests/support/small_disk.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

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

// The bytes in pieces (ContentPieces): the file is their concatenation, with the exact mode,
// and a piece of 1 MiB or more (the early writeback) changes nothing about what is read back.
TEST_F(AtomicFileTest, PiecesAreWrittenInOrder) {
  const std::vector<std::string> pieces = {"one,", "", std::string(3 << 20, 'b'), "three"};
  size_t next = 0;
  const int dirfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dirfd, 0);
  // The empty second piece ends them: what follows it is never asked for.
  auto first = ReplaceFileAt(
      dirfd, "f", [&]() -> std::string_view { return pieces.at(next++); }, 0640);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(next, 2u);
  EXPECT_EQ(*ReadFile(dir_ + "/f"), "one,");
  next = 2;
  auto second = ReplaceFileAt(
      dirfd, "f",
      [&]() -> std::string_view {
        // A view of the piece itself: `cond ? pieces[i] : ""` would be a temporary string.
        return next < pieces.size() ? std::string_view(pieces[next++]) : std::string_view();
      },
      0640);
  ::close(dirfd);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*ReadFile(dir_ + "/f"), pieces[2] + "three");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(EntryCount(), 1u);
}

size_t OpenFdCount() {
  return static_cast<size_t>(
      std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator()));
}

// replaced_fd: the caller is handed the file the rename replaced, still whole (its old bytes,
// no name left), while the name has the new bytes; -1 when nothing was replaced and after a
// failure, which leaves no descriptor open.
TEST_F(AtomicFileTest, TheReplacedFileIsHeldForTheCallerToRelease) {
  const int dirfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dirfd, 0);
  int held = 12345;
  ASSERT_TRUE(ReplaceFileAt(dirfd, "f", OnePiece("first version"), 0600, &held).has_value());
  EXPECT_EQ(held, -1) << "there was no file to replace";

  ASSERT_TRUE(ReplaceFileAt(dirfd, "f", OnePiece("second"), 0600, &held).has_value());
  ASSERT_GE(held, 0);
  EXPECT_EQ(*ReadFile(dir_ + "/f"), "second");
  struct stat st {};
  ASSERT_EQ(::fstat(held, &st), 0);
  EXPECT_EQ(st.st_size, 13) << "the old file, not the new one";
  EXPECT_EQ(st.st_nlink, 0u) << "no name refers to it any more";
  EXPECT_EQ(*ReadFile("/proc/self/fd/" + std::to_string(held)), "first version");
  ::close(held);
  EXPECT_EQ(EntryCount(), 1u);

  // A failed rename (a non-empty directory in the target's place) closes what it held.
  ASSERT_EQ(::mkdirat(dirfd, "d", 0700), 0);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/d/keep", "x"));
  const size_t fds = OpenFdCount();
  held = 12345;
  auto failed = ReplaceFileAt(dirfd, "d", OnePiece("new"), 0600, &held);
  ASSERT_FALSE(failed.has_value());
  EXPECT_STREQ(failed.error().step, "rename");
  EXPECT_EQ(held, -1);
  EXPECT_EQ(OpenFdCount(), fds) << "the held directory must be closed on failure";
  ::close(dirfd);
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

// Issue 16: a disk that fills up mid-write — a real ENOSPC on a small tmpfs — fails with
// RESOURCE_EXHAUSTED naming the file, keeps the old file whole and leaves nothing behind;
// once there is room again, the same write succeeds.
TEST(AtomicFileFaults, ADiskFullWriteKeepsTheOldFileAndLeavesNothing) {
  edge::testing::SmallDisk disk(256 * 1024);
  if (!disk.available()) GTEST_SKIP() << "no tmpfs here: " << disk.why_not();
  const std::string path = disk / "settings";
  ASSERT_TRUE(WriteFileAtomic(path, "old"));
  disk.Fill();
  auto st = WriteFileAtomic(path, std::string(64 * 1024, 'n'));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(st.error().message, "write " + path + ": No space left on device");
  EXPECT_EQ(*ReadFile(path), "old");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(disk.path()))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".filler", "settings"}));
  disk.Free();
  ASSERT_TRUE(WriteFileAtomic(path, std::string(64 * 1024, 'n')));
  EXPECT_EQ(ReadFile(path)->size(), 64u * 1024);
}

// Issue 16: the writer is killed with -9 in the middle of a write. The data goes to an unnamed
// file until it is complete, so the directory holds the old file, whole, and nothing else.
TEST_F(AtomicFileTest, AKillMidWriteLeavesTheOldFileAndNothingElse) {
  const std::string path = dir_ + "/big";
  ASSERT_TRUE(WriteFileAtomic(path, "old"));
  // Long enough to be caught in the middle; made before the fork, so that the child does not
  // need the allocator that a thread of gRPC's may have held at the fork.
  const std::string data(512u << 20, 'x');
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (void)WriteFileAtomic(path, data);
    ::_exit(0);
  }
  // The unnamed file shows in the writer's fd table as "<dir>/#<inode> (deleted)".
  auto writing = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(child) + "/fd", ec)) {
      std::string target = fs::read_symlink(e.path(), ec);
      if (!ec && target.rfind(dir_ + "/", 0) == 0) return true;
    }
    return false;
  };
  const bool caught = edge::testing::WaitUntil(writing, std::chrono::seconds(20));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(caught) << "the writer was never seen writing";
  ASSERT_TRUE(WIFSIGNALED(status)) << "the write ended before the kill";
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(EntryCount(), 1u) << "nothing but the old file";
}

}  // namespace
}  // namespace edge
