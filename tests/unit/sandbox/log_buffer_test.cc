#include "sandbox/log_buffer.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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

TEST_F(LogBufferTest, RejectsBadBoundsAndPaths) {
  auto zero = LogBuffer::Open(path_, {.max_lines = 0});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(zero.error().message.find("max_lines (0)"), std::string::npos);

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
