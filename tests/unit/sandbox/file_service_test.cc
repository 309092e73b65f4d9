#include "sandbox/file_service.h"
#include "common/base64.h"
#include "tests/support/temp_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;

class FileServiceTest : public ::testing::TestWithParam<ResolveMode> {
 protected:
  void SetUp() override {
    if (GetParam() == ResolveMode::kOpenat2 && !ScopedRoot::KernelHasOpenat2()) {
      GTEST_SKIP() << "kernel has no openat2";
    }
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_);
    fs::create_directories(outside_);
    std::ofstream(outside_ + "/secret") << "OUTSIDE";
    fs::create_symlink(outside_, root_ + "/out");
    files_.emplace(*ScopedRoot::Open(root_, GetParam()), 1024);
  }
  static std::string Slurp(const std::string& p) {
    std::stringstream ss;
    ss << std::ifstream(p).rdbuf();
    return ss.str();
  }
  static mode_t Mode(const std::string& p) {
    struct stat st {};
    ::lstat(p.c_str(), &st);
    return st.st_mode & 07777;
  }
  edge::testing::TempDir tmp_{"files"};
  std::string base_ = tmp_.path(), root_, outside_;
  std::optional<FileService> files_;
};

TEST(ParseOctalMode, AcceptsOctalRejectsTheRest) {
  EXPECT_EQ(*ParseOctalMode("0644"), 0644u);
  EXPECT_EQ(*ParseOctalMode("755"), 0755u);
  EXPECT_EQ(*ParseOctalMode("0777"), 0777u);
  // Issue 15: setuid/setgid/sticky bits are refused, never silently masked.
  for (const char* special : {"4755", "2755", "1777", "7777", "4000"}) {
    auto r = ParseOctalMode(special);
    ASSERT_FALSE(r) << special;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("setuid, setgid and sticky bits"), std::string::npos)
        << r.error().message;
  }
  for (const char* bad : {"", "0999", "rwxr-xr-x", "07777 ", "12345", "-644"}) {
    auto r = ParseOctalMode(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(std::string("\"") + bad + "\""), std::string::npos)
        << r.error().message;
  }
}

TEST_P(FileServiceTest, ALongDeleteStopsWhenCancelled) {
  for (int d = 0; d < 5; ++d) {
    for (int f = 0; f < 20; ++f) {
      ASSERT_TRUE(files_->Write("tree/d" + std::to_string(d) + "/f" + std::to_string(f), "x"));
    }
  }
  auto root = ScopedRoot::Open(root_);
  ASSERT_TRUE(root.has_value());
  int polls = 0;
  FileService cancellable(std::move(*root), 1 << 20, [&polls] { return ++polls > 30; });
  auto st = cancellable.Delete("tree", /*recursive=*/true);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kCancelled);
  EXPECT_NE(st.error().message.find("cancelled part-way"), std::string::npos) << st.error().message;
  EXPECT_TRUE(fs::exists(root_ + "/tree")) << "stopped part-way, not finished";
  size_t left = 0;
  for (auto it = fs::recursive_directory_iterator(root_ + "/tree");
       it != fs::recursive_directory_iterator(); ++it)
    left += it->is_regular_file() ? 1 : 0;
  EXPECT_GT(left, 0u);
  EXPECT_LT(left, 100u);
  // Uncancelled, the same delete finishes.
  EXPECT_TRUE(files_->Delete("tree", true).has_value());
  EXPECT_FALSE(fs::exists(root_ + "/tree"));
}

TEST_P(FileServiceTest, WriteCreatesParentsWithExactModeAndNoTempLeft) {
  ASSERT_TRUE(files_->Write("/a/b/c.txt", "hello", "0640"));
  EXPECT_EQ(Slurp(root_ + "/a/b/c.txt"), "hello");
  EXPECT_EQ(Mode(root_ + "/a/b/c.txt"), 0640u);
  ASSERT_TRUE(files_->Write("a/b/c.txt", "again"));
  EXPECT_EQ(Slurp(root_ + "/a/b/c.txt"), "again");
  EXPECT_EQ(Mode(root_ + "/a/b/c.txt"), 0644u) << "default mode";
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ + "/a/b"), fs::directory_iterator()), 1);
}

TEST_P(FileServiceTest, FailedWriteLeavesTargetAndNoTemp) {
  fs::create_directories(root_ + "/d/x");
  auto st = files_->Write("d", "data");
  ASSERT_FALSE(st);
  EXPECT_TRUE(fs::is_directory(root_ + "/d/x"));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 2)
      << "d and out only";
  EXPECT_EQ(files_->Write("x", "d", "0x1").error().code, ErrorCode::kInvalidArgument);
}

// Write's `replaced`: the file it replaced, held for the caller (file_write closes it after
// answering); empty when it created the file.
TEST_P(FileServiceTest, WriteHandsOverTheFileItReplaced) {
  UniqueFd replaced(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(files_->Write("w.txt", OnePiece("old bytes"), "", &replaced));
  EXPECT_FALSE(replaced) << "nothing was replaced (and what it held before is closed)";
  ASSERT_TRUE(files_->Write("w.txt", OnePiece("new"), "", &replaced));
  ASSERT_TRUE(replaced);
  struct stat st {};
  ASSERT_EQ(::fstat(replaced.get(), &st), 0);
  EXPECT_EQ(st.st_size, 9);
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(Slurp(root_ + "/w.txt"), "new");
}

TEST_P(FileServiceTest, ReadWithOffsetLengthAndCap) {
  ASSERT_TRUE(files_->Write("f", "0123456789"));
  EXPECT_EQ(*files_->Read("f"), "0123456789");
  EXPECT_EQ(*files_->Read("f", 3, 4), "3456");
  EXPECT_EQ(*files_->Read("f", 8, 100), "89");
  EXPECT_EQ(files_->Read("f", 11).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(files_->Write("big", std::string(2000, 'x')));
  auto big = files_->Read("big");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message.find("1024"), std::string::npos);
  EXPECT_EQ(files_->Read("big", 0, 1000)->size(), 1000u) << "a part under the cap is fine";
  EXPECT_EQ(files_->Read("missing").error().code, ErrorCode::kNotFound);
  fs::create_directories(root_ + "/dir");
  EXPECT_EQ(files_->Read("dir").error().code, ErrorCode::kFailedPrecondition);
}

// ReadBase64: the part Read gives, as its text (vectors by hand), with Read's checks.
TEST_P(FileServiceTest, ReadBase64IsTheTextOfWhatReadGives) {
  ASSERT_TRUE(files_->Write("f", "foobar!"));
  auto whole = files_->ReadBase64("f");
  ASSERT_TRUE(whole) << whole.error().ToString();
  EXPECT_EQ(whole->size, 7u);
  EXPECT_EQ(whole->base64, "Zm9vYmFyIQ==");
  auto part = files_->ReadBase64("f", 1, 4);  // "ooba"
  ASSERT_TRUE(part);
  EXPECT_EQ(part->size, 4u);
  EXPECT_EQ(part->base64, "b29iYQ==");
  auto end = files_->ReadBase64("f", 7);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->size, 0u);
  EXPECT_EQ(end->base64, "");
  EXPECT_EQ(files_->ReadBase64("f", 8).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(files_->Write("big", std::string(2000, 'x')));
  auto big = files_->ReadBase64("big");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(big.error().message, files_->Read("big").error().message);
  EXPECT_EQ(files_->ReadBase64("missing").error().code, ErrorCode::kNotFound);
  fs::create_directories(root_ + "/dir");
  EXPECT_EQ(files_->ReadBase64("dir").error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(files_->ReadBase64("out/secret").error().code, ErrorCode::kPathOutsideRoot);
}

// A file of several 6 MiB pieces and a tail that is not a multiple of 3: the text is the
// whole part's, from the start and from an offset that is not a multiple of 3 either.
TEST_P(FileServiceTest, ReadBase64OfManyPiecesIsTheWholeText) {
  FileService files(*ScopedRoot::Open(root_, GetParam()), 64 << 20);
  std::string plain((13 << 20) + 1, '\0');
  for (size_t i = 0; i < plain.size(); ++i)
    plain[i] = static_cast<char>((i * 2654435761u) >> 13);
  ASSERT_TRUE(files.Write("big.bin", plain));
  auto whole = files.ReadBase64("big.bin");
  ASSERT_TRUE(whole) << whole.error().ToString();
  EXPECT_EQ(whole->size, plain.size());
  EXPECT_TRUE(whole->base64 == Base64Encode(plain));
  auto part = files.ReadBase64("big.bin", 5, 7 << 20);
  ASSERT_TRUE(part);
  EXPECT_EQ(part->size, 7u << 20);
  EXPECT_TRUE(part->base64 == Base64Encode(std::string_view(plain).substr(5, 7 << 20)));
}

TEST_P(FileServiceTest, StatAndListDescribeEntries) {
  ASSERT_TRUE(files_->Write("d/one", "1", "0600"));
  ASSERT_TRUE(files_->Write("d/two", "22"));
  fs::create_directories(root_ + "/d/sub");
  auto st = files_->Stat("/d/two");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->path, "d/two");
  EXPECT_EQ(st->size, 2u);
  EXPECT_EQ(st->mode, "0644");
  EXPECT_FALSE(st->is_dir);
  auto list = files_->List("d");
  ASSERT_TRUE(list) << list.error().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].path, "d/one");
  EXPECT_EQ((*list)[0].mode, "0600");
  EXPECT_EQ((*list)[1].path, "d/sub");
  EXPECT_TRUE((*list)[1].is_dir);
  auto root_list = files_->List("/");
  ASSERT_TRUE(root_list);
  EXPECT_EQ(root_list->size(), 2u) << "d and the symlink out (reported, not followed)";
}

TEST_P(FileServiceTest, ADirectoryWithMoreEntriesThanTheBoundIsRefusedNotCut) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(files_->Write("many/f" + std::to_string(i), "x"));
  auto at_bound = files_->List("many", 5);
  ASSERT_TRUE(at_bound) << at_bound.error().ToString();
  EXPECT_EQ(at_bound->size(), 5u);
  auto over = files_->List("many", 4);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(over.error().message.find("directory 'many' holds more than 4 entries"),
            std::string::npos)
      << over.error().message;
  EXPECT_EQ(FileService::kMaxListEntries, 100000u);
}

TEST_P(FileServiceTest, DeleteNeedsRecursiveForNonEmptyDirsAndNeverTheRoot) {
  ASSERT_TRUE(files_->Write("d/e/f", "x"));
  auto st = files_->Delete("d", false);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message.find("recursive"), std::string::npos);
  ASSERT_TRUE(files_->Delete("d", true));
  EXPECT_FALSE(fs::exists(root_ + "/d"));
  EXPECT_EQ(files_->Delete("/", true).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(files_->Delete("nope", false).error().code, ErrorCode::kNotFound);
  // Deleting the symlink removes the link, never what it points to.
  ASSERT_TRUE(files_->Delete("out", true));
  EXPECT_EQ(Slurp(outside_ + "/secret"), "OUTSIDE");
}

TEST_P(FileServiceTest, MoveAndChmod) {
  ASSERT_TRUE(files_->Write("a", "x"));
  ASSERT_TRUE(files_->Move("a", "dir/b"));
  EXPECT_TRUE(fs::exists(root_ + "/dir/b"));
  EXPECT_FALSE(fs::exists(root_ + "/a"));
  ASSERT_TRUE(files_->Chmod("dir/b", "0600"));
  EXPECT_EQ(Mode(root_ + "/dir/b"), 0600u);
  EXPECT_EQ(files_->Chmod("dir/b", "u+x").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(files_->Move("missing", "x").error().code, ErrorCode::kNotFound);
}

TEST_P(FileServiceTest, NoOperationReachesOutsideTheRoot) {
  const mode_t before = Mode(outside_ + "/secret");
  EXPECT_EQ(files_->Read("out/secret").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Read("../outside/secret").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Write("out/new", "x").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Write("../escape", "x").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Chmod("out/secret", "0777").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Delete("out/secret", false).error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Move("out/secret", "stolen").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->List("out").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Stat("out/secret").error().code, ErrorCode::kPathOutsideRoot);
  ASSERT_TRUE(files_->Write("mine", "x"));
  EXPECT_EQ(files_->Move("mine", "out/mine").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(Slurp(outside_ + "/secret"), "OUTSIDE");
  EXPECT_EQ(Mode(outside_ + "/secret"), before);
  EXPECT_FALSE(fs::exists(outside_ + "/new"));
  EXPECT_FALSE(fs::exists(outside_ + "/mine"));
  EXPECT_FALSE(fs::exists(base_ + "/escape"));
}

TEST_P(FileServiceTest, GlobMatchesBeneathTheRootOnly) {
  ASSERT_TRUE(files_->Write("src/a.c", ""));
  ASSERT_TRUE(files_->Write("src/b.c", ""));
  ASSERT_TRUE(files_->Write("src/c.h", ""));
  ASSERT_TRUE(files_->Write("src/.hidden.c", ""));
  EXPECT_EQ(*files_->Glob("src/*.c"), (std::vector<std::string>{"src/a.c", "src/b.c"}));
  EXPECT_EQ(*files_->Glob("/*/c.h"), (std::vector<std::string>{"src/c.h"}));
  EXPECT_TRUE(files_->Glob("out/*")->empty()) << "symlinked directories are not descended";
  EXPECT_EQ(files_->Glob("../*").error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_EQ(files_->Glob("src/*.c", 1)->size(), 1u);
}

TEST_P(FileServiceTest, ReadRefusesSpecialFilesWithoutOpeningThem) {
  // Opening a FIFO for reading would block until a writer came: Read must not open it.
  ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0600), 0);
  auto r = files_->Read("fifo");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("\"fifo\" is not a regular file"), std::string::npos);
}

TEST_P(FileServiceTest, GlobOnlyDescendsMatchingDirectories) {
  ASSERT_TRUE(files_->Write("src/a/x.c", ""));
  ASSERT_TRUE(files_->Write("src/b/y.c", ""));
  ASSERT_TRUE(files_->Write("lib/a/z.c", ""));
  ASSERT_TRUE(files_->Write(".git/a/w.c", ""));
  EXPECT_EQ(*files_->Glob("src/*/*.c"), (std::vector<std::string>{"src/a/x.c", "src/b/y.c"}));
  EXPECT_EQ(*files_->Glob("*/a/*.c"), (std::vector<std::string>{"lib/a/z.c", "src/a/x.c"}))
      << "hidden directories are matched only by a pattern starting with a dot";
  EXPECT_EQ(*files_->Glob(".*/a/*.c"), (std::vector<std::string>{".git/a/w.c"}));
  EXPECT_EQ(files_->Glob("").error().code, ErrorCode::kInvalidArgument);
}

TEST_P(FileServiceTest, SwappedSymlinkNeverLetsAWriteOrReadOutside) {
  // One thread keeps replacing root/swap between a real directory and a symlink to the
  // outside directory; meanwhile files are written into and read from swap/. Nothing may
  // appear outside and the outside secret may never be returned.
  fs::create_directories(root_ + "/real");
  std::ofstream(root_ + "/real/secret") << "inside";
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    const std::string swap = root_ + "/swap", link = root_ + "/swap.lnk";
    while (!stop) {
      ::symlink(outside_.c_str(), link.c_str());
      ::rename(link.c_str(), swap.c_str());  // swap -> outside
      ::unlink(swap.c_str());
      ::rename((root_ + "/real").c_str(), swap.c_str());  // swap is the real directory
      ::rename(swap.c_str(), (root_ + "/real").c_str());
    }
  });
  int leaks = 0, reads = 0, writes = 0;
  for (int i = 0; i < 3000; ++i) {
    auto r = files_->Read("swap/secret");
    if (r) {
      ++reads;
      if (*r == "OUTSIDE") ++leaks;
    }
    if (files_->Write("swap/w" + std::to_string(i % 50), "x")) ++writes;
    (void)files_->Chmod("swap/secret", "0777");
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(leaks, 0);
  EXPECT_EQ(std::distance(fs::directory_iterator(outside_), fs::directory_iterator()), 1)
      << "only the secret is outside";
  EXPECT_EQ(Mode(outside_ + "/secret"), 0644u);
  EXPECT_GT(reads + writes, 0) << "the race never let a legitimate call through";
}

TEST_P(FileServiceTest, RecursiveDeleteRemovesTreesOfAnyDepth) {
  // Deeper than any fixed recursion limit: a sandbox must not be able to make its
  // workspace undeletable by nesting directories.
  std::string deep = root_ + "/deep";
  for (int i = 0; i < 600; ++i)
    deep += "/d";
  fs::create_directories(deep);
  std::ofstream(deep + "/leaf") << "x";
  fs::create_symlink(outside_, deep + "/out");
  auto st = files_->Delete("deep", true);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_FALSE(fs::exists(root_ + "/deep"));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1)
      << "nothing hoisted is left behind; only the symlink out remains";
  EXPECT_EQ(Slurp(outside_ + "/secret"), "OUTSIDE");
}

TEST_P(FileServiceTest, RecursiveDeleteRemovesDirectoriesWithoutPermissions) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions; run as non-root";
  fs::create_directories(root_ + "/locked/inner");
  std::ofstream(root_ + "/locked/inner/f") << "x";
  ::chmod((root_ + "/locked/inner").c_str(), 0);
  ::chmod((root_ + "/locked").c_str(), 0);
  auto st = files_->Delete("locked", true);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_FALSE(fs::exists(root_ + "/locked"));
}

// file.search (wire.md §5.5): names beneath a directory, breadth first, case-insensitive,
// bounded by the limit and by the number of entries looked at; symlinks never followed.
TEST_P(FileServiceTest, SearchIsBoundedAndNeverFollowsSymlinks) {
  std::ofstream(outside_ + "/match-outside") << "x";
  for (const char* f : {"a/Match-1", "a/b/match-2", "c/MATCH-3", "c/other"}) {
    ASSERT_TRUE(files_->Write(f, "x"));
  }
  auto all = files_->Search("", "match", 100);
  ASSERT_TRUE(all.has_value()) << all.error().ToString();
  std::vector<std::string> paths;
  for (const auto& c : all->candidates)
    paths.push_back(c.path + ":" + c.type);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"a/Match-1:file", "c/MATCH-3:file", "a/b/match-2:file"}))
      << "breadth first; the symlink 'out' leads to match-outside and is not followed";
  EXPECT_FALSE(all->truncated);
  EXPECT_EQ(all->visited, 8u) << "a, c, out, a/Match-1, a/b, c/MATCH-3, c/other, a/b/match-2";

  auto limited = files_->Search("", "match", 2);
  ASSERT_TRUE(limited.has_value());
  EXPECT_EQ(limited->candidates.size(), 2u);
  EXPECT_TRUE(limited->truncated);
  auto exact = files_->Search("", "match", 3);
  ASSERT_TRUE(exact.has_value());
  EXPECT_FALSE(exact->truncated) << "exactly `limit` matches: nothing was left out";

  // The walk stops at its entry cap and says so, even with room for more matches.
  auto capped = files_->Search("", "match", 100, 4);
  ASSERT_TRUE(capped.has_value());
  EXPECT_EQ(capped->visited, 4u);
  EXPECT_TRUE(capped->truncated);
  EXPECT_LT(capped->candidates.size(), 3u);

  auto out = files_->Search("out", "", 10);
  ASSERT_FALSE(out.has_value()) << "a symlink out of the root is not a place to search";
  EXPECT_EQ(out.error().code, ErrorCode::kPathOutsideRoot) << out.error().ToString();
  auto up = files_->Search("a/../..", "", 10);
  ASSERT_FALSE(up.has_value());
  EXPECT_EQ(up.error().code, ErrorCode::kPathOutsideRoot);
  auto file = files_->Search("c/other", "", 10);
  ASSERT_FALSE(file.has_value());
  EXPECT_EQ(file.error().code, ErrorCode::kFailedPrecondition) << file.error().ToString();
}

INSTANTIATE_TEST_SUITE_P(Resolvers, FileServiceTest,
                         ::testing::Values(ResolveMode::kOpenat2, ResolveMode::kWalk),
                         [](const auto& info) {
                           return info.param == ResolveMode::kOpenat2 ? "openat2" : "walk";
                         });

}  // namespace
}  // namespace edge::sandbox
