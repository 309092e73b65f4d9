#include "sandbox/scoped_root.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;

std::string ReadFd(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

class ScopedRootTest : public ::testing::TestWithParam<ResolveMode> {
 protected:
  void SetUp() override {
    if (GetParam() == ResolveMode::kOpenat2 && !ScopedRoot::KernelHasOpenat2()) {
      GTEST_SKIP() << "kernel has no openat2";
    }
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_ + "/dir");
    fs::create_directories(outside_);
    std::ofstream(root_ + "/dir/file") << "inside";
    std::ofstream(outside_ + "/secret") << "OUTSIDE";
    auto r = ScopedRoot::Open(root_, GetParam());
    ASSERT_TRUE(r) << r.error().ToString();
    sr_.emplace(std::move(*r));
  }
  Result<std::string> Read(const std::string& path) {
    auto fd = sr_->OpenBeneath(path, O_RDONLY);
    if (!fd) return std::unexpected(fd.error());
    return ReadFd(fd->get());
  }
  edge::testing::TempDir tmp_{"root"};
  std::string base_ = tmp_.path(), root_, outside_;
  std::optional<ScopedRoot> sr_;
};

TEST(ScopedRootNormalize, ComponentsDotsAndAbsolutePaths) {
  using V = std::vector<std::string>;
  EXPECT_EQ(*ScopedRoot::Normalize("a/b/c"), (V{"a", "b", "c"}));
  EXPECT_EQ(*ScopedRoot::Normalize("/a/./b//c/"), (V{"a", "b", "c"}));
  EXPECT_EQ(*ScopedRoot::Normalize("a/../b"), (V{"b"}));
  EXPECT_EQ(*ScopedRoot::Normalize("/"), V{});
  EXPECT_EQ(*ScopedRoot::Normalize(""), V{});
  for (const char* bad : {"..", "../x", "/../etc/passwd", "a/../../b", "a/b/../../.."}) {
    auto r = ScopedRoot::Normalize(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kPathOutsideRoot) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos);
  }
  EXPECT_EQ(ScopedRoot::Normalize(std::string("a\0b", 3)).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(ScopedRoot::Normalize(std::string(300, 'x')).error().code, ErrorCode::kInvalidArgument);
}

TEST_P(ScopedRootTest, OpensFilesInsideTheRoot) {
  EXPECT_EQ(*Read("dir/file"), "inside");
  EXPECT_EQ(*Read("/dir/file"), "inside") << "absolute paths are relative to the root";
  EXPECT_EQ(*Read("dir/../dir/./file"), "inside");
}

TEST_P(ScopedRootTest, SymlinkOpenedAsADirectoryIsOutsideTheRootNotNotADirectory) {
  fs::create_directory_symlink(outside_, root_ + "/to-outside");
  for (const char* p : {"to-outside", "/to-outside"}) {
    for (int flags : {O_RDONLY | O_DIRECTORY, O_PATH | O_DIRECTORY}) {
      auto fd = sr_->OpenBeneath(p, flags);
      ASSERT_FALSE(fd) << p;
      EXPECT_EQ(fd.error().code, ErrorCode::kPathOutsideRoot) << p << ": " << fd.error().message;
    }
  }
}

TEST_P(ScopedRootTest, AbsolutePathsNeverReachTheHost) {
  auto r = Read("/etc/passwd");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  auto up = Read("../outside/secret");
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error().code, ErrorCode::kPathOutsideRoot);
}

TEST_P(ScopedRootTest, SymlinksLeadingOutsideAreRefused) {
  fs::create_symlink("/etc", root_ + "/etc-link");
  fs::create_symlink(outside_ + "/secret", root_ + "/evil");
  fs::create_symlink("../../outside", root_ + "/dir/up");
  for (const char* p : {"etc-link/passwd", "evil", "dir/up/secret"}) {
    auto r = Read(p);
    ASSERT_FALSE(r) << p << " read: " << *r;
    EXPECT_EQ(r.error().code, ErrorCode::kPathOutsideRoot) << p << ": " << r.error().message;
  }
  // Creating through a symlink is refused too.
  auto w = sr_->OpenBeneath("etc-link/new-file", O_WRONLY | O_CREAT, 0600);
  ASSERT_FALSE(w);
  EXPECT_FALSE(fs::exists("/etc/new-file"));
}

TEST_P(ScopedRootTest, SymlinksInsideTheRootDependOnTheResolver) {
  fs::create_symlink("dir/file", root_ + "/alias");
  auto r = Read("alias");
  if (GetParam() == ResolveMode::kOpenat2) {
    ASSERT_TRUE(r) << r.error().ToString();
    EXPECT_EQ(*r, "inside");
  } else {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kPathOutsideRoot);
    EXPECT_NE(r.error().message.find("symlink"), std::string::npos);
  }
}

TEST_P(ScopedRootTest, SymlinkSwappedInDuringResolutionNeverEscapes) {
  // One thread keeps replacing root/swap between a real directory and a symlink to the
  // outside directory; the other keeps opening swap/secret. Nothing outside may be read.
  fs::create_directories(root_ + "/real");
  std::ofstream(root_ + "/real/secret") << "inside";
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    const std::string swap = root_ + "/swap", tmp_link = root_ + "/swap.lnk";
    while (!stop) {
      ::symlink(outside_.c_str(), tmp_link.c_str());
      ::rename(tmp_link.c_str(), swap.c_str());  // swap -> outside
      ::unlink(swap.c_str());
      ::symlink("real", tmp_link.c_str());
      ::rename((root_ + "/real").c_str(), swap.c_str());  // swap is the real directory
      ::rename(swap.c_str(), (root_ + "/real").c_str());
      ::unlink(tmp_link.c_str());
    }
  });
  int leaks = 0, opened = 0;
  // At least 20 000 tries, and on until a legitimate open got through (on a loaded machine
  // the window for one is rare), bounded at 30 s.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 20000 || (opened == 0 && std::chrono::steady_clock::now() < give_up); ++i) {
    auto r = Read("swap/secret");
    if (r) {
      ++opened;
      if (*r == "OUTSIDE") ++leaks;
    }
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(leaks, 0) << "opened " << opened << " times";
  EXPECT_GT(opened, 0) << "the race never let a legitimate open through: the test proves nothing";
}

TEST_P(ScopedRootTest, OpenParentCreatesDirectoriesBeneathTheRoot) {
  auto p = sr_->OpenParent("a/b/c/file.txt", true, 0750);
  ASSERT_TRUE(p) << p.error().ToString();
  EXPECT_EQ(p->second, "file.txt");
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  auto root_itself = sr_->OpenParent("/", false);
  ASSERT_FALSE(root_itself);
  EXPECT_EQ(root_itself.error().code, ErrorCode::kInvalidArgument);
  fs::create_symlink(outside_, root_ + "/out");
  auto through = sr_->OpenParent("out/x/y", true);
  ASSERT_FALSE(through);
  EXPECT_EQ(through.error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_FALSE(fs::exists(outside_ + "/x"));
}

INSTANTIATE_TEST_SUITE_P(Resolvers, ScopedRootTest,
                         ::testing::Values(ResolveMode::kOpenat2, ResolveMode::kWalk),
                         [](const auto& info) {
                           return info.param == ResolveMode::kOpenat2 ? "openat2" : "walk";
                         });

}  // namespace
}  // namespace edge::sandbox
