#include "agent/daemon/memory_trim.h"

#include <malloc.h>

#include <cstdlib>

namespace edge::daemon {

size_t TrimFreeMemory(size_t threshold_bytes) {
  const struct mallinfo2 info = ::mallinfo2();
  if (info.fordblks < threshold_bytes) return 0;
  ::malloc_trim(0);
  return info.fordblks;
}

void LimitMallocArenas(int arenas) {
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr || std::getenv("GLIBC_TUNABLES") != nullptr) {
    return;
  }
  ::mallopt(M_ARENA_MAX, arenas);
}

}  // namespace edge::daemon
