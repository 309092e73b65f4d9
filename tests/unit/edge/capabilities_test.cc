// BuildCapabilities: os/arch from uname(2), the executor's tools, the security contexts' mount
// points (sorted, unique), the config's labels plus agent.version, and agent.state=draining
// only while draining.
#include "agent/edge/capabilities.h"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace edge::agentedge {
namespace {

std::vector<std::string> ToVector(const google::protobuf::RepeatedPtrField<std::string>& f) {
  return {f.begin(), f.end()};
}

config::AgentConfig Config() {
  config::AgentConfig cfg;
  cfg.node_id = "edge-01";
  cfg.labels = {{"site", "lab"}, {"rack", "r7"}};
  cfg.security_contexts["build"].mount_points = {"/srv/cache", "/data"};
  cfg.security_contexts["ops"].mount_points = {"/data", "/var/log"};
  cfg.security_contexts["none"];  // no mount points
  return cfg;
}

TEST(CapabilitiesTest, OsAndArchComeFromUname) {
  struct utsname u {};
  ASSERT_EQ(::uname(&u), 0);
  std::string os = u.sysname;
  for (auto& c : os)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  auto caps = BuildCapabilities(Config(), {}, "1.2.3", false);
  EXPECT_EQ(caps.os(), os);
  EXPECT_EQ(caps.arch(), std::string(u.machine));
  EXPECT_FALSE(caps.os().empty());
  EXPECT_FALSE(caps.arch().empty());
}

TEST(CapabilitiesTest, ToolsAreTheExecutorsTools) {
  const std::vector<std::string> tools = {"sysinfo", "exec", "file.read", "backup"};
  auto caps = BuildCapabilities(Config(), tools, "1.2.3", false);
  auto got = ToVector(caps.local_tools());
  EXPECT_EQ(got.size(), tools.size());
  for (const auto& t : tools)
    EXPECT_NE(std::find(got.begin(), got.end(), t), got.end()) << t;

  EXPECT_EQ(BuildCapabilities(Config(), {}, "1.2.3", false).local_tools_size(), 0);
}

TEST(CapabilitiesTest, MountPointsAreSortedAndUnique) {
  auto caps = BuildCapabilities(Config(), {}, "1.2.3", false);
  EXPECT_EQ(ToVector(caps.mount_points()),
            (std::vector<std::string>{"/data", "/srv/cache", "/var/log"}));

  config::AgentConfig bare;
  EXPECT_EQ(BuildCapabilities(bare, {}, "1.2.3", false).mount_points_size(), 0);
}

TEST(CapabilitiesTest, LabelsAreTheConfigsPlusAgentVersion) {
  auto caps = BuildCapabilities(Config(), {}, "1.2.3", false);
  const auto& labels = caps.custom_labels();
  EXPECT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels.at("site"), "lab");
  EXPECT_EQ(labels.at("rack"), "r7");
  EXPECT_EQ(labels.at(kAgentVersionLabel), "1.2.3");
  EXPECT_EQ(std::string(kAgentVersionLabel), "agent.version");
  EXPECT_FALSE(labels.contains(kAgentStateLabel));
  // The largest message this end of the stream takes (edge.max_message_bytes, 16 MiB default).
  EXPECT_EQ(labels.at("agent.max_message_bytes"), "16777216");
}

TEST(CapabilitiesTest, TheMessageLimitIsTheConfigsAndNotALabelOfTheConfig) {
  auto cfg = Config();
  cfg.edge.max_message_bytes = 1048576;
  cfg.labels["agent.max_message_bytes"] = "999999999";
  auto caps = BuildCapabilities(cfg, {}, "1.2.3", false);
  EXPECT_EQ(caps.custom_labels().at("agent.max_message_bytes"), "1048576");
}

TEST(CapabilitiesTest, DrainingIsAdvertised) {
  auto caps = BuildCapabilities(Config(), {"exec"}, "1.2.3", true);
  const auto& labels = caps.custom_labels();
  ASSERT_TRUE(labels.contains(kAgentStateLabel));
  EXPECT_EQ(std::string(kAgentStateLabel), "agent.state");
  EXPECT_EQ(labels.at(kAgentStateLabel), "draining");
  // Everything else is unchanged.
  EXPECT_EQ(labels.at("site"), "lab");
  EXPECT_EQ(labels.at(kAgentVersionLabel), "1.2.3");
  EXPECT_EQ(ToVector(caps.local_tools()), (std::vector<std::string>{"exec"}));
}

TEST(CapabilitiesTest, AgentVersionIsNotOverriddenByAConfigLabel) {
  config::AgentConfig cfg = Config();
  cfg.labels[kAgentVersionLabel] = "spoofed";
  auto caps = BuildCapabilities(cfg, {}, "1.2.3", false);
  EXPECT_EQ(caps.custom_labels().at(kAgentVersionLabel), "1.2.3");
}

TEST(CapabilitiesTest, AConfigLabelCannotClaimTheAgentIsDraining) {
  config::AgentConfig cfg = Config();
  cfg.labels[kAgentStateLabel] = "draining";
  auto caps = BuildCapabilities(cfg, {}, "1.2.3", false);
  EXPECT_FALSE(caps.custom_labels().contains(kAgentStateLabel));
  EXPECT_EQ(caps.custom_labels().at("site"), "lab") << "other labels are kept";
}

// wire.md §5.5: the controller learns which tools can be a session's agent_name from the
// label agent.interactive_tools (sorted, comma-separated; absent when there is none).
TEST(CapabilitiesTest, InteractiveToolsAreAdvertisedSortedInTheirLabel) {
  config::AgentConfig cfg = Config();
  EXPECT_FALSE(BuildCapabilities(cfg, {}, "1.2.3", false)
                   .custom_labels()
                   .contains(kAgentInteractiveToolsLabel))
      << "no interactive tool, no label";
  cfg.tools["zsh-agent"] = {{"zsh"}, {}, "", true};
  cfg.tools["backup"] = {{"tar", "c", "."}, {}, "", false};
  cfg.tools["claude"] = {{"claude", "--stdio"}, {}, "", true};
  cfg.labels[kAgentInteractiveToolsLabel] = "spoofed";  // the agent's label, not the config's
  auto caps = BuildCapabilities(cfg, {"backup", "claude", "zsh-agent"}, "1.2.3", false);
  EXPECT_EQ(std::string(kAgentInteractiveToolsLabel), "agent.interactive_tools");
  EXPECT_EQ(caps.custom_labels().at(kAgentInteractiveToolsLabel), "claude,zsh-agent");
  EXPECT_EQ(ToVector(caps.local_tools()),
            (std::vector<std::string>{"backup", "claude", "zsh-agent"}));
}

}  // namespace
}  // namespace edge::agentedge
