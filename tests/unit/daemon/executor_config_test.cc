// The daemon is where config meets the executor: the names config accepts as built-in tools
// (config sits below sandbox and cannot ask it) must be exactly the executor's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/agent_config.h"
#include "sandbox/tool_registry.h"

namespace edge {
namespace {

TEST(ExecutorConfigTest, ConfigKnowsExactlyTheExecutorsBuiltinTools) {
  auto registry = sandbox::ToolRegistry::Make({});
  ASSERT_TRUE(registry) << registry.error().ToString();
  std::vector<std::string> from_config(config::BuiltinTools().begin(),
                                       config::BuiltinTools().end());
  std::sort(from_config.begin(), from_config.end());
  EXPECT_EQ(from_config, registry->List());
}

}  // namespace
}  // namespace edge
