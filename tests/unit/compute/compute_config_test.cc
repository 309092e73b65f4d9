// The `compute` section of the agent config as the member door needs it: handlers with a
// tool, timeout and security context, max_concurrent_calls, and every bad reference an
// error that names its key.
#include <gtest/gtest.h>

#include "config/agent_config.h"

namespace edge::config {
namespace {

std::string Errors(const std::string& yaml) {
  auto r = LoadAgentConfigFromString(yaml, "agent.yaml", {});
  if (r) return "<loaded>";
  return r.error().ToString();
}

TEST(ComputeConfig, HandlersAndCap) {
  auto r = LoadAgentConfigFromString(R"(node_id: a
security_contexts:
  ops: { allowed_tools: ["enrich"] }
tools:
  enrich: { command: ["cat"] }
compute:
  tags: [approval, fast]
  legal_entity_id: acme-corp
  max_concurrent_calls: 8
  processors:
    enrich: { tool: enrich, timeout: 5s, security_context: ops }
  criteria:
    is-big: { tool: enrich }
)",
                                     "agent.yaml", {});
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->compute.max_concurrent_calls, 8);
  EXPECT_EQ(r->compute.tags, (std::vector<std::string>{"approval", "fast"}));
  EXPECT_EQ(r->compute.processors.at("enrich").security_context, "ops");
  EXPECT_EQ(r->compute.processors.at("enrich").timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(r->compute.criteria.at("is-big").timeout, std::chrono::milliseconds(30000));
  EXPECT_EQ(r->compute.criteria.at("is-big").security_context, "");
  const std::string dump = DumpRedacted(*r);
  EXPECT_NE(dump.find("max_concurrent_calls: 8"), std::string::npos) << dump;
  EXPECT_NE(dump.find("security_context: ops"), std::string::npos) << dump;
}

TEST(ComputeConfig, DefaultCap) {
  auto r = LoadAgentConfigFromString("node_id: a\n", "agent.yaml", {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->compute.max_concurrent_calls, 16);
}

TEST(ComputeConfig, BadReferencesNameTheirKey) {
  EXPECT_NE(Errors("node_id: a\ncompute:\n  processors: { p: { tool: missing } }\n")
                .find("compute.processors.p.tool: value \"missing\": names no built-in or "
                      "configured tool"),
            std::string::npos);
  EXPECT_NE(Errors("node_id: a\ncompute:\n  criteria: { c: { tool: exec, security_context: "
                   "nope } }\n")
                .find("compute.criteria.c.security_context: value \"nope\": names no entry of "
                      "security_contexts"),
            std::string::npos);
  EXPECT_NE(Errors("node_id: a\ncompute:\n  max_concurrent_calls: 0\n")
                .find("compute.max_concurrent_calls"),
            std::string::npos);
  EXPECT_NE(Errors("node_id: a\ncompute:\n  processors: { p: { tool: exec, colour: red } }\n")
                .find("compute.processors.p.colour"),
            std::string::npos);
}

}  // namespace
}  // namespace edge::config
