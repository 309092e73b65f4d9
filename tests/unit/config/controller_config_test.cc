#include "config/controller_config.h"
#include "tests/support/build_paths.h"

#include <gtest/gtest.h>

namespace edge::config {
namespace {

EnvLookup NoEnv() {
  return [](const std::string&) { return std::optional<std::string>(); };
}

TEST(ControllerConfig, DefaultsAndDerivedValues) {
  auto c = LoadControllerConfigFromString("data_dir: /srv/ctl\n", "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->grpc.listen, "0.0.0.0:50056");
  EXPECT_EQ(c->grpc.advertise, "127.0.0.1:50056");
  EXPECT_EQ(c->admin.socket, "/srv/ctl/admin.sock");
  EXPECT_EQ(c->cluster.stale_threshold_secs, 90);
  EXPECT_EQ(c->tokens.default_ttl, std::chrono::hours(1));
  EXPECT_EQ(c->tokens.issuer, "edge-controller");
  EXPECT_EQ(c->tokens.node_token_ttl, std::chrono::hours(1));
  EXPECT_EQ(c->cluster.rotation_overlap, std::chrono::seconds(60));
}

TEST(ControllerConfig, EdgeTokenKeys) {
  auto c = LoadControllerConfigFromString(
      "tokens: { node_token_ttl: 10m }\ncluster: { rotation_overlap: 2m }\n", "controller.yaml",
      NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->tokens.node_token_ttl, std::chrono::minutes(10));
  EXPECT_EQ(c->cluster.rotation_overlap, std::chrono::minutes(2));
  auto dump = DumpRedacted(*c);
  EXPECT_NE(dump.find("node_token_ttl: 10m"), std::string::npos) << dump;
  EXPECT_NE(dump.find("rotation_overlap: 2m"), std::string::npos) << dump;

  auto bad = LoadControllerConfigFromString(
      "tokens: { node_token_ttl: 2d }\ncluster: { rotation_overlap: 0s }\n", "controller.yaml",
      NoEnv());
  ASSERT_FALSE(bad);
  const std::string msg = bad.error().ToString();
  EXPECT_NE(msg.find("tokens.node_token_ttl"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cluster.rotation_overlap"), std::string::npos) << msg;
}

TEST(ControllerConfig, OutputStallLimitIsBelowTheStaleThreshold) {
  auto defaults = LoadControllerConfigFromString("", "controller.yaml", NoEnv());
  ASSERT_TRUE(defaults) << defaults.error().ToString();
  EXPECT_EQ(defaults->cluster.output_stall_limit, std::chrono::seconds(10));
  EXPECT_NE(DumpRedacted(*defaults).find("output_stall_limit: 10s"), std::string::npos);

  auto set = LoadControllerConfigFromString("cluster: { output_stall_limit: 45s }\n",
                                            "controller.yaml", NoEnv());
  ASSERT_TRUE(set) << set.error().ToString();
  EXPECT_EQ(set->cluster.output_stall_limit, std::chrono::seconds(45));

  // Unset under a short stale threshold: half of it, not a config that cannot load.
  auto short_stale = LoadControllerConfigFromString(
      "cluster: { heartbeat_interval_secs: 2, stale_threshold_secs: 6 }\n", "controller.yaml",
      NoEnv());
  ASSERT_TRUE(short_stale) << short_stale.error().ToString();
  EXPECT_EQ(short_stale->cluster.output_stall_limit, std::chrono::seconds(3));

  auto too_long = LoadControllerConfigFromString("cluster: { output_stall_limit: 2m }\n",
                                                 "controller.yaml", NoEnv());
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().ToString().find("cluster.output_stall_limit: value \"2m\""),
            std::string::npos)
      << too_long.error().ToString();

  auto past_stale = LoadControllerConfigFromString(
      "cluster: { heartbeat_interval_secs: 5, stale_threshold_secs: 20,\n"
      "           output_stall_limit: 20s }\n",
      "controller.yaml", NoEnv());
  ASSERT_FALSE(past_stale);
  EXPECT_EQ(past_stale.error().ToString(),
            "controller.yaml:2:32: cluster.output_stall_limit: value \"20s\": must be less than "
            "cluster.stale_threshold_secs (20 s): a stream held that long would show its node "
            "stale");
}

TEST(ControllerConfig, BadValuesAreNamed) {
  auto c = LoadControllerConfigFromString(
      "grpc: { listen: nowhere }\ncluster: { heartbeat_interval_secs: 30, stale_threshold_secs: 10 "
      "}\n",
      "controller.yaml", NoEnv());
  ASSERT_FALSE(c);
  EXPECT_EQ(
      c.error().ToString(),
      "controller.yaml:1:17: grpc.listen: value \"nowhere\": must be host:port\n"
      "controller.yaml:2:63: cluster.stale_threshold_secs: value \"10\": must be greater than "
      "cluster.heartbeat_interval_secs (30)");
}

TEST(ControllerConfig, TrustedIssuersMapIssuersToAbsolutePemPaths) {
  auto c = LoadControllerConfigFromString(
      "http:\n  trusted_issuers:\n    https://id.example.com: /etc/ctl/oidc.pub.pem\n",
      "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  ASSERT_EQ(c->http.trusted_issuers.size(), 1u);
  EXPECT_EQ(c->http.trusted_issuers.at("https://id.example.com"), "/etc/ctl/oidc.pub.pem");
  EXPECT_NE(DumpRedacted(*c).find("https://id.example.com: /etc/ctl/oidc.pub.pem"),
            std::string::npos);

  auto relative = LoadControllerConfigFromString("http: { trusted_issuers: { idp: oidc.pem } }\n",
                                                 "controller.yaml", NoEnv());
  ASSERT_FALSE(relative);
  EXPECT_NE(relative.error().ToString().find("http.trusted_issuers.idp"), std::string::npos)
      << relative.error().ToString();

  auto own = LoadControllerConfigFromString(
      "tokens: { issuer: ctl }\nhttp: { trusted_issuers: { ctl: /k.pem } }\n", "controller.yaml",
      NoEnv());
  ASSERT_FALSE(own);
  EXPECT_NE(own.error().ToString().find("must not name tokens.issuer"), std::string::npos)
      << own.error().ToString();

  auto not_a_map = LoadControllerConfigFromString("http: { trusted_issuers: [a] }\n",
                                                  "controller.yaml", NoEnv());
  EXPECT_FALSE(not_a_map);
}

TEST(ControllerConfig, DeniedToolsDefaultToTheMutatingToolsAndCanBeSet) {
  auto defaults = LoadControllerConfigFromString("{}\n", "controller.yaml", NoEnv());
  ASSERT_TRUE(defaults) << defaults.error().ToString();
  EXPECT_EQ(defaults->http.denied_tools,
            (std::vector<std::string>{"exec", "file.write", "file.delete"}));

  auto set = LoadControllerConfigFromString("http: { denied_tools: [sysinfo] }\n",
                                            "controller.yaml", NoEnv());
  ASSERT_TRUE(set) << set.error().ToString();
  EXPECT_EQ(set->http.denied_tools, (std::vector<std::string>{"sysinfo"}));
  EXPECT_NE(DumpRedacted(*set).find("denied_tools: [sysinfo]"), std::string::npos)
      << DumpRedacted(*set);

  auto none =
      LoadControllerConfigFromString("http: { denied_tools: [] }\n", "controller.yaml", NoEnv());
  ASSERT_TRUE(none) << none.error().ToString();
  EXPECT_TRUE(none->http.denied_tools.empty());

  auto empty = LoadControllerConfigFromString("http: { denied_tools: [exec, \"\"] }\n",
                                              "controller.yaml", NoEnv());
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().ToString().find("http.denied_tools[1]"), std::string::npos)
      << empty.error().ToString();
  EXPECT_NE(empty.error().ToString().find("must name a tool"), std::string::npos);

  auto not_a_list =
      LoadControllerConfigFromString("http: { denied_tools: exec }\n", "controller.yaml", NoEnv());
  ASSERT_FALSE(not_a_list);
  EXPECT_NE(not_a_list.error().ToString().find("http.denied_tools"), std::string::npos);
}

TEST(ControllerConfig, SessionLimitsAndAllowedOriginsDefaultAndValidate) {
  auto d = LoadControllerConfigFromString("{}\n", "controller.yaml", NoEnv());
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_EQ(d->edge_api.rate_limit, 20);
  EXPECT_EQ(d->edge_api.max_frame_size, 1u << 20);
  EXPECT_EQ(d->edge_api.reattach_window_secs, 300);
  EXPECT_EQ(d->edge_api.max_buffer_size, 4u << 20);
  EXPECT_EQ(d->edge_api.buffer_overflow_policy, "drop_oldest");
  EXPECT_TRUE(d->http.allowed_origins.empty());

  auto set = LoadControllerConfigFromString(
      "edge_api:\n  limits:\n    rate_limit: 5\n    max_frame_size: 4096\n"
      "    reattach_window: 2\n    max_buffer_size: 65536\n"
      "    buffer_overflow_policy: disconnect\n"
      "http:\n  allowed_origins: [\"https://dash.example\"]\n",
      "controller.yaml", NoEnv());
  ASSERT_TRUE(set) << set.error().ToString();
  EXPECT_EQ(set->edge_api.rate_limit, 5);
  EXPECT_EQ(set->edge_api.max_frame_size, 4096u);
  EXPECT_EQ(set->edge_api.reattach_window_secs, 2);
  EXPECT_EQ(set->edge_api.max_buffer_size, 65536u);
  EXPECT_EQ(set->edge_api.buffer_overflow_policy, "disconnect");
  EXPECT_EQ(set->http.allowed_origins, (std::vector<std::string>{"https://dash.example"}));
  const std::string dump = DumpRedacted(*set);
  EXPECT_NE(dump.find("buffer_overflow_policy: disconnect"), std::string::npos) << dump;
  EXPECT_NE(dump.find("allowed_origins: [https://dash.example]"), std::string::npos) << dump;

  for (const auto& [yaml, expect] : std::vector<std::pair<std::string, std::string>>{
           {"edge_api: { limits: { buffer_overflow_policy: newest } }",
            "must be drop_oldest or disconnect"},
           {"edge_api: { limits: { rate_limit: 0 } }", "edge_api.limits.rate_limit"},
           {"edge_api: { limits: { reattach_window: 999999999 } }",
            "edge_api.limits.reattach_window"},
           {"edge_api: { limits: { max_buffer_size: 10 } }", "edge_api.limits.max_buffer_size"},
           {"edge_api: { limits: { max_buffer_size: 1MiB } }",
            "edge_api.limits.max_buffer_size: value \"1048576\": max_buffer_size (1048576) must be "
            "at least "
            "twice max_frame_size (1048576)"},
           {"edge_api: { limits: { window: 3 } }", "window"},
           {"edge_api: { limit: {} }", "limit"},
           {"http: { allowed_origins: [\"dash.example\"] }", "http.allowed_origins[0]"},
           {"http: { allowed_origins: [\"https://dash.example/\"] }", "without a path"}}) {
    auto bad = LoadControllerConfigFromString(yaml + "\n", "controller.yaml", NoEnv());
    ASSERT_FALSE(bad) << yaml;
    EXPECT_NE(bad.error().ToString().find(expect), std::string::npos)
        << yaml << ": " << bad.error().ToString();
  }
}

TEST(ControllerConfig, EnvOverride) {
  auto c = LoadControllerConfigFromString("{}\n", "controller.yaml", [](const std::string& k) {
    return k == "EDGE_CONTROLLER_GRPC_LISTEN" ? std::optional<std::string>("127.0.0.1:7000")
                                              : std::nullopt;
  });
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->grpc.listen, "127.0.0.1:7000");
  EXPECT_EQ(c->grpc.advertise, "127.0.0.1:7000");
}

TEST(ControllerConfig, ExampleFileValidates) {
  auto c = LoadControllerConfig(edge::testing::SourceDir() + "/config/controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
}

TEST(ControllerConfig, MaxMessageBytesDefaultsTo16MiBWithinItsRange) {
  auto c = LoadControllerConfigFromString("", "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->grpc.max_message_bytes, 16ull << 20);
  c = LoadControllerConfigFromString("grpc: { max_message_bytes: 64MiB }\n", "controller.yaml",
                                     NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->grpc.max_message_bytes, 64ull << 20);
  EXPECT_NE(DumpRedacted(*c).find("max_message_bytes: 67108864"), std::string::npos);
  for (const char* bad : {"512KiB", "257MiB", "lots"}) {
    auto r = LoadControllerConfigFromString(
        std::string("grpc: { max_message_bytes: ") + bad + " }\n", "controller.yaml", NoEnv());
    ASSERT_FALSE(r) << bad;
    const std::string msg = r.error().ToString();
    EXPECT_NE(msg.find("grpc.max_message_bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
}

TEST(ControllerConfig, ReflectionIsOnUnlessTurnedOff) {
  auto c = LoadControllerConfigFromString("", "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_TRUE(c->grpc.reflection);
  c = LoadControllerConfigFromString("grpc: { reflection: false }\n", "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_FALSE(c->grpc.reflection);
  EXPECT_NE(DumpRedacted(*c).find("reflection: false"), std::string::npos) << DumpRedacted(*c);
  auto bad =
      LoadControllerConfigFromString("grpc: { reflection: maybe }\n", "controller.yaml", NoEnv());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().ToString().find("grpc.reflection"), std::string::npos)
      << bad.error().ToString();
}

TEST(ControllerConfig, LimitsHaveDefaultsRangesAndConsistencyChecks) {
  auto c = LoadControllerConfigFromString("", "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->limits.exchange_per_minute, 10);
  EXPECT_EQ(c->limits.exchange_burst, 10);
  EXPECT_EQ(c->limits.attest_per_minute, 5);
  EXPECT_EQ(c->limits.attest_per_ip_per_minute, 60);
  EXPECT_EQ(c->limits.unauthenticated_calls, 256);
  EXPECT_EQ(c->limits.unauthenticated_calls_per_peer, 16);
  EXPECT_EQ(c->limits.refusal_log_lines_per_minute, 5);
  c = LoadControllerConfigFromString(
      "limits: { exchange_per_minute: 2, exchange_burst: 3, unauthenticated_calls: 20, "
      "unauthenticated_calls_per_peer: 4 }\n",
      "controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->limits.exchange_burst, 3);
  EXPECT_EQ(c->limits.unauthenticated_calls_per_peer, 4);
  auto bad = LoadControllerConfigFromString(
      "limits: { exchange_per_minute: 0, attest_per_minute: 10, attest_per_ip_per_minute: 5, "
      "unauthenticated_calls: 2, unauthenticated_calls_per_peer: 3, bogus: 1 }\n",
      "controller.yaml", NoEnv());
  ASSERT_FALSE(bad);
  const std::string msg = bad.error().ToString();
  for (const char* words : {"limits.exchange_per_minute", "limits.attest_per_ip_per_minute",
                            "must be at least limits.attest_per_minute (10)",
                            "limits.unauthenticated_calls", "bogus"}) {
    EXPECT_NE(msg.find(words), std::string::npos) << words << "\n" << msg;
  }
}

TEST(ControllerConfig, APushConfigDeltaIsSplitIntoTheControllersLimitsAndTheNodesPart) {
  ControllerConfig::EdgeApi current;
  current.reattach_window_secs = 60;
  // No edge_api: the node gets the delta's own text, unchanged.
  auto plain = SplitPushConfigDelta("cluster: {heartbeat_interval_secs: 5}\n", current, "delta");
  ASSERT_TRUE(plain) << plain.error().ToString();
  EXPECT_FALSE(plain->edge_api);
  EXPECT_EQ(plain->node_delta, "cluster: {heartbeat_interval_secs: 5}\n");
  auto list = SplitPushConfigDelta("- a list\n", current, "delta");
  ASSERT_TRUE(list) << "the node part's rules judge a list";
  EXPECT_EQ(list->node_delta, "- a list\n");

  // Only edge_api: applied over `current`, nothing left for the node.
  auto only = SplitPushConfigDelta("edge_api:\n  limits:\n    rate_limit: 5\n", current, "delta");
  ASSERT_TRUE(only) << only.error().ToString();
  ASSERT_TRUE(only->edge_api);
  EXPECT_EQ(only->edge_api->rate_limit, 5);
  EXPECT_EQ(only->edge_api->reattach_window_secs, 60) << "keys not in the delta keep theirs";
  EXPECT_EQ(only->node_delta, "");

  // Both (JSON too): the node part is the rest, without edge_api.
  auto both = SplitPushConfigDelta(
      R"({"labels":{"zone":"b"},"edge_api":{"limits":{"max_buffer_size":"64KiB","max_frame_size":"32KiB",
          "buffer_overflow_policy":"disconnect"}}})",
      current, "delta");
  ASSERT_TRUE(both) << both.error().ToString();
  EXPECT_EQ(both->edge_api->max_buffer_size, 64u << 10);
  EXPECT_EQ(both->edge_api->buffer_overflow_policy, "disconnect");
  EXPECT_EQ(both->node_delta.find("edge_api"), std::string::npos) << both->node_delta;
  EXPECT_NE(both->node_delta.find("zone: b"), std::string::npos) << both->node_delta;

  // Bad limits name the key, the value and the rule.
  struct Case {
    const char* delta;
    const char* words;
  } cases[] = {
      {"edge_api: {limits: {rate_limit: 0}}", "edge_api.limits.rate_limit"},
      {"edge_api: {limits: {max_frame_size: 10}}", "edge_api.limits.max_frame_size"},
      // Over the buffer in force (4 MiB): a frame of 4 MiB would reach no socket.
      {"edge_api: {limits: {max_frame_size: 4MiB}}", "must be at least twice max_frame_size"},
      {"edge_api: {limits: {max_buffer_size: 64KiB}}", "edge_api.limits.max_buffer_size"},
      {"edge_api: {limits: {buffer_overflow_policy: keep}}", "must be drop_oldest or disconnect"},
      {"edge_api: {limits: {rate_limt: 3}}", "rate_limt"},
      {"edge_api: {limit: {}}", "edge_api.limit"},
      {"edge_api: [1, 2]", "edge_api"},
      {"edge_api: {limits: {reattach_window: [1]}}", "edge_api.limits.reattach_window"},
      {"edge_api: {limits: {rate_limit: 5}", "delta"},  // not YAML
  };
  for (const auto& c : cases) {
    auto r = SplitPushConfigDelta(c.delta, current, "delta");
    ASSERT_FALSE(r) << c.delta;
    EXPECT_NE(r.error().ToString().find(c.words), std::string::npos)
        << c.delta << " → " << r.error().ToString();
  }
}

}  // namespace
}  // namespace edge::config
