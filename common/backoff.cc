#include "common/backoff.h"

#include <algorithm>

namespace edge {

std::chrono::milliseconds FullJitterBackoff::Ceiling(uint32_t n) const {
  const int64_t cap = cap_.count();
  int64_t ceiling = base_.count();
  for (uint32_t i = 0; i < n && ceiling < cap; ++i)
    ceiling *= 2;
  return std::chrono::milliseconds(std::min(ceiling, cap));
}

std::chrono::milliseconds FullJitterBackoff::Next() {
  const auto ceiling = Ceiling(attempt_);
  if (attempt_ < 64) ++attempt_;
  return std::chrono::milliseconds(
      static_cast<int64_t>(random_.Uniform(static_cast<uint64_t>(ceiling.count()) + 1)));
}

}  // namespace edge
