// Memory an idle agent gives back (issue 14: RSS back under its target after a burst of
// commands). glibc keeps what a burst freed in its arenas; TrimFreeMemory returns it to the
// system when enough is held (mallinfo2().fordblks over `threshold_bytes`), so the check
// costs a few microseconds when there is nothing to give back. The daemon calls it at its
// liveness turn (once a minute at most), never on a hot path.
#pragma once

#include <cstddef>

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

}  // namespace edge::daemon
