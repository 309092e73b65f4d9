// memory_trim.h: which environment sets malloc's arena limit itself (the agent's own limit
// then stays out of the way), that a trim under its threshold does nothing, which mappings of
// a /proc/PID/maps text hold releasable code (lines written by hand, as Linux prints them),
// and that a release takes a file's code pages out of the process's resident set.
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

TEST(MemoryTrimTest, OnlyExecutableReadOnlyFileMappingsHoldReleasableCode) {
  const std::string maps =
      "55d09dfd5000-55d09e065000 r--p 00000000 fe:00 5374769    /usr/bin/edge-agent\n"
      "55d09e065000-55d09eafc000 r-xp 00090000 fe:00 5374769    /usr/bin/edge-agent\n"
      "55d09ee4e000-55d09ee56000 rw-p 00e78000 fe:00 5374769    /usr/bin/edge-agent\n"
      "55d0bdf2a000-55d0be14c000 rw-p 00000000 00:00 0          [heap]\n"
      "7f8458000000-7f84580dc000 rwxp 00000000 00:00 0 \n"
      "7f8460000000-7f8460010000 r-xp 00000000 00:00 0 \n"
      "7f8461000000-7f8461200000 r-xp 00028000 fe:00 131      /usr/lib/libc.so.6\n"
      "7f8462000000-7f8462001000 r-xs 00000000 fe:00 77       /opt/shared code (deleted)\n"
      "7f8463000000-7f8463004000 rwxp 00000000 fe:00 78       /opt/jit.bin\n"
      "7ffd2b5f9000-7ffd2b5fb000 r-xp 00000000 00:00 0        [vdso]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n"
      "not a mapping at all\n"
      "7f84-zz r-xp 00000000 fe:00 1 /bad/range\n"
      "7f8470000000-7f8460000000 r-xp 00000000 fe:00 1 /bad/backwards\n"
      "7f8480000000-7f8480001000 r-x 00000000 fe:00 1 /bad/perms\n"
      "7f8490000000-7f8490001000 r-xp";  // cut short: no path, no newline
  auto got = ReleasableCodeMappings(maps);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].start, 0x55d09e065000u);
  EXPECT_EQ(got[0].end, 0x55d09eafc000u);
  EXPECT_EQ(got[0].path, "/usr/bin/edge-agent");
  EXPECT_EQ(got[1].path, "/usr/lib/libc.so.6")
      << "a shared library is asked too: the kernel leaves the pages other processes map";
  EXPECT_EQ(got[2].path, "/opt/shared code (deleted)") << "a path with spaces, kept whole";
  EXPECT_TRUE(ReleasableCodeMappings("").empty());
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

TEST(MemoryTrimTest, AReleaseTakesAFilesCodePagesOutOfTheResidentSet) {
  // A file of our own next to the test binary (a disk file system, where the build is; a
  // tmpfs page has nowhere to go without swap), mapped as code and every page touched.
  const auto dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir.c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir << " is a tmpfs: nothing to page out to";
  const auto path = dir / ("release-test-" + std::to_string(::getpid()) + ".bin");
  constexpr size_t kSize = 4 << 20;
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(kSize, '\xc3');  // ret
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  ::close(fd);
  std::filesystem::remove(path);
  if (p == MAP_FAILED) GTEST_SKIP() << dir << " does not allow code mappings (noexec)";
  volatile unsigned sum = 0;
  for (size_t i = 0; i < kSize; i += 4096)
    sum = sum + static_cast<const unsigned char*>(p)[i];
  const auto start = reinterpret_cast<uintptr_t>(p);
  const long before = ResidentKib(start);
  ASSERT_GE(before, 4000) << "every page touched";

  auto released = ReleaseCodePages({{start, start + kSize, path.string()}});
  if (!released && released.error().code == ErrorCode::kFailedPrecondition) {
    ::munmap(p, kSize);
    GTEST_SKIP() << released.error().message;
  }
  ASSERT_TRUE(released.has_value()) << released.error().message;
  EXPECT_EQ(released->mappings, 1u);
  EXPECT_EQ(released->bytes, kSize);
  const long after = ResidentKib(start);
  EXPECT_LT(after, before / 4) << "resident before " << before << " KiB, after " << after;
  // The contents come back from the file when read again.
  EXPECT_EQ(static_cast<const unsigned char*>(p)[kSize - 1], 0xc3);
  ::munmap(p, kSize);

  // This process's own code: the test binary is among the mappings, and the call succeeds.
  auto own = ReleaseCodePages();
  ASSERT_TRUE(own.has_value()) << own.error().message;
  EXPECT_GE(own->mappings, 1u);
}

TEST(MemoryTrimTest, AMappingGoneSinceTheListWasReadIsSkipped) {
  void* p = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  ::munmap(p, 1 << 16);
  const auto start = reinterpret_cast<uintptr_t>(p);
  auto released = ReleaseCodePages({{start, start + (1 << 16), "/gone"}});
  if (!released && released.error().code == ErrorCode::kFailedPrecondition) {
    GTEST_SKIP() << released.error().message;
  }
  ASSERT_TRUE(released.has_value()) << released.error().message;
  EXPECT_EQ(released->mappings, 0u);
}

}  // namespace
}  // namespace edge::daemon
