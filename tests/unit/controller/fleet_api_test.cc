// The REST fleet extension's pieces without a server (controller/fleet_api.h): the POST body
// with each bad input's message, the JSON of parts and fleet commands, and the tags the
// operator API's node JSON now carries. The HTTP path through the real binaries:
// tests/integration/fleet_test.cc.
#include "controller/fleet_api.h"

#include <gtest/gtest.h>

#include "controller/operator_api.h"

namespace edge::controller {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string ErrorOf(const Result<FleetInvokeSpec>& r) {
  if (r) return "ok";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  return r.error().message;
}

TEST(FleetApiBody, TakesSelectorToolArgsAndTimeout) {
  auto spec = FleetApi::ParseInvokeBody(
      R"({"selector":"tag:role=web","tool":"sysinfo","args":{"a":[1,2]},"timeout_ms":1500})");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->selector, "tag:role=web");
  EXPECT_EQ(spec->tool, "sysinfo");
  EXPECT_EQ(json::parse(spec->args_json), json::parse(R"({"a":[1,2]})"));
  EXPECT_EQ(spec->deadline, 1500ms);
  EXPECT_TRUE(spec->tenant_id.empty()) << "the caller's to fill in";
  auto minimal = FleetApi::ParseInvokeBody(R"({"selector":"os:linux","tool":"sysinfo"})");
  ASSERT_TRUE(minimal);
  EXPECT_EQ(minimal->args_json, "");
  EXPECT_EQ(minimal->deadline, 0ms);
}

TEST(FleetApiBody, RefusesBadBodiesNamingTheField) {
  EXPECT_NE(ErrorOf(FleetApi::ParseInvokeBody("")).find("request body"), std::string::npos);
  EXPECT_NE(ErrorOf(FleetApi::ParseInvokeBody("{")).find("request body"), std::string::npos);
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody("[]")),
            "the request body must be a JSON object {selector, tool, args, timeout_ms}");
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody(R"({"tool":"sysinfo"})")),
            "selector is required, such as \"os:linux\"");
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody(R"({"selector":"os:linux"})")), "tool is required");
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody(R"({"selector":7,"tool":"x"})")),
            "selector must be a non-empty string, not 7");
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody(R"({"selector":"os:linux","tool":""})")),
            "tool must be a non-empty string, not \"\"");
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody(R"({"selector":"os:linux","tool":"x","args":[1]})")),
            "args must be a JSON object, not [1]");
  EXPECT_EQ(
      ErrorOf(FleetApi::ParseInvokeBody(R"({"selector":"os:linux","tool":"x","timeout_ms":-1})")),
      "timeout_ms must be an integer from 0 (the agent's default) to 86400000, not -1");
  EXPECT_NE(
      ErrorOf(FleetApi::ParseInvokeBody(R"({"selector":"os:linux","tool":"x","timeout_ms":1.5})"))
          .find("not 1.5"),
      std::string::npos);
  EXPECT_NE(ErrorOf(FleetApi::ParseInvokeBody(
                        R"({"selector":"os:linux","tool":"x","timeout_ms":86400001})"))
                .find("timeout_ms must be"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(FleetApi::ParseInvokeBody(R"({"selecter":"os:linux","tool":"x"})")),
            "unknown field \"selecter\" (the fields are selector, tool, args, timeout_ms)");
  // Deeper than the JSON limit: refused before it is parsed.
  std::string deep = R"({"selector":"os:linux","tool":"x","args":)" + std::string(100, '[') +
                     std::string(100, ']') + "}";
  EXPECT_NE(ErrorOf(FleetApi::ParseInvokeBody(deep)).find("nest"), std::string::npos);
}

TEST(FleetApiJson, PartsSayStateExitDurationAndError) {
  FleetPartView running{.node_id = "n1", .command_id = "c1", .state = "running"};
  EXPECT_EQ(FleetApi::PartJson(running),
            json::parse(R"({"node_id":"n1","command_id":"c1","state":"running",
                            "exit_code":null,"duration_ms":null,"output_capped":false})"));
  FleetPartView ok{
      .node_id = "n2", .command_id = "c2", .state = "ok", .exit_code = 3, .duration_ms = 1200};
  EXPECT_EQ(FleetApi::PartJson(ok), json::parse(R"({"node_id":"n2","command_id":"c2","state":"ok",
                                                   "exit_code":3,"duration_ms":1200,
                                                   "output_capped":false})"));
  FleetPartView capped = ok;
  capped.output_cap_note = "node n2 reached its output cap of 1MiB (sandbox.max_output_bytes)";
  EXPECT_EQ(FleetApi::PartJson(capped)["output_capped"], true);
  EXPECT_EQ(FleetApi::PartJson(capped)["output_cap_note"], capped.output_cap_note);
  FleetPartView refused{.node_id = "n3",
                        .state = "error",
                        .error_code = "UNAVAILABLE",
                        .error_message = "node n3 is not connected"};
  EXPECT_EQ(FleetApi::PartJson(refused)["error"],
            json::parse(R"({"code":"UNAVAILABLE","message":"node n3 is not connected"})"));
  EXPECT_EQ(FleetApi::PartJson(refused)["command_id"], "");

  FleetCommandView v;
  v.record = {.fleet_id = "f1",
              .created_by = "alice",
              .selector = "os:linux",
              .tool = "sysinfo",
              .args_json = R"({"x":1})",
              .created_at_ms = 1'700'000'000'000};
  v.parts = {ok, running};
  auto j = FleetApi::FleetJson(v);
  EXPECT_EQ(j["fleet_command_id"], "f1");
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["args"], json::parse(R"({"x":1})"));
  EXPECT_EQ(j["created_at"], "2023-11-14T22:13:20Z");
  EXPECT_TRUE(j["cancelled_at"].is_null());
  ASSERT_EQ(j["parts"].size(), 2u);
  v.parts = {ok};
  EXPECT_EQ(FleetApi::FleetJson(v)["state"], "completed");
}

TEST(OperatorApiNodeJson, CarriesTheOperatorsTagsNotTheLabels) {
  NodeView v;
  v.node = {.node_id = "edge-01", .tenant_id = "t1", .state = kNodeHealthy};
  (*v.capabilities.mutable_custom_labels())["role"] = "label-value";
  EXPECT_EQ(OperatorApi::NodeJson(v, 0, 90s)["tags"], json::object());
  v.tags = {{"role", "web"}, {"zone", "a"}};
  EXPECT_EQ(OperatorApi::NodeJson(v, 0, 90s)["tags"], json::parse(R"({"role":"web","zone":"a"})"));
}

}  // namespace
}  // namespace edge::controller
