// Memory an idle agent gives back (issue 14: RSS back under its target after a burst of
// commands, and an idle agent that holds only what it uses).
//
// - Heap: glibc keeps what a burst freed in its arenas; TrimFreeMemory returns it to the
//   system when enough is held (mallinfo2().fordblks over `threshold_bytes`), so the check
//   costs a few microseconds when there is nothing to give back.
// - Code and read-only data: the agent links gRPC, protobuf and Abseil (into its binary as
//   packaged, EDGE_STATIC_GRPC; as shared libraries otherwise), and OpenSSL, SQLite and the C++
//   runtime as shared libraries. Start-up (plugin registration, descriptors, enrollment, key
//   and certificate handling, TLS set-up) and a burst of commands leave many MiB of their code
//   and constants mapped that an idle agent never touches again, and the kernel keeps mapped
//   code in memory ahead of other file pages.
//   ReleaseLoadedCodePages drops from the process (MADV_DONTNEED) the pages of the read-only
//   segments of every object the dynamic loader has mapped (the executable and its
//   libraries), where their mappings hold only copies of the file. Nothing is lost: they are
//   unmodified copies of their files, which the kernel keeps in its page cache until it needs
//   the memory (then it takes them before mapped pages). The next use of one is a page fault,
//   served from that cache while the page is still there and read from disk once the kernel
//   took it. The unit's cgroup goes on counting the cached pages until then: what drops at
//   once is the process's own share (RSS, PSS), and what the kernel must keep for it under
//   pressure. A library page that other processes map too stays resident for them: the
//   system gains nothing from that one, the agent's RSS and PSS drop all the same (and the
//   others' PSS rises by as much).
// The daemon calls both at its liveness turn (once a minute at most), the page release only
// after a quiet interval (AgentDaemon, DaemonOptions::idle_cpu_fraction), never on a hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

struct dl_phdr_info;  // <link.h>

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

// One mapping: [start, end), and how much of it was resident when it was listed.
struct FileMapping {
  uintptr_t start = 0;
  uintptr_t end = 0;
  uint64_t resident_bytes = 0;
};

// The mappings of a /proc/PID/smaps text whose pages may be dropped: mappings of the files
// mapped at `addresses_in_files` (each file by its device and inode as smaps prints them, so a
// file system whose stat() reports another device, btrfs or an older overlayfs, matches all the
// same) that are readable and not writable and hold nothing but copies of the file — no
// anonymous page, resident (`Anonymous: 0 kB`) or swapped out (`Swap: 0 kB`). That leaves out
// relocated read-only data (RELRO: written by the loader, then made read-only) and any page a
// debugger or a uprobe wrote. Lines that do not parse are skipped, and so is a mapping that
// lacks either line; an address where no file is mapped adds nothing.
std::vector<FileMapping> ReleasableMappings(std::string_view proc_smaps,
                                            const std::vector<uintptr_t>& addresses_in_files);

// The `TracerPid:` of a /proc/PID/status text (0: none, or no such line).
int64_t TracerPid(std::string_view proc_status);

// What one release dropped.
struct PageRelease {
  size_t mappings = 0;
  uint64_t resident_bytes = 0;  // resident in them when listed
};

// Drops the pages of [start, end) from the process (madvise MADV_DONTNEED): each comes back
// from its file at its next use. Only for what ReleasableMappings chose: on a private mapping
// holding a page of its own, that page would be lost. True when done; false when skipped, the
// range gone since /proc/self/smaps was read (ENOMEM) or locked in memory (EINVAL).
Result<bool> DropPages(uintptr_t start, uintptr_t end);
// Whether a loaded object's code was written by the loader: text relocations (DT_TEXTREL, or
// DF_TEXTREL in DT_FLAGS in its dynamic section), applied after the object joins the loader's
// list. None of such an object's pages are released.
bool HasTextRelocations(const struct dl_phdr_info& object);
// The address ranges of a loaded object's loadable segments that are not writable, rounded out
// to whole pages of `page` bytes (the loader maps each segment from a page boundary); none for
// an object with text relocations. Only what lies in one of these is ever released.
std::vector<FileMapping> ReadOnlySegments(const struct dl_phdr_info& object, uintptr_t page);

// The objects the dynamic loader has mapped into this process (dl_iterate_phdr): an address
// in each (in its first loadable segment; the executable first, then its libraries and those
// loaded since), and the loader's counts of loads and unloads so far.
struct LoadedObjects {
  std::vector<uintptr_t> addresses;
  unsigned long long loads = 0, unloads = 0;
};
LoadedObjects LoadedObjectsNow();

// The same for this process's loaded objects: the executable and its shared libraries, listed
// in /proc/self/smaps. Only what lies both in such a mapping and in a loadable segment of the
// object that is not writable is dropped, and none of an object with text relocations (the
// loader writes its code, after the object joins its list). The pages are dropped while the
// loader's list is held (dl_iterate_phdr's lock: no object joins or leaves it meanwhile), and
// only if no object was loaded or unloaded since they were listed; kUnavailable otherwise
// (another file might now be mapped where one of them was: try again later).
// kFailedPrecondition while a tracer is attached (/proc/self/status TracerPid): a breakpoint it
// writes between the listing and the call would be dropped. A uprobe registered in that moment
// is lost for this process (it does not fire here until the library is mapped again); one
// registered before the listing is kept (its page is anonymous). `after_listing` runs between
// the listing and the release (tests).
Result<PageRelease> ReleaseLoadedCodePages(const std::function<void()>& after_listing = {});

}  // namespace edge::daemon
