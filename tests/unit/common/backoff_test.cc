#include "common/backoff.h"

#include <gtest/gtest.h>

#include <deque>

namespace edge {
namespace {

using std::chrono::milliseconds;

// Returns bound-1 (the top of the window) or a scripted fraction, and records the bounds.
class ScriptedRandom final : public Random {
 public:
  uint64_t Uniform(uint64_t bound) override {
    bounds.push_back(bound);
    return bound - 1;
  }
  std::deque<uint64_t> bounds;
};

TEST(FullJitterBackoff, CeilingDoublesFromBaseUpToCap) {
  ScriptedRandom rnd;
  FullJitterBackoff b(milliseconds(1000), milliseconds(60000), rnd);
  // wire.md §2.3: base 1 s, cap 60 s.
  EXPECT_EQ(b.Ceiling(0), milliseconds(1000));
  EXPECT_EQ(b.Ceiling(1), milliseconds(2000));
  EXPECT_EQ(b.Ceiling(5), milliseconds(32000));
  EXPECT_EQ(b.Ceiling(6), milliseconds(60000));
  EXPECT_EQ(b.Ceiling(63), milliseconds(60000));
}

TEST(FullJitterBackoff, NextDrawsUniformlyBelowTheCeilingAndResetStartsOver) {
  ScriptedRandom rnd;
  FullJitterBackoff b(milliseconds(1000), milliseconds(60000), rnd);
  EXPECT_EQ(b.Next(), milliseconds(1000));
  EXPECT_EQ(b.Next(), milliseconds(2000));
  EXPECT_EQ(b.Next(), milliseconds(4000));
  // The window is [0, ceiling]: the random source is asked for ceiling+1 values.
  EXPECT_EQ(rnd.bounds[0], 1001u);
  EXPECT_EQ(rnd.bounds[2], 4001u);
  for (int i = 0; i < 100; ++i)
    b.Next();
  EXPECT_EQ(b.Next(), milliseconds(60000));
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(1000));
}

TEST(FullJitterBackoff, RealRandomStaysInsideWindow) {
  DefaultRandom rnd(42);
  FullJitterBackoff b(milliseconds(100), milliseconds(1000), rnd);
  for (int i = 0; i < 200; ++i) {
    auto ceiling = b.Ceiling(b.attempt());
    auto d = b.Next();
    EXPECT_GE(d.count(), 0);
    EXPECT_LE(d, ceiling);
  }
}

}  // namespace
}  // namespace edge
