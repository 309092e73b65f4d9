#include "config/controller_config.h"

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
  const char* src = EDGE_SOURCE_DIR;
  auto c = LoadControllerConfig(std::string(src) + "/config/controller.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
}

}  // namespace
}  // namespace edge::config
