#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace edge {

bool MallocThresholdSetByEnvironment(const char* trim_threshold, const char* mmap_threshold,
                                     const char* glibc_tunables) {
  if (trim_threshold != nullptr || mmap_threshold != nullptr) return true;
  if (glibc_tunables == nullptr) return false;
  const std::string_view t(glibc_tunables);
  return t.find("glibc.malloc.trim_threshold") != std::string_view::npos ||
         t.find("glibc.malloc.mmap_threshold") != std::string_view::npos;
}

void KeepMessageBuffersMapped() {
  if (MallocThresholdSetByEnvironment(std::getenv("MALLOC_TRIM_THRESHOLD_"),
                                      std::getenv("MALLOC_MMAP_THRESHOLD_"),
                                      std::getenv("GLIBC_TUNABLES"))) {
    return;
  }
  ::mallopt(M_MMAP_THRESHOLD, 8 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 32 << 20);
}

}  // namespace edge
