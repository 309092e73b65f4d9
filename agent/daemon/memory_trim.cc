#include "agent/daemon/memory_trim.h"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace edge::daemon {

size_t TrimFreeMemory(size_t threshold_bytes) {
  const struct mallinfo2 info = ::mallinfo2();
  if (info.fordblks < threshold_bytes) return 0;
  ::malloc_trim(0);
  return info.fordblks;
}

bool ArenaLimitSetByEnvironment(const char* malloc_arena_max, const char* glibc_tunables) {
  if (malloc_arena_max != nullptr) return true;
  return glibc_tunables != nullptr &&
         std::string_view(glibc_tunables).find("glibc.malloc.arena_max") != std::string_view::npos;
}

void LimitMallocArenas(int arenas) {
  if (ArenaLimitSetByEnvironment(std::getenv("MALLOC_ARENA_MAX"), std::getenv("GLIBC_TUNABLES"))) {
    return;
  }
  ::mallopt(M_ARENA_MAX, arenas);
}

}  // namespace edge::daemon
