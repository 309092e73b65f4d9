// memory_trim.h: which environment sets malloc's arena limit itself (the agent's own limit
// then stays out of the way), and that a trim under its threshold does nothing.
#include "agent/daemon/memory_trim.h"

#include <gtest/gtest.h>

namespace edge::daemon {
namespace {

TEST(MemoryTrimTest, OnlyAnArenaSettingInTheEnvironmentWins) {
  EXPECT_FALSE(ArenaLimitSetByEnvironment(nullptr, nullptr));
  EXPECT_TRUE(ArenaLimitSetByEnvironment("4", nullptr));
  EXPECT_TRUE(ArenaLimitSetByEnvironment(nullptr, "glibc.malloc.arena_max=4"));
  EXPECT_TRUE(ArenaLimitSetByEnvironment(nullptr, "glibc.pthread.rseq=0:glibc.malloc.arena_max=1"));
  EXPECT_FALSE(ArenaLimitSetByEnvironment(nullptr, "glibc.pthread.rseq=0"))
      << "a runtime's unrelated tunable must not switch the limit off";
  EXPECT_FALSE(ArenaLimitSetByEnvironment(nullptr, ""));
}

TEST(MemoryTrimTest, NothingIsTrimmedUnderTheThreshold) {
  EXPECT_EQ(TrimFreeMemory(~size_t{0}), 0u);
}

}  // namespace
}  // namespace edge::daemon
