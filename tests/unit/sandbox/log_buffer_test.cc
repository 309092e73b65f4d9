#include "sandbox/log_buffer.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using Lines = std::vector<std::string>;

class LogBufferTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = dir_ + "/console.log"; }
  std::unique_ptr<LogBuffer> Open(LogBuffer::Options options) {
    auto buf = LogBuffer::Open(path_, options);
    EXPECT_TRUE(buf) << buf.error().ToString();
    return buf ? std::move(*buf) : nullptr;
  }
  std::string FileText() {
    std::stringstream ss;
    ss << std::ifstream(path_).rdbuf();
    return ss.str();
  }
  edge::testing::TempDir tmp_{"logbuf"};
  std::string dir_ = tmp_.path(), path_;
};

TEST_F(LogBufferTest, SplitsLinesAndHoldsThePartialOne) {
  auto buf = Open({});
  ASSERT_TRUE(buf->Append("one\ntw"));
  EXPECT_EQ(buf->Tail(10), (Lines{"one"}));
  ASSERT_TRUE(buf->Append("o\n\nthree"));
  EXPECT_EQ(buf->Tail(10), (Lines{"one", "two", ""}));
  EXPECT_EQ(buf->Tail(2), (Lines{"two", ""}));
  EXPECT_EQ(buf->Tail(0), Lines{});
  buf->FlushPartial();
  EXPECT_EQ(buf->Tail(1), (Lines{"three"}));
  // The file has every byte, in order, as written.
  EXPECT_EQ(FileText(), "one\ntwo\n\nthree");
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(LogBufferTest, RingIsBoundedByLines) {
  auto buf = Open({.max_lines = 3, .max_bytes = 1000, .max_line_bytes = 100});
  ASSERT_TRUE(buf->Append("1\n2\n3\n4\n5\n"));
  EXPECT_EQ(buf->line_count(), 3u);
  EXPECT_EQ(buf->Tail(10), (Lines{"3", "4", "5"}));
  EXPECT_EQ(FileText(), "1\n2\n3\n4\n5\n");  // the file is not bounded by the ring
}

TEST_F(LogBufferTest, RingIsBoundedByBytes) {
  auto buf = Open({.max_lines = 100, .max_bytes = 10, .max_line_bytes = 10});
  ASSERT_TRUE(buf->Append("aaaa\nbbbb\ncccc\n"));
  EXPECT_EQ(buf->Tail(10), (Lines{"bbbb", "cccc"}));
  EXPECT_EQ(buf->byte_count(), 8u);
  ASSERT_TRUE(buf->Append("dddddddddd\n"));  // exactly max_bytes: everything else goes
  EXPECT_EQ(buf->Tail(10), (Lines{"dddddddddd"}));
  EXPECT_EQ(buf->byte_count(), 10u);
}

TEST_F(LogBufferTest, OverlongLinesAreCut) {
  auto buf = Open({.max_lines = 100, .max_bytes = 100, .max_line_bytes = 4});
  ASSERT_TRUE(buf->Append("abcdefghij"));
  EXPECT_EQ(buf->Tail(10), (Lines{"abcd", "efgh"}));  // "ij" is still held
  ASSERT_TRUE(buf->Append("\nxy\n"));
  EXPECT_EQ(buf->Tail(10), (Lines{"abcd", "efgh", "ij", "xy"}));
}

TEST_F(LogBufferTest, ReopenSeedsTheRingFromTheFile) {
  {
    auto buf = Open({});
    ASSERT_TRUE(buf->Append("first\nsecond\npart"));
  }
  auto buf = Open({.max_lines = 10, .max_bytes = 13, .max_line_bytes = 13});
  // Only the last max_bytes of the file are read; a fragment at their start is dropped.
  EXPECT_EQ(buf->Tail(10), (Lines{"second"}));
  ASSERT_TRUE(buf->Append("ial\n"));
  EXPECT_EQ(buf->Tail(10), (Lines{"second", "partial"}));
  EXPECT_EQ(FileText(), "first\nsecond\npartial\n");
}

std::string ReadFile(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

TEST_F(LogBufferTest, TheFileRotatesBeforeAnAppendWouldTakeItPastItsBound) {
  auto buf = Open({.max_file_bytes = 10});
  ASSERT_TRUE(buf->Append("aaaa\n"));
  ASSERT_TRUE(buf->Append("bbbb\n"));  // exactly 10: still one file
  EXPECT_EQ(FileText(), "aaaa\nbbbb\n");
  EXPECT_FALSE(fs::exists(path_ + ".1"));
  ASSERT_TRUE(buf->Append("cc\n"));
  EXPECT_EQ(ReadFile(path_ + ".1"), "aaaa\nbbbb\n");
  EXPECT_EQ(FileText(), "cc\n");
  // Larger than the bound: whole files of it, and only the last two stay.
  ASSERT_TRUE(buf->Append("0123456789abcdefghijklmn\n"));
  EXPECT_EQ(ReadFile(path_ + ".1"), "abcdefghij");
  EXPECT_EQ(FileText(), "klmn\n");
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((path_ + ".1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The ring is not touched by the rotation.
  EXPECT_EQ(buf->Tail(10), (Lines{"aaaa", "bbbb", "cc", "0123456789abcdefghijklmn"}));
}

TEST_F(LogBufferTest, AFileLeftLargerByAnOlderReleaseRotatesAtTheNextAppend) {
  {
    auto buf = Open({});
    ASSERT_TRUE(buf->Append(std::string(100, 'x') + "\n"));
  }
  auto buf = Open({.max_file_bytes = 50});
  ASSERT_TRUE(buf->Append("y\n"));
  EXPECT_EQ(ReadFile(path_ + ".1").size(), 101u);
  EXPECT_EQ(FileText(), "y\n");
}

TEST_F(LogBufferTest, ReopenSeedsTheRingAcrossTheRotatedFile) {
  {
    auto buf = Open({.max_file_bytes = 8});
    ASSERT_TRUE(buf->Append("one\ntwo\n"));
    ASSERT_TRUE(buf->Append("thr"));
    ASSERT_TRUE(buf->Append("ee\n"));  // 3 + 3 = 6: "thr" and "ee\n" share the new file
    EXPECT_EQ(ReadFile(path_ + ".1"), "one\ntwo\n");
    EXPECT_EQ(FileText(), "three\n");
  }
  EXPECT_EQ(Open({})->Tail(10), (Lines{"one", "two", "three"}));
  // max_bytes 10: the last 11 bytes of both ("\ntwo\nthree\n"), the fragment before the first
  // newline dropped.
  EXPECT_EQ(Open({.max_lines = 10, .max_bytes = 10, .max_line_bytes = 10})->Tail(10),
            (Lines{"two", "three"}));
  // A line cut by a rotation is whole again.
  {
    auto buf = Open({.max_file_bytes = 9});
    ASSERT_TRUE(buf->Append("par"));
    ASSERT_TRUE(buf->Append("tial\n"));
    EXPECT_EQ(ReadFile(path_ + ".1"), "three\npar");
  }
  EXPECT_EQ(Open({})->Tail(2), (Lines{"three", "partial"}));
}

TEST_F(LogBufferTest, AFailedRotationSaysWhyAndTheFileStaysWithinItsBound) {
  fs::create_directories(path_ + ".1/in-the-way");
  auto buf = Open({.max_file_bytes = 8});
  ASSERT_TRUE(buf->Append("12345\n"));
  auto st = buf->Append("6789\n");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("console.log.1"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("rotating"), std::string::npos) << st.error().message;
  EXPECT_EQ(FileText(), "12345\n") << "nothing written past the bound";
  EXPECT_EQ(buf->Tail(10), (Lines{"12345", "6789"})) << "the ring has the lines either way";
  // Once the way is clear, the log goes on.
  fs::remove_all(path_ + ".1");
  ASSERT_TRUE(buf->Append("abc\n"));
  EXPECT_EQ(ReadFile(path_ + ".1"), "12345\n");
  EXPECT_EQ(FileText(), "abc\n");
}

// The current file read whole from its start: whether its first line is whole depends on the
// rotated file's last byte (a rotation can fall inside a line).
TEST_F(LogBufferTest, ASeedThatStartsTheCurrentFileAsksTheRotatedFileForItsLastByte) {
  const LogBuffer::Options opt{.max_lines = 10, .max_bytes = 9, .max_line_bytes = 9};
  std::ofstream(path_) << "ment\nwxyz\n";  // exactly max_bytes + 1
  std::ofstream(path_ + ".1") << "aaa\nfrag";
  EXPECT_EQ(Open(opt)->Tail(10), (Lines{"wxyz"})) << "\"ment\" ends the line \"fragment\"";
  std::ofstream(path_ + ".1") << "aaa\nbbb\n";
  EXPECT_EQ(Open(opt)->Tail(10), (Lines{"ment", "wxyz"})) << "\"ment\" is a whole line";
}

TEST_F(LogBufferTest, ARotatedFileThatIsNoRegularFileIsIgnoredWithoutWaiting) {
  ASSERT_EQ(::mkfifo((path_ + ".1").c_str(), 0600), 0);  // a blocking open would hang here
  std::ofstream(path_) << "one\n";
  EXPECT_EQ(Open({})->Tail(10), (Lines{"one"}));
}

// With no current file to rotate (removed from outside, or a new file that could not be
// made), the next rotation only begins a new file: the last rotated one stays.
TEST_F(LogBufferTest, ARotationWithoutACurrentFileKeepsTheLastRotatedOne) {
  auto buf = Open({.max_file_bytes = 8});
  ASSERT_TRUE(buf->Append("1234567\n"));
  ASSERT_TRUE(buf->Append("abc\n"));
  ASSERT_EQ(ReadFile(path_ + ".1"), "1234567\n");
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  ASSERT_TRUE(buf->Append("defgh\n"));
  EXPECT_EQ(ReadFile(path_ + ".1"), "1234567\n");
  EXPECT_EQ(FileText(), "defgh\n");
}

// A buffer a dying command still holds after its sandbox was destroyed must not rotate the
// log of a new sandbox of the same id.
TEST_F(LogBufferTest, OnceItsDirectoryIsGoneTheBufferNeverTouchesItsSuccessor) {
  const std::string dir = dir_ + "/sandbox";
  fs::create_directories(dir);
  auto old = LogBuffer::Open(dir + "/console.log", {.max_file_bytes = 8});
  ASSERT_TRUE(old);
  ASSERT_TRUE((*old)->Append("1234567\n"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/console.log") << "new\n";
  auto st = (*old)->Append("abc\n");
  EXPECT_FALSE(st) << "no file to rotate to in a removed directory";
  EXPECT_EQ(ReadFile(dir + "/console.log"), "new\n");
  EXPECT_FALSE(fs::exists(dir + "/console.log.1"));
}

// A chunk of more than max_lines lines skips what its last lines push out anyway; the ring
// must end exactly as when the same bytes arrive a few at a time.
TEST_F(LogBufferTest, ALargeChunkLeavesTheRingAsSmallPiecesWould) {
  const LogBuffer::Options opt{.max_lines = 7, .max_bytes = 40, .max_line_bytes = 5};
  auto whole = LogBuffer::Open(dir_ + "/whole.log", opt);
  auto pieces = LogBuffer::Open(dir_ + "/pieces.log", opt);
  ASSERT_TRUE(whole && pieces);
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string chunk;
    const int len = static_cast<int>(rng() % 120);
    for (int i = 0; i < len; ++i)
      chunk += rng() % 4 == 0 ? '\n' : static_cast<char>('a' + rng() % 26);
    ASSERT_TRUE((*whole)->Append(chunk));
    for (size_t i = 0; i < chunk.size(); i += 3)
      ASSERT_TRUE((*pieces)->Append(std::string_view(chunk).substr(i, 3)));
    ASSERT_EQ((*whole)->Tail(100), (*pieces)->Tail(100)) << "round " << round << ": " << chunk;
    ASSERT_EQ((*whole)->byte_count(), (*pieces)->byte_count()) << "round " << round;
  }
  (*whole)->FlushPartial();
  (*pieces)->FlushPartial();
  EXPECT_EQ((*whole)->Tail(100), (*pieces)->Tail(100)) << "the held partial line too";
}

TEST_F(LogBufferTest, RejectsBadBoundsAndPaths) {
  auto zero = LogBuffer::Open(path_, {.max_lines = 0});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(zero.error().message.find("max_lines (0)"), std::string::npos);
  auto no_file = LogBuffer::Open(path_, {.max_file_bytes = 0});
  ASSERT_FALSE(no_file);
  EXPECT_NE(no_file.error().message.find("max_file_bytes (0)"), std::string::npos);

  auto missing = LogBuffer::Open(dir_ + "/no/such/console.log");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("no/such/console.log"), std::string::npos);

  fs::create_symlink("/etc/passwd", dir_ + "/link.log");
  auto link = LogBuffer::Open(dir_ + "/link.log");
  ASSERT_FALSE(link);
  EXPECT_EQ(link.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(link.error().message.find("link.log"), std::string::npos);
}

TEST_F(LogBufferTest, ConcurrentAppendsKeepLinesWhole) {
  auto buf = Open({.max_lines = 10000, .max_bytes = 1u << 20, .max_line_bytes = 1024});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i)
        ASSERT_TRUE(
            buf->Append("thread-" + std::to_string(t) + "-line-" + std::to_string(i) + "\n"));
    });
  }
  for (auto& th : threads)
    th.join();
  auto lines = buf->Tail(100000);
  ASSERT_EQ(lines.size(), 800u);
  for (const auto& l : lines)
    EXPECT_EQ(l.rfind("thread-", 0), 0u) << l;
  const std::string text = FileText();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 800);
}

}  // namespace
}  // namespace edge::sandbox
