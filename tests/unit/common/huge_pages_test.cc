// AdviseHugePages / ReserveLarge: a large buffer's range is marked for huge pages (the `hg`
// flag in /proc/self/smaps, set by MADV_HUGEPAGE), a small one is left alone.
#include "common/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "common/string_fill.h"

namespace edge {
namespace {

bool KernelHasThp() {
  return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

// The VmFlags of the mapping that holds `p` ("" when none does).
std::string VmFlagsAt(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find(':') > space) {  // a mapping's first line: "start-end perms …"
      const uintptr_t begin = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = begin <= addr && addr < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

bool Advised(const void* p) {
  return VmFlagsAt(p).find(" hg ") != std::string::npos;
}

class HugePagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!KernelHasThp()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
};

TEST_F(HugePagesTest, ALargeMappingIsAdvisedInsideItsWholeHugePages) {
  const size_t size = 16u << 20;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_FALSE(Advised(static_cast<char*>(p) + (8u << 20))) << "not advised before the call";
  EXPECT_TRUE(AdviseHugePages(p, size));
  EXPECT_TRUE(Advised(static_cast<char*>(p) + (8u << 20))) << VmFlagsAt(p);
  ::munmap(p, size);
}

TEST_F(HugePagesTest, ASmallBufferOrNoneIsLeftAlone) {
  const size_t size = 16u << 20;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_FALSE(AdviseHugePages(p, kHugePageAdviceMinBytes - 1)) << "under the threshold";
  EXPECT_FALSE(Advised(static_cast<char*>(p) + (4u << 20))) << VmFlagsAt(p);
  EXPECT_FALSE(AdviseHugePages(nullptr, size));
  ::munmap(p, size);
}

TEST_F(HugePagesTest, ReserveLargeAndResizeAndOverwriteAdviseTheBufferTheyAllocate) {
  std::string reserved;
  ReserveLarge(reserved, 32u << 20);
  ASSERT_GE(reserved.capacity(), 32u << 20);
  EXPECT_TRUE(Advised(reserved.data() + (16u << 20))) << VmFlagsAt(reserved.data());

  std::string filled;
  ResizeAndOverwrite(filled, 32u << 20, [](char* p) {
    for (size_t i = 0; i < (32u << 20); i += 4096)
      p[i] = 'x';
    return size_t{32} << 20;
  });
  EXPECT_EQ(filled.size(), 32u << 20);
  EXPECT_EQ(filled[4096], 'x');
  EXPECT_TRUE(Advised(filled.data() + (16u << 20))) << VmFlagsAt(filled.data());

  std::string small;
  ReserveLarge(small, 1u << 20);
  EXPECT_FALSE(Advised(small.data())) << "a 1 MiB buffer keeps small pages";
}

}  // namespace
}  // namespace edge
