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

TEST(SecurityContextTest, ImplicitDefaultOnlyWhenNoContextIsConfigured) {
  // Nothing configured: the implicit allow-all "default" (the agent warns about it).
  auto open = SecurityContexts::Make({});
  ASSERT_TRUE(open.has_value());
  EXPECT_TRUE(open->implicit_default());
  auto def = open->Find("");
  ASSERT_TRUE(def.has_value());
  EXPECT_EQ((*def)->name(), "default");
  EXPECT_TRUE((*def)->CheckTool("anything").has_value());

  // Once any context is configured there is no allow-all behind the operator's back.
  auto set = SecurityContexts::Make({{"ops", SecurityContextConfig{{"exec"}, "nobody", {}, {}}}});
  ASSERT_TRUE(set.has_value());
  EXPECT_FALSE(set->implicit_default());
  auto none = set->Find("");
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_NE(none.error().message.find("'default' is not configured"), std::string::npos);
  EXPECT_EQ((*set->Find("ops"))->config().run_as, "nobody");
  auto missing = set->Find("nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("'nope'"), std::string::npos);

  // A configured "default" is just a context like the others.
  auto strict =
      SecurityContexts::Make({{"default", SecurityContextConfig{{"sysinfo"}, "", {}, {}}}});
  ASSERT_TRUE(strict.has_value());
  EXPECT_FALSE(strict->implicit_default());
  EXPECT_FALSE((*strict->Find(""))->CheckTool("exec").has_value());
}

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SecurityContextConfig limited{{"disk-usage", "file.*"}, "nobody", {"/srv", "/data"}, {}};
    limited.limits.timeout_cap = 10s;
    limited.limits.max_output_bytes = 1000;
    SecurityContextConfig wide{{"*"}, "", {"/data", "/etc"}, {}};
    wide.limits.timeout_cap = 5s;
    SecurityContextConfig as_root{{"*"}, "root", {}, {}};
    SecurityContextConfig files_only{{"file.*"}, "", {}, {}};
    SecurityContextConfig admins{{"*"}, "", {}, {}};
    admins.require_roles = {"admin", "operator"};
    auto set = SecurityContexts::Make({{"limited", limited},
                                       {"default", wide},
                                       {"root", as_root},
                                       {"files", files_only},
                                       {"admins", admins}});
    ASSERT_TRUE(set.has_value()) << set.error().ToString();
    set_ = std::move(*set);
  }
  Result<SecurityContext> Resolve(std::string_view tool, std::string_view own,
                                  std::string_view requested,
                                  std::optional<std::vector<std::string>> roles = std::nullopt) {
    return set_.Resolve(tool, own, requested, roles);
  }
  SecurityContexts set_;
};

TEST_F(ResolveTest, AToolsOwnContextBindsWhateverTheRequestSays) {
  // The finding: a tool bound to `limited` (run_as nobody) ran as root with --context default.
  auto r = Resolve("disk-usage", "limited", "default");
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->name(), "limited");
  EXPECT_EQ(r->config().run_as, "nobody");
  // Narrowed: the stricter limit of the two, and only the mount points both list.
  EXPECT_EQ(r->config().limits.timeout_cap, 5s);
  EXPECT_EQ(r->config().limits.max_output_bytes, 1000u);
  EXPECT_EQ(r->config().mount_points, std::vector<std::string>{"/data"});
  // No context in the request: the tool's own.
  auto own = Resolve("disk-usage", "limited", "");
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->config().limits.timeout_cap, 10s);
}

TEST_F(ResolveTest, ARequestCannotChangeTheUserOrAllowWhatTheToolsContextDoesNot) {
  auto other_user = Resolve("disk-usage", "limited", "root");
  ASSERT_FALSE(other_user.has_value());
  EXPECT_EQ(other_user.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(other_user.error().message.find("not change its user"), std::string::npos)
      << other_user.error().message;
  EXPECT_NE(other_user.error().message.find("'limited'"), std::string::npos);

  auto not_in_request = Resolve("disk-usage", "limited", "files");
  ASSERT_FALSE(not_in_request.has_value());
  EXPECT_EQ(not_in_request.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(not_in_request.error().message.find("can only narrow"), std::string::npos);

  // The tool's own context must allow it too.
  auto not_in_own = Resolve("exec", "files", "default");
  ASSERT_FALSE(not_in_own.has_value());
  EXPECT_EQ(not_in_own.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(not_in_own.error().message.find("'exec'"), std::string::npos);

  auto unknown = Resolve("disk-usage", "limited", "ghost");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
}

TEST_F(ResolveTest, BuiltInToolsRunUnderTheRequestedContext) {
  auto r = Resolve("exec", "", "root");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->config().run_as, "root");
  auto d = Resolve("exec", "", "");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name(), "default");
  auto denied = Resolve("exec", "", "files");
  ASSERT_FALSE(denied.has_value());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
}

TEST_F(ResolveTest, AContextCanRequireARole) {
  auto unverified = Resolve("sysinfo", "", "admins");
  ASSERT_FALSE(unverified.has_value());
  EXPECT_EQ(unverified.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(unverified.error().message.find("not verified"), std::string::npos);
  auto wrong = Resolve("sysinfo", "", "admins", std::vector<std::string>{"viewer"});
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().message.find("'admin', 'operator'"), std::string::npos)
      << wrong.error().message;
  EXPECT_TRUE(
      Resolve("sysinfo", "", "admins", std::vector<std::string>{"viewer", "operator"}).has_value());
  // A context without required roles does not care.
  EXPECT_TRUE(Resolve("sysinfo", "", "default").has_value());
}

}  // namespace
}  // namespace edge::sandbox
