// KeepMessageBuffersMapped leaves glibc's thresholds to the environment when it sets them.
#include "common/malloc_tuning.h"

#include <gtest/gtest.h>

namespace edge {
namespace {

TEST(MallocTuningTest, AThresholdFromTheEnvironmentWins) {
  EXPECT_FALSE(MallocThresholdSetByEnvironment(nullptr, nullptr, nullptr));
  EXPECT_FALSE(MallocThresholdSetByEnvironment(nullptr, nullptr, "glibc.malloc.arena_max=2"));
  EXPECT_TRUE(MallocThresholdSetByEnvironment("1048576", nullptr, nullptr));
  EXPECT_TRUE(MallocThresholdSetByEnvironment(nullptr, "0", nullptr));
  EXPECT_TRUE(MallocThresholdSetByEnvironment(
      nullptr, nullptr, "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0"));
  EXPECT_TRUE(
      MallocThresholdSetByEnvironment(nullptr, nullptr, "glibc.malloc.mmap_threshold=131072"));
}

}  // namespace
}  // namespace edge
