// Reconnect backoff (design.md §9, wire.md §2.3): exponential with full jitter.
// delay(n) = uniform(0, min(cap, base * 2^n)); Reset() after the first message on a new stream.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/random.h"

namespace edge {

class Backoff {
 public:
  virtual ~Backoff() = default;
  // The delay before the next attempt; advances the attempt counter.
  virtual std::chrono::milliseconds Next() = 0;
  virtual void Reset() = 0;
};

class FullJitterBackoff final : public Backoff {
 public:
  FullJitterBackoff(std::chrono::milliseconds base, std::chrono::milliseconds cap, Random& random)
      : base_(base), cap_(cap), random_(random) {}
  std::chrono::milliseconds Next() override;
  void Reset() override { attempt_ = 0; }
  uint32_t attempt() const { return attempt_; }
  // The upper bound of the jitter window for attempt n: min(cap, base * 2^n).
  std::chrono::milliseconds Ceiling(uint32_t n) const;

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds cap_;
  Random& random_;
  uint32_t attempt_ = 0;
};

}  // namespace edge
