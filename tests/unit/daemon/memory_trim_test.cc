// memory_trim.h: which environment sets malloc's arena limit itself (the agent's own limit
// then stays out of the way), that a trim under its threshold does nothing, which mappings of
// a /proc/PID/smaps text may be released (written by hand, as Linux prints them), that a
// release takes the pages of the executable and its libraries out of the process's resident
// set, unchanged, and that a library loaded while it runs stops it.
#include "agent/daemon/memory_trim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/atomic_file.h"

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
std::string Smaps(const std::string& header, int anonymous_kb, int swap_kb = 0) {
  return header + "\nSize:               1024 kB\nRss:                 512 kB\n" +
         "Anonymous:         " + std::to_string(anonymous_kb) + " kB\n" +
         "Swap:              " + std::to_string(swap_kb) + " kB\n" + "VmFlags: rd mr mw me\n";
}

TEST(MemoryTrimTest, OnlyReadOnlyMappingsOfTheListedFilesHoldingCopiesAreReleasable) {
  // An address in the executable's code: the file is fe:00 5374769, as smaps names it.
  const uintptr_t exe = 0x55d09e065100;
  const std::string smaps =
      Smaps("55d09dfd5000-55d09e065000 r--p 00000000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      Smaps("55d09e065000-55d09eafc000 r-xp 00090000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      // .rodata after a package upgrade replaced the file: the same inode, a new name.
      Smaps(
          "55d09eafc000-55d09ee1d000 r--p 00b27000 fe:00 5374769    /usr/bin/edge-agent "
          "(deleted)",
          0) +
      // RELRO: read-only now, but written by the loader: its pages are the process's own...
      Smaps("55d09ee1d000-55d09ee4e000 r--p 00e47000 fe:00 5374769    /usr/bin/edge-agent", 196) +
      // ...also once they are swapped out.
      Smaps("55d09ee4e000-55d09ee50000 r--p 00e78000 fe:00 5374769    /usr/bin/edge-agent", 0, 8) +
      Smaps("55d09ee50000-55d09ee56000 rw-p 00e7a000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      Smaps("55d09ee56000-55d09ee57000 ---p 00e80000 fe:00 5374769    /usr/bin/edge-agent", 0) +
      Smaps("55d0bdf2a000-55d0be14c000 rw-p 00000000 00:00 0          [heap]", 2048) +
      Smaps("7f8460000000-7f8460010000 r-xp 00000000 00:00 0 ", 0) +
      // Another file: a library, the same inode on another device, another inode.
      Smaps("7f8461000000-7f8461200000 r-xp 00028000 fe:00 131      /usr/lib/libc.so.6", 0) +
      Smaps("7f8462000000-7f8462001000 r-xp 00000000 fe:01 5374769  /mnt/edge-agent", 0) +
      Smaps("7f8463000000-7f8463001000 r-xp 00000000 fe:00 5374770  /usr/bin/edge-agent2", 0) +
      Smaps("7ffd2b5f9000-7ffd2b5fb000 r-xp 00000000 00:00 0        [vdso]", 0) +
      "not a mapping at all\n" +
      // A header that does not parse ends the mapping before it: this Anonymous line of 0 kB
      // is not taken as the previous mapping's (that one has 196 kB).
      Smaps("55d09ee1d000-55d09ee4e000 r--p 00e47000 fe:00 5374769    /usr/bin/edge-agent", 196) +
      Smaps("7f84-zz r-xp 00000000 fe:00 5374769 /usr/bin/edge-agent", 0) +
      Smaps("7f8470000000-7f8460000000 r-xp 00000000 fe:00 5374769 /usr/bin/edge-agent", 0) +
      Smaps("7f8480000000-7f8480001000 r-xp 00000000 fe00 5374769 /usr/bin/edge-agent", 0) +
      // No Anonymous or Swap line: not known to hold only copies.
      "7f8490000000-7f8490001000 r-xp 00000000 fe:00 5374769 /usr/bin/edge-agent\n" +
      "Anonymous:   0 kB\n" +
      // The last mapping, without a newline at the end.
      "7f84a0000000-7f84a0002000 r-xp 00000000 fe:00 5374769 /usr/bin/edge-agent\nRss: 8 kB\n"
      "Anonymous:   0 kB\nSwap:  0 kB";
  auto got = ReleasableMappings(smaps, {exe});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].start, 0x55d09dfd5000u);
  EXPECT_EQ(got[0].end, 0x55d09e065000u);
  EXPECT_EQ(got[0].resident_bytes, 512u * 1024);
  EXPECT_EQ(got[1].start, 0x55d09e065000u) << "the code";
  EXPECT_EQ(got[2].start, 0x55d09eafc000u) << "the file by its inode, not by its name";
  EXPECT_EQ(got[3].start, 0x7f84a0000000u);
  EXPECT_EQ(got[3].resident_bytes, 8u * 1024);
  EXPECT_TRUE(ReleasableMappings("", {exe}).empty());
  EXPECT_TRUE(ReleasableMappings(smaps, {}).empty());
  EXPECT_TRUE(ReleasableMappings(smaps, {0x1000}).empty()) << "nothing mapped there";
  EXPECT_TRUE(ReleasableMappings(smaps, {0x7f8460000100}).empty()) << "anonymous memory there";
  EXPECT_TRUE(ReleasableMappings(smaps, {0x7ffd2b5f9100}).empty()) << "the vdso: no file";
  EXPECT_EQ(ReleasableMappings(smaps, {0x7f8461000100}).size(), 1u) << "libc's one mapping";

  // Several files: each mapping once, in the order of the text, whatever the addresses' order.
  got = ReleasableMappings(smaps, {0x7f8461000100, 0x1000, exe, 0x55d09e065200, 0x7f8463000000});
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].start, 0x55d09dfd5000u);
  EXPECT_EQ(got[3].start, 0x7f8461000000u) << "libc";
  EXPECT_EQ(got[4].start, 0x7f8463000000u) << "the other inode on the same device";
  EXPECT_EQ(got[5].start, 0x7f84a0000000u);
}

TEST(MemoryTrimTest, TheTracerPidOfAStatusText) {
  EXPECT_EQ(TracerPid("Name:\tedge-agent\nState:\tS (sleeping)\nTracerPid:\t0\nUid:\t0\n"), 0);
  EXPECT_EQ(TracerPid("Name:\tedge-agent\nTracerPid:\t4242\nUid:\t0\n"), 4242);
  EXPECT_EQ(TracerPid("Name:\tedge-agent\nTracerPid:\t31"), 31) << "the last line";
  EXPECT_EQ(TracerPid("Name:\tedge-agent\n"), 0);
  EXPECT_EQ(TracerPid("Name:\tedge-agent\nTracerPid:\tnot-a-pid\n"), 0);
}

// What of the releasable mappings of the files mapped at `addresses` is resident now: the
// mappings as they are listed, and their Rss summed.
std::vector<FileMapping> ReleasableNow(const std::vector<uintptr_t>& addresses,
                                       uint64_t* resident_bytes) {
  auto text = ReadFile("/proc/self/smaps");
  EXPECT_TRUE(text.has_value()) << text.error().message;
  auto mappings = ReleasableMappings(text.value_or(""), addresses);
  *resident_bytes = 0;
  for (const auto& m : mappings)
    *resident_bytes += m.resident_bytes;
  return mappings;
}

// What the test binary keeps in its read-only data, to read again after the release.
const char kConstant[] = "the same bytes before and after a release";

// 4 MiB of the test binary's read-only data, read by nothing but TouchLargeConstant: after a
// release none of the pages checked is mapped until the next touch. A read fault maps more
// than its page: 64 KiB around it (fault-around), and on kernels whose page cache holds large
// folios (ext4 since 6.16) the whole folio, up to 2 MiB and aligned to its size. A read of
// the constants next to it (a string literal this test passes to open) may so map the
// constant's edges back, but never a 2 MiB-aligned block lying wholly inside it: only that
// block is checked.
alignas(1 << 16) const unsigned char kLargeConstant[4 << 20] = {1, 2, 3};
constexpr uintptr_t kFolioBound = 2 << 20;
const unsigned char* const kInterior = reinterpret_cast<const unsigned char*>(
    (reinterpret_cast<uintptr_t>(kLargeConstant) + kFolioBound - 1) & ~(kFolioBound - 1));
constexpr size_t kInteriorBytes = kFolioBound;

size_t PageSize() {
  return static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

void TouchLargeConstant() {
  unsigned sum = 0;
  for (size_t i = 0; i < sizeof kLargeConstant; i += PageSize())
    sum += *static_cast<const volatile unsigned char*>(&kLargeConstant[i]);
  EXPECT_EQ(sum, 1u);
}

// How many of the pages of [p, p + bytes) this process maps now: the present bit of each
// page's /proc/self/pagemap entry (any process may read its own).
size_t PresentPages(const void* p, size_t bytes) {
  const uintptr_t page = PageSize();
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + bytes - 1) / page;
  std::vector<uint64_t> entries(last - first + 1);
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  const auto want = static_cast<ssize_t>(entries.size() * sizeof(uint64_t));
  EXPECT_EQ(::pread(fd, entries.data(), want, static_cast<off_t>(first * sizeof(uint64_t))), want);
  ::close(fd);
  size_t present = 0;
  for (uint64_t e : entries)
    present += (e >> 63) & 1;
  return present;
}

// A release under a tracer is refused (TracerPid): a debugger or strace running these tests
// would make them fail for that reason alone.
bool Traced() {
  auto status = ReadFile("/proc/self/status");
  return status && TracerPid(*status) != 0;
}

TEST(MemoryTrimTest, TheLoadedObjectsAreTheExecutableAndItsLibraries) {
  const LoadedObjects objects = LoadedObjectsNow();
  // The executable, libc, the loader, the vdso at least.
  ASSERT_GE(objects.addresses.size(), 4u);
  auto smaps = ReadFile("/proc/self/smaps");
  ASSERT_TRUE(smaps.has_value()) << smaps.error().message;
  const auto first = ReleasableMappings(*smaps, {objects.addresses[0]});
  const auto executable = ReleasableMappings(*smaps, {::getauxval(AT_PHDR)});
  ASSERT_FALSE(executable.empty());
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first[0].start, executable[0].start) << "the executable comes first";
  Dl_info libc{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&::getpid), &libc), 0);
  const auto libc_mappings =
      ReleasableMappings(*smaps, {reinterpret_cast<uintptr_t>(libc.dli_fbase)});
  ASSERT_FALSE(libc_mappings.empty());
  bool found = false;
  for (uintptr_t a : objects.addresses) {
    const auto mappings = ReleasableMappings(*smaps, {a});
    found = found || (!mappings.empty() && mappings[0].start == libc_mappings[0].start);
  }
  EXPECT_TRUE(found) << "libc (" << libc.dli_fname << ") is among them";
}

TEST(MemoryTrimTest, AReleaseDropsTheLoadedObjectsPagesAndTheyComeBackUnchanged) {
  if (Traced()) GTEST_SKIP() << "a tracer is attached: the release is refused";
  const std::vector<uintptr_t> loaded = LoadedObjectsNow().addresses;
  // A mapping of the test binary's own file that the loader did not make: smaps lists it as
  // the executable's (the same inode), but it lies in no object's loadable segment, so it is
  // not the loader's to vouch for, and stays.
  const int exe = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(exe, 0);
  void* own_map = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE, exe, 0);
  ::close(exe);
  ASSERT_NE(own_map, MAP_FAILED);
  for (size_t i = 0; i < (1 << 16); i += PageSize())
    (void)*static_cast<const volatile char*>(static_cast<char*>(own_map) + i);
  TouchLargeConstant();
  ASSERT_EQ(PresentPages(kInterior, kInteriorBytes), kInteriorBytes / PageSize());

  uint64_t before = 0, after = 0, executable = 0;
  const auto listed = ReleasableNow(loaded, &before);
  const auto own = ReleasableNow({::getauxval(AT_PHDR)}, &executable);
  ASSERT_GE(own.size(), 2u) << "the test binary's code and read-only data, and the copy";
  ASSERT_GT(listed.size(), own.size() + 2) << "and those of its libraries";
  auto released = ReleaseLoadedCodePages();
  ASSERT_TRUE(released.has_value()) << released.error().message;
  EXPECT_EQ(released->mappings + 1, listed.size()) << "all but the test's own mapping";
  EXPECT_GT(released->resident_bytes, 0u);
  EXPECT_EQ(PresentPages(kInterior, kInteriorBytes), 0u) << "the executable's read-only data";
  EXPECT_EQ(PresentPages(own_map, 1 << 16), (1 << 16) / PageSize())
      << "a mapping the loader did not make";
  const auto now = ReleasableNow(loaded, &after);
  EXPECT_EQ(now.size(), listed.size()) << "what comes back is still a copy of the file";
  // What this test runs meanwhile (the smaps read, gtest, libc) comes back; the rest stays out.
  EXPECT_LT(after, before) << "resident before " << before << " bytes, after " << after;
  EXPECT_STREQ(kConstant, "the same bytes before and after a release");
  TouchLargeConstant();
  ::munmap(own_map, 1 << 16);
}

// A release with `between` run after the listing: refused as unavailable, nothing dropped.
void ExpectRefusedWhenTheListChanges(const std::function<void()>& between) {
  TouchLargeConstant();
  auto released = ReleaseLoadedCodePages(between);
  ASSERT_FALSE(released.has_value());
  EXPECT_EQ(released.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(released.error().message.find("loaded or unloaded"), std::string::npos)
      << released.error().message;
  EXPECT_EQ(PresentPages(kInterior, kInteriorBytes), kInteriorBytes / PageSize())
      << "nothing was dropped";
}

TEST(MemoryTrimTest, ALibraryLoadedWhileTheMappingsAreListedStopsTheRelease) {
  if (Traced()) GTEST_SKIP() << "a tracer is attached: the release is refused";
  void* handle = nullptr;
  ExpectRefusedWhenTheListChanges(
      [&] { handle = ::dlopen(EDGE_TEST_LOADABLE_OBJECT, RTLD_NOW | RTLD_LOCAL); });
  ASSERT_NE(handle, nullptr) << ::dlerror();
  ::dlclose(handle);
}

TEST(MemoryTrimTest, ALibraryUnloadedWhileTheMappingsAreListedStopsTheRelease) {
  if (Traced()) GTEST_SKIP() << "a tracer is attached: the release is refused";
  void* handle = ::dlopen(EDGE_TEST_LOADABLE_OBJECT, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  ExpectRefusedWhenTheListChanges([&] { ASSERT_EQ(::dlclose(handle), 0) << ::dlerror(); });
  EXPECT_EQ(::dlopen(EDGE_TEST_LOADABLE_OBJECT, RTLD_NOW | RTLD_NOLOAD), nullptr)
      << "the object was unloaded";
}

// A loaded object as dl_iterate_phdr describes it, loaded at `base`, with a read-only code
// segment, further segments and a dynamic section written by hand.
struct FakeObject {
  std::vector<ElfW(Dyn)> dynamic;
  std::vector<ElfW(Phdr)> headers;
  struct dl_phdr_info info {};

  explicit FakeObject(std::vector<ElfW(Dyn)> entries, std::vector<ElfW(Phdr)> segments = {},
                      ElfW(Addr) base = 0)
      : dynamic(std::move(entries)) {
    dynamic.push_back({.d_tag = DT_NULL, .d_un = {.d_val = 0}});
    ElfW(Phdr) code{};
    code.p_type = PT_LOAD;
    code.p_flags = PF_R | PF_X;
    code.p_vaddr = 0x1000;
    code.p_memsz = 0x2000;
    headers.push_back(code);
    headers.insert(headers.end(), segments.begin(), segments.end());
    ElfW(Phdr) dyn{};
    dyn.p_type = PT_DYNAMIC;
    dyn.p_vaddr = reinterpret_cast<ElfW(Addr)>(dynamic.data()) - base;
    headers.push_back(dyn);
    info.dlpi_addr = base;
    info.dlpi_phdr = headers.data();
    info.dlpi_phnum = static_cast<ElfW(Half)>(headers.size());
  }
};

ElfW(Phdr) Segment(ElfW(Word) type, ElfW(Word) flags, ElfW(Addr) vaddr, ElfW(Xword) memsz) {
  ElfW(Phdr) h{};
  h.p_type = type;
  h.p_flags = flags;
  h.p_vaddr = vaddr;
  h.p_memsz = memsz;
  return h;
}

TEST(MemoryTrimTest, OnlyTheLoadableSegmentsThatAreNotWritableAreReleasedRoundedOutToPages) {
  const ElfW(Addr) base = 0x7f0000000000;
  FakeObject object({},
                    {
                        Segment(PT_LOAD, PF_R, 0x3234, 0x100),          // .rodata: [0x3000, 0x4000)
                        Segment(PT_LOAD, PF_R, 0x4ff0, 0x20),           // across a page: two pages
                        Segment(PT_LOAD, PF_R | PF_W, 0x6000, 0x1000),  // .data
                        Segment(PT_LOAD, PF_R, 0x8000, 0),              // nothing in it
                        Segment(PT_GNU_RELRO, PF_R, 0x6000, 0x800),     // not a loadable one
                        Segment(PT_NOTE, PF_R, 0x1000, 0x40),
                    },
                    base);
  const auto got = ReadOnlySegments(object.info, 0x1000);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].start, base + 0x1000);
  EXPECT_EQ(got[0].end, base + 0x3000) << "the code";
  EXPECT_EQ(got[1].start, base + 0x3000);
  EXPECT_EQ(got[1].end, base + 0x4000) << "rounded out to its pages";
  EXPECT_EQ(got[2].start, base + 0x4000);
  EXPECT_EQ(got[2].end, base + 0x6000);
  // 64 KiB pages round the same segments out further.
  const auto large = ReadOnlySegments(object.info, 0x10000);
  ASSERT_EQ(large.size(), 3u);
  EXPECT_EQ(large[0].start, base);
  EXPECT_EQ(large[0].end, base + 0x10000);

  FakeObject relocated({{.d_tag = DT_TEXTREL, .d_un = {.d_val = 0}}}, {}, base);
  EXPECT_TRUE(ReadOnlySegments(relocated.info, 0x1000).empty())
      << "the loader writes its code: none of it";
}

TEST(MemoryTrimTest, AnObjectWithTextRelocationsIsKnownByItsDynamicSection) {
  EXPECT_FALSE(HasTextRelocations(FakeObject({}).info));
  EXPECT_FALSE(HasTextRelocations(FakeObject({{.d_tag = DT_FLAGS, .d_un = {.d_val = DF_BIND_NOW}},
                                              {.d_tag = DT_NEEDED, .d_un = {.d_val = 1}}})
                                      .info));
  EXPECT_TRUE(HasTextRelocations(FakeObject({{.d_tag = DT_NEEDED, .d_un = {.d_val = 1}},
                                             {.d_tag = DT_TEXTREL, .d_un = {.d_val = 0}}})
                                     .info));
  EXPECT_TRUE(HasTextRelocations(
      FakeObject({{.d_tag = DT_FLAGS, .d_un = {.d_val = DF_BIND_NOW | DF_TEXTREL}}}).info));
  // Past DT_NULL nothing counts.
  FakeObject ended({{.d_tag = DT_NULL, .d_un = {.d_val = 0}}});
  ended.dynamic.insert(ended.dynamic.begin() + 1, {.d_tag = DT_TEXTREL, .d_un = {.d_val = 0}});
  ended.headers.back().p_vaddr = reinterpret_cast<ElfW(Addr)>(ended.dynamic.data());
  EXPECT_FALSE(HasTextRelocations(ended.info));
  // Every object of this process, the test binary and its libraries, is built without them.
  ::dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void*) {
        EXPECT_FALSE(HasTextRelocations(*info)) << info->dlpi_name;
        return 0;
      },
      nullptr);
}

TEST(MemoryTrimTest, AMappingGoneSinceTheListWasReadIsSkipped) {
  void* p = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  ::munmap(p, 1 << 16);
  const auto start = reinterpret_cast<uintptr_t>(p);
  auto dropped = DropPages(start, start + (1 << 16));
  ASSERT_TRUE(dropped.has_value()) << dropped.error().message;
  EXPECT_FALSE(*dropped) << "skipped, not an error";
}

}  // namespace
}  // namespace edge::daemon
