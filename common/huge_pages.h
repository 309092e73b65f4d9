// Transparent huge pages for the few buffers that hold a whole file (issue 14, target 5).
//
// A worker door's file_write or file_read of 256 MiB passes through buffers of its own size:
// the request's body, its base64 text decoded, the file read whole, its base64 encoded, the
// answer's JSON. Each is fresh memory (allocations of 8 MiB and more are mmap'd,
// KeepMessageBuffersMapped), so each of its 4 KiB pages is faulted in once: 65 536 faults per
// 256 MiB, about 1 s per 358 MB on a VM whose faults cost 2.7 µs (docs/performance.md,
// stop 49). With MADV_HUGEPAGE the kernel maps the same range 2 MiB at a time.
//
// Only large buffers are advised, so an idle process keeps its small pages (target 3): the
// advice goes to the 2 MiB-aligned interior of a range of at least kHugePageAdviceMinBytes,
// before its pages are first touched. It is advice: a kernel without THP, or with THP set to
// "never", ignores it, and nothing here fails.
#pragma once

#include <cstddef>
#include <string>

namespace edge {

inline constexpr size_t kHugePageAdviceMinBytes = size_t{8} << 20;

// Advises MADV_HUGEPAGE for the whole 2 MiB pages inside [data, data + size), when size is at
// least kHugePageAdviceMinBytes. Returns whether the kernel took the advice for some range
// (false: too small, no whole huge page inside, or madvise refused).
bool AdviseHugePages(void* data, size_t size);

// s.reserve(capacity), then advises the reserved buffer as above: for a string about to be
// filled with `capacity` bytes.
void ReserveLarge(std::string& s, size_t capacity);

}  // namespace edge
