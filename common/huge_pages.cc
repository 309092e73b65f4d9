#include "common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace edge {

bool AdviseHugePages(void* data, size_t size) {
  if (data == nullptr || size < kHugePageAdviceMinBytes) return false;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + size) & ~(kHuge - 1);
  if (last <= first) return false;
  return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) == 0;
}

void ReserveLarge(std::string& s, size_t capacity) {
  const size_t before = s.capacity();
  s.reserve(capacity);
  // Advise only a buffer the reserve just allocated: its pages are not touched yet.
  if (s.capacity() != before) AdviseHugePages(s.data(), s.capacity());
}

}  // namespace edge
