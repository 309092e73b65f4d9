// memory_trim.h: which environment sets malloc's arena limit itself (the agent's own limit
// then stays out of the way), that a trim under its threshold does nothing, which mappings of
// a /proc/PID/smaps text may be released (written by hand, as Linux prints them), and that a
// release takes a file's pages out of the process's resident set.
#include "agent/daemon/memory_trim.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace edge::daemon {
namespace {

TEST(MemoryTrimTest, OnlyAnArenaSettingInTheEnvironmentWins) {
  EXPECT_FALSE(ArenaLimitSetByEnvironment(nullptr, nullptr));
  EXPECT_TRUE(ArenaLimitSetByEnvironment("4", nullptr));
  EXPECT_TRUE(ArenaLimitSetByEnvironment(nullptr, "glibc.malloc.arena_max=4"));
  EXPECT_TRUE(ArenaLimitSetByEnvironment(nullptr, "glibc.pthread.rseq=0:glibc.malloc.arena_max=1"));
  EXPECT_FALSE(ArenaLimitSetByEnvironment(nullptr, "glibc.pthread.rseq=0"))
      << "a runtime's unrelated tunable must not switch the limit off";
  EXPECT_FALSE(ArenaLimitSetByEnvironment(nullptr, ""));
}

TEST(MemoryTrimTest, NothingIsTrimmedUnderTheThreshold) {
  EXPECT_EQ(TrimFreeMemory(~size_t{0}), 0u);
}

// A mapping of a /proc/PID/smaps text as Linux prints it, with the fields that matter here.
std::string Smaps(const std::string& header, int anonymous_kb) {
  return header + "\nSize:               1024 kB\nRss:                 512 kB\n" +
         "Anonymous:         " + std::to_string(anonymous_kb) + " kB\n" + "VmFlags: rd mr mw me\n";
}

TEST(MemoryTrimTest, OnlyReadOnlyFileMappingsWithNoAnonymousPageAreReleasable) {
  const std::string smaps =
      Smaps("55d09dfd5000-55d09e065000 r--p 00000000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      Smaps("55d09e065000-55d09eafc000 r-xp 00090000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      // RELRO: read-only now, but written by the loader: its pages are anonymous copies.
      Smaps("55d09ee1d000-55d09ee4e000 r--p 00e47000 fe:00 5374769    /usr/bin/edge-agent", 196) +
      Smaps("55d09ee4e000-55d09ee56000 rw-p 00e78000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      Smaps("55d0bdf2a000-55d0be14c000 rw-p 00000000 00:00 0          [heap]", 2048) +
      Smaps("7f8458000000-7f84580dc000 rwxp 00000000 00:00 0 ", 868) +
      Smaps("7f8460000000-7f8460010000 r-xp 00000000 00:00 0 ", 0) +
      Smaps("7f8461000000-7f8461200000 r-xp 00028000 fe:00 131      /usr/lib/libc.so.6", 0) +
      Smaps("7f8462000000-7f8462001000 r--s 00000000 fe:00 77       /opt/shared data (deleted)",
            0) +
      Smaps("7f8463000000-7f8463004000 rwxp 00000000 fe:00 78       /opt/jit.bin", 0) +
      Smaps("7f8464000000-7f8464001000 ---p 00000000 fe:00 79       /usr/lib/libx.so", 0) +
      Smaps("7ffd2b5f9000-7ffd2b5fb000 r-xp 00000000 00:00 0        [vdso]", 0) +
      Smaps("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]", 0) +
      "not a mapping at all\n" + Smaps("7f84-zz r-xp 00000000 fe:00 1 /bad/range", 0) +
      Smaps("7f8470000000-7f8460000000 r-xp 00000000 fe:00 1 /bad/backwards", 0) +
      Smaps("7f8480000000-7f8480001000 r-x 00000000 fe:00 1 /bad/perms", 0) +
      // No Anonymous line (a maps text, or a kernel that prints none): not known to be pure.
      "7f8490000000-7f8490001000 r-xp 00000000 fe:00 1 /no/fields\n" +
      "7f84a0000000-7f84a0001000 r-xp 00000000 fe:00 1 /usr/lib/cut-short.so\nAnonymous:  0 kB";
  auto got = ReleasableFileMappings(smaps);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].start, 0x55d09dfd5000u);
  EXPECT_EQ(got[0].end, 0x55d09e065000u);
  EXPECT_EQ(got[0].path, "/usr/bin/edge-agent");
  EXPECT_EQ(got[1].start, 0x55d09e065000u) << "the code";
  EXPECT_EQ(got[2].path, "/usr/lib/libc.so.6")
      << "a shared library is asked too: the kernel leaves the pages other processes map";
  EXPECT_EQ(got[3].path, "/opt/shared data (deleted)") << "a path with spaces, kept whole";
  EXPECT_EQ(got[4].path, "/usr/lib/cut-short.so") << "the last mapping, without a newline";
  EXPECT_TRUE(ReleasableFileMappings("").empty());
}

// Resident KiB of the mapping that starts at `start`, from /proc/self/smaps (-1: not found).
long ResidentKib(uintptr_t start) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(in, line)) {
    uintptr_t a = 0, b = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &a, &b, perms) == 3) {  // a mapping's header
      in_mapping = a == start;
      continue;
    }
    long kib = 0;
    if (in_mapping && std::sscanf(line.c_str(), "Rss: %ld kB", &kib) == 1) return kib;
  }
  return -1;
}

TEST(MemoryTrimTest, AReleaseTakesAFilesPagesOutOfTheResidentSet) {
  // A file of our own next to the test binary (a disk file system, where the build is; a
  // tmpfs page has nowhere to go without swap), mapped read-only, every page touched.
  const auto dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir.c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir << " is a tmpfs: nothing to page out to";
  const auto path = dir / ("release-test-" + std::to_string(::getpid()) + ".bin");
  constexpr size_t kSize = 4 << 20;
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(kSize, 'x');
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* p = ::mmap(nullptr, kSize, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  std::filesystem::remove(path);
  ASSERT_NE(p, MAP_FAILED);
  const auto* bytes = static_cast<const unsigned char*>(p);
  volatile unsigned sum = 0;
  for (size_t i = 0; i < kSize; i += 4096)
    sum = sum + bytes[i];
  const auto start = reinterpret_cast<uintptr_t>(p);
  const long before = ResidentKib(start);
  ASSERT_GE(before, 4000) << "every page touched";

  // The process's own release (/proc/self/smaps): the mapping qualifies and is released.
  auto released = ReleaseFilePages();
  if (!released && released.error().code == ErrorCode::kFailedPrecondition) {
    ::munmap(p, kSize);
    GTEST_SKIP() << released.error().message;
  }
  ASSERT_TRUE(released.has_value()) << released.error().message;
  EXPECT_GE(released->mappings, 2u) << "the test binary's code and this file at least";
  EXPECT_GE(released->bytes, kSize);
  const long after = ResidentKib(start);
  EXPECT_LT(after, before / 4) << "resident before " << before << " KiB, after " << after;
  // The contents come back from the file when read again.
  EXPECT_EQ(bytes[kSize - 1], 'x');
  EXPECT_GE(ResidentKib(start), 4) << "read again: resident again";
  ::munmap(p, kSize);
}

TEST(MemoryTrimTest, AMappingGoneSinceTheListWasReadIsSkipped) {
  void* p = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  ::munmap(p, 1 << 16);
  const auto start = reinterpret_cast<uintptr_t>(p);
  auto released = ReleaseFilePages({{start, start + (1 << 16), "/gone"}});
  if (!released && released.error().code == ErrorCode::kFailedPrecondition) {
    GTEST_SKIP() << released.error().message;
  }
  ASSERT_TRUE(released.has_value()) << released.error().message;
  EXPECT_EQ(released->mappings, 0u);
}

}  // namespace
}  // namespace edge::daemon
