// Memory an idle agent gives back (issue 14: RSS back under its target after a burst of
// commands, and an idle agent that holds only what it uses).
//
// - Heap: glibc keeps what a burst freed in its arenas; TrimFreeMemory returns it to the
//   system when enough is held (mallinfo2().fordblks over `threshold_bytes`), so the check
//   costs a few microseconds when there is nothing to give back.
// - Code and read-only data: the agent's binary links gRPC, protobuf and Abseil statically;
//   start-up (plugin registration, descriptors, enrollment, TLS set-up) and a burst of
//   commands leave several MiB of code and constants mapped that an idle agent never touches
//   again. The kernel keeps mapped executable pages in memory ahead of other file pages, so
//   they stay until the process ends. ReleaseFilePages asks the kernel to reclaim the pages
//   of the process's read-only file mappings (madvise MADV_PAGEOUT, Linux 5.4+). Their
//   contents come from the file again when next used: a page fault each, served from the
//   page cache while the file is still cached there (it usually is), otherwise read from
//   disk. Pages another process also maps (libc, libcrypto, libstdc++) are left alone by
//   the kernel.
//
// The daemon calls both at its liveness turn (once a minute at most), the page release only
// after a quiet interval (AgentDaemon, DaemonOptions::idle_cpu_fraction), never on a hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace edge::daemon {

// Bytes held free by malloc before the call (0 when under the threshold: nothing trimmed).
size_t TrimFreeMemory(size_t threshold_bytes = size_t{1} << 20);

// How many malloc arenas the agent allows: each thread that allocates may otherwise get one
// of its own (up to 8 per core), and memory freed in one is not reused by the others.
// Called first thing in `run`, before any thread; MALLOC_ARENA_MAX, or a GLIBC_TUNABLES that
// sets glibc.malloc.arena_max, in the environment wins (other tunables do not).
void LimitMallocArenas(int arenas = 2);
// Whether those two variables' values (nullptr = unset) set the arena limit themselves.
bool ArenaLimitSetByEnvironment(const char* malloc_arena_max, const char* glibc_tunables);

// One mapping of a file: [start, end) backed by the file at `path`.
struct FileMapping {
  uintptr_t start = 0;
  uintptr_t end = 0;
  std::string path;
};

// The mappings of a /proc/PID/smaps text whose pages may be released: readable, not
// writable, backed by a file (an absolute path: not [vdso], [vsyscall], anonymous or JIT
// memory), and holding no anonymous page (`Anonymous: 0 kB`), so every resident page is a
// copy of the file. That leaves out the relocated read-only data (RELRO: written by the
// loader, then made read-only), which the kernel could only push to swap. Code and read-only
// data (.rodata, the unwind tables) of the binary and its libraries qualify. Lines that do
// not parse are skipped, and so is a mapping without an Anonymous line.
std::vector<FileMapping> ReleasableFileMappings(std::string_view proc_smaps);

// What one release covered.
struct PageRelease {
  size_t mappings = 0;
  size_t bytes = 0;  // the mappings' size, not what the kernel reclaimed from it
};

// Asks the kernel to reclaim these mappings' pages (MADV_PAGEOUT). kFailedPrecondition when
// the kernel has no MADV_PAGEOUT (before 5.4: nothing is released, and calling again is
// pointless); a mapping that went away meanwhile is skipped.
Result<PageRelease> ReleaseFilePages(const std::vector<FileMapping>& mappings);
// The same for this process (/proc/self/smaps).
Result<PageRelease> ReleaseFilePages();

}  // namespace edge::daemon
