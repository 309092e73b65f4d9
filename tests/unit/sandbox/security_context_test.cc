#include "sandbox/security_context.h"

#include <gtest/gtest.h>

namespace edge::sandbox {
namespace {

using namespace std::chrono_literals;

TEST(SecurityContextTest, GlobsDecideWhichToolsRun) {
  SecurityContextConfig cfg;
  cfg.allowed_tools = {"file.*", "sysinfo"};
  auto ctx = SecurityContext::Make("readers", cfg);
  ASSERT_TRUE(ctx.has_value());
  EXPECT_TRUE(ctx->CheckTool("file.read").has_value());
  EXPECT_TRUE(ctx->CheckTool("file.write").has_value());
  EXPECT_TRUE(ctx->CheckTool("sysinfo").has_value());
  auto denied = ctx->CheckTool("exec");
  ASSERT_FALSE(denied.has_value());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(denied.error().message.find("'exec'"), std::string::npos);
  EXPECT_NE(denied.error().message.find("'readers'"), std::string::npos);
  // No patterns: nothing is allowed.
  auto none = SecurityContext::Make("none", {});
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->CheckTool("sysinfo").has_value());
}

TEST(SecurityContextTest, LimitsCapTimeoutAndOutput) {
  SecurityContextConfig cfg;
  cfg.allowed_tools = {"*"};
  cfg.limits.timeout_cap = 5s;
  cfg.limits.max_output_bytes = 1000;
  auto ctx = SecurityContext::Make("capped", cfg);
  ASSERT_TRUE(ctx.has_value());
  EXPECT_EQ(ctx->EffectiveTimeout(60s, 30s), 5s);
  EXPECT_EQ(ctx->EffectiveTimeout(0s, 30s), 5s);
  EXPECT_EQ(ctx->EffectiveTimeout(2s, 30s), 2s);
  EXPECT_EQ(ctx->EffectiveOutputCap(64 << 20), 1000u);
  EXPECT_EQ(ctx->EffectiveOutputCap(500), 500u);
  auto open = SecurityContext::Make("open", SecurityContextConfig{{"*"}, "", {}, {}});
  EXPECT_EQ(open->EffectiveTimeout(0s, 30s), 30s);
  EXPECT_EQ(open->EffectiveOutputCap(64), 64u);
}

TEST(SecurityContextTest, BadConfigIsNamed) {
  SecurityContextConfig rel;
  rel.mount_points = {"relative/path"};
  auto r = SecurityContext::Make("c1", rel);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("security_contexts.c1.mount_points"), std::string::npos);
  EXPECT_NE(r.error().message.find("relative/path"), std::string::npos);

  SecurityContextConfig empty_glob;
  empty_glob.allowed_tools = {""};
  auto g = SecurityContext::Make("c2", empty_glob);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().message.find("allowed_tools"), std::string::npos);

  SecurityContextConfig neg;
  neg.limits.max_concurrent = -1;
  auto n = SecurityContext::Make("c3", neg);
  ASSERT_FALSE(n.has_value());
  EXPECT_NE(n.error().message.find("limits"), std::string::npos);
}

TEST(SecurityContextTest, SetHasBuiltInDefaultAndNamesUnknownContexts) {
  auto set = SecurityContexts::Make({{"ops", SecurityContextConfig{{"exec"}, "nobody", {}, {}}}});
  ASSERT_TRUE(set.has_value());
  auto def = set->Find("");
  ASSERT_TRUE(def.has_value());
  EXPECT_EQ((*def)->name(), "default");
  EXPECT_TRUE((*def)->CheckTool("anything").has_value());
  EXPECT_EQ((*set->Find("ops"))->config().run_as, "nobody");
  auto missing = set->Find("nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("'nope'"), std::string::npos);

  // A configured "default" replaces the built-in one.
  auto strict =
      SecurityContexts::Make({{"default", SecurityContextConfig{{"sysinfo"}, "", {}, {}}}});
  ASSERT_TRUE(strict.has_value());
  EXPECT_FALSE((*strict->Find(""))->CheckTool("exec").has_value());
}

}  // namespace
}  // namespace edge::sandbox
