// Operator tags and fleet commands through the real binaries on loopback (issue 12): a real
// `edge-controller serve` (with http.listen) and real enrolled `edge-agent`s; the operator
// CLI (`tag`, `nodes`, `fleet invoke|get|list|cancel`, `commands`) and the REST extension
// (`/v1/edge/fleet/commands`, user tokens from `edge-controller user token create`).
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <set>

#include "http/client.h"
#include "tests/integration/operator_fixture.h"

namespace edge::testing {
namespace {

using nlohmann::json;

// Prints "out from <node>" on stdout and a line on stderr everywhere, and exits 3 on
// edge-03 (the exec's cwd is beneath the agent's data dir, agent-<node>).
constexpr const char* kFailsOnEdge03 =
    "command=for n in edge-01 edge-02 edge-03; do case \"$PWD\" in *agent-$n/*) "
    "echo \"out from $n\";; esac; done; echo err-line >&2; "
    "case \"$PWD\" in *agent-edge-03/*) exit 3;; esac";

class FleetTest : public OperatorFixture {
 protected:
  // Three agents of tenant "default", each with a `sleeper` tool (runs long, not denied).
  void StartThree() {
    const std::string sleeper =
        "tools:\n  sleeper:\n    command: [sleep, \"300\"]\n    timeout: 10m\n";
    for (const char* n : {"edge-01", "edge-02", "edge-03"})
      EnrollAndStart(n, sleeper);
  }
  json Json(const CommandResult& r) {
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }
  json FleetGet(const std::string& id) {
    auto r = Ctl({"fleet", "get", id, "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? Json(r) : json();
  }
  // Waits until every part of the fleet command has ended; returns the last `fleet get`.
  json WaitFleetDone(const std::string& id, std::chrono::seconds t = 60s) {
    json f;
    WaitUntil(
        [&] {
          f = FleetGet(id);
          return f.is_object() && f.value("state", "") == "completed";
        },
        t);
    return f;
  }
  static std::map<std::string, json> PartsByNode(const json& parts) {
    std::map<std::string, json> out;
    for (const auto& p : parts)
      out[p.value("node_id", "")] = p;
    return out;
  }
};

TEST_F(FleetTest, TagsAreTheOperatorsAndShowInNodesAndTheApi) {
  EnrollAndStart("edge-01", "labels:\n  role: from-the-node\n");
  auto add = Ctl({"tag", "--node", "edge-01", "add", "role=web", "zone=eu-1", "--format", "json"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_EQ(Json(add)["tags"], json::parse(R"({"role":"web","zone":"eu-1"})"));
  auto list = Ctl({"tag", "--node", "edge-01", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out, "role=web\nzone=eu-1\n");

  // Bad input: exit 2 with the rule; unknown node and absent tag: exit 1 naming them.
  auto bad_key = Ctl({"tag", "--node", "edge-01", "add", "bad key=x"});
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.err.find("tag key \"bad key\" has byte 4 (' ')"), std::string::npos)
      << bad_key.err;
  auto no_value = Ctl({"tag", "--node", "edge-01", "add", "role"});
  EXPECT_EQ(no_value.exit_code, 2);
  EXPECT_NE(no_value.err.find("must be KEY=VALUE"), std::string::npos) << no_value.err;
  auto comma = Ctl({"tag", "--node", "edge-01", "add", "role=a,b"});
  EXPECT_EQ(comma.exit_code, 2);
  EXPECT_NE(comma.err.find("byte 2 (',')"), std::string::npos) << comma.err;
  auto unknown = Ctl({"tag", "--node", "ghost", "add", "role=web"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("node \"ghost\" not found"), std::string::npos) << unknown.err;
  auto absent = Ctl({"tag", "--node", "edge-01", "remove", "team"});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("has no tag \"team\""), std::string::npos) << absent.err;
  auto wrong_value = Ctl({"tag", "--node", "edge-01", "remove", "zone=eu-2"});
  EXPECT_EQ(wrong_value.exit_code, 1);
  EXPECT_NE(wrong_value.err.find("is \"eu-1\", not \"eu-2\""), std::string::npos)
      << wrong_value.err;
  std::vector<std::string> too_many = {"tag", "--node", "edge-01", "add"};
  for (int i = 0; i < 31; ++i)
    too_many.push_back("k" + std::to_string(i) + "=v");
  auto over = Ctl(too_many);
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.err.find("would have 33 tags; at most 32"), std::string::npos) << over.err;

  // `nodes` (text and JSON) and GET /v1/edge/nodes show the tags; the node's own label of
  // the same name stays its own.
  json n = Node("edge-01");
  EXPECT_EQ(n["tags"], json::parse(R"({"role":"web","zone":"eu-1"})"));
  EXPECT_EQ(n["capabilities"]["labels"]["role"], "from-the-node");
  auto text = Ctl({"nodes"});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("role=web,zone=eu-1"), std::string::npos) << text.out;
  auto api = Http("GET", "/v1/edge/nodes", UserToken("alice", "default"));
  ASSERT_EQ(api.status, 200u) << api.body;
  EXPECT_EQ(Body(api)["nodes"][0]["tags"], json::parse(R"({"role":"web","zone":"eu-1"})"));

  // The node reconnecting (a new Hello with its labels) does not touch them.
  agents_.back()->Signal(SIGTERM);
  ASSERT_TRUE(agents_.back()->Wait(30s).has_value());
  ASSERT_TRUE(WaitConnected("edge-01", false));
  StartAgent("edge-01");
  ASSERT_TRUE(WaitConnected("edge-01", true));
  EXPECT_EQ(Node("edge-01")["tags"], json::parse(R"({"role":"web","zone":"eu-1"})"));

  auto removed = Ctl({"tag", "--node", "edge-01", "remove", "zone=eu-1", "role"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(Node("edge-01")["tags"], json::object());
  EXPECT_EQ(Body(Http("GET", "/v1/edge/nodes", UserToken("alice", "default")))["nodes"][0]["tags"],
            json::object());
}

TEST_F(FleetTest, AFleetCommandOverThreeAgentsWithOneFailing) {
  StartThree();
  for (const char* n : {"edge-01", "edge-02", "edge-03"})
    ASSERT_EQ(Ctl({"tag", "--node", n, "add", "role=web"}).exit_code, 0);

  auto r = Ctl({"fleet", "invoke", "--selector", "tag:role=web,os:linux", "--tool", "exec", "--arg",
                kFailsOnEdge03, "--timeout", "30s"});
  EXPECT_EQ(r.exit_code, 3) << "some part failed\n" << r.out << r.err;
  // Output tagged with the node, whole lines, stdout and stderr apart.
  for (const char* n : {"edge-01", "edge-02", "edge-03"}) {
    EXPECT_NE(r.out.find(std::string("[") + n + "] out from " + n + "\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.err.find(std::string("[") + n + "] err-line\n"), std::string::npos) << r.err;
  }
  // The per-node summary: node, state, exit code, duration, command.
  std::regex row(R"((edge-0\d)\s+(\w+)\s+(-?\d+|-)\s+(\S+)\s+([0-9a-f-]{36}))");
  std::map<std::string, std::smatch> rows;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), row);
       it != std::sregex_iterator(); ++it)
    rows[(*it)[1]] = *it;
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(rows["edge-01"][2], "ok");
  EXPECT_EQ(rows["edge-01"][3], "0");
  EXPECT_EQ(rows["edge-03"][3], "3");
  EXPECT_NE(r.out.find("3 part(s): 2 succeeded, 1 failed, 0 running"), std::string::npos) << r.out;
  std::smatch id_match;
  ASSERT_TRUE(std::regex_search(r.err, id_match, std::regex("fleet command ([0-9a-f-]{36})")));
  const std::string fleet_id = id_match[1];

  // Each part is an ordinary command, listed by `commands`, with its one result.
  auto commands = Json(Ctl({"commands", "--format", "json"}));
  std::set<std::string> listed;
  for (const auto& c : commands)
    listed.insert(c.value("command_id", ""));
  auto f = FleetGet(fleet_id);
  ASSERT_EQ(f["parts"].size(), 3u) << f.dump();
  EXPECT_EQ(f["selector"], "tag:role=web,os:linux");
  EXPECT_EQ(f["state"], "completed");
  for (const auto& p : f["parts"]) {
    const std::string node = p["node_id"];
    EXPECT_TRUE(listed.contains(p["command_id"].get<std::string>())) << node;
    EXPECT_EQ(p["command_id"], std::string(rows[node][5])) << node;
    auto c = Command(p["command_id"]);
    EXPECT_EQ(c["node_id"], node);
    EXPECT_EQ(c["result"]["exit_code"], node == "edge-03" ? 3 : 0) << c.dump();
    EXPECT_EQ(p["exit_code"], node == "edge-03" ? 3 : 0);
    EXPECT_GE(p["duration_ms"].get<int64_t>(), 0);
  }
  auto list = Ctl({"fleet", "list"});
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find(fleet_id), std::string::npos) << list.out;

  // All succeed → 0; --format json carries each node's output.
  auto ok = Ctl({"fleet", "invoke", "--selector", "tag:role=web", "--tool", "exec", "--arg",
                 "command=echo hi", "--format", "json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  auto j = Json(ok);
  ASSERT_EQ(j["parts"].size(), 3u);
  EXPECT_EQ(j["output_complete"], true);
  for (const auto& p : j["parts"]) {
    EXPECT_EQ(p["state"], "ok");
    EXPECT_EQ(p["stdout"], "hi\n");
  }
  // A selector matching one node.
  auto one = Ctl({"fleet", "invoke", "--selector", "node:edge-02", "--tool", "exec", "--arg",
                  "command=echo only", "--format", "json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(Json(one)["parts"].size(), 1u);

  // Bad selectors → 2 naming the term; no live match → 1; offline nodes do not take part.
  auto bad = Ctl({"fleet", "invoke", "--selector", "tag:role=web,color:blue", "--tool", "exec"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("selector term 2 \"color:blue\" has an unknown kind \"color\""),
            std::string::npos)
      << bad.err;
  auto empty = Ctl({"fleet", "invoke", "--selector", "", "--tool", "exec"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("selector is empty"), std::string::npos) << empty.err;
  auto none = Ctl({"fleet", "invoke", "--selector", "tag:role=db", "--tool", "sysinfo"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no live node matches selector \"tag:role=db\""), std::string::npos)
      << none.err;
  agents_[1]->Signal(SIGTERM);  // edge-02
  ASSERT_TRUE(agents_[1]->Wait(30s).has_value());
  ASSERT_TRUE(WaitConnected("edge-02", false));
  auto two = Ctl(
      {"fleet", "invoke", "--selector", "tag:role=web", "--tool", "sysinfo", "--format", "json"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto parts = PartsByNode(Json(two)["parts"]);
  EXPECT_EQ(parts.size(), 2u);
  EXPECT_FALSE(parts.contains("edge-02")) << "an offline node takes no part";
  auto offline = Ctl({"fleet", "invoke", "--selector", "node:edge-02", "--tool", "sysinfo"});
  EXPECT_EQ(offline.exit_code, 1);
  EXPECT_NE(offline.err.find("1 node(s) match but are not connected"), std::string::npos)
      << offline.err;
  EXPECT_EQ(Ctl({"fleet", "get", "no-such-id"}).exit_code, 1);
}

TEST_F(FleetTest, FleetCancelEndsEveryRunningPart) {
  StartThree();
  auto started = Ctl({"fleet", "invoke", "--selector", "os:linux", "--tool", "exec", "--arg",
                      "command=sleep 300; echo fleet-cancel-marker", "--detach"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string id = started.out;
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back())))
    id.pop_back();
  ASSERT_EQ(id.size(), 36u) << id;
  ASSERT_TRUE(WaitUntil([] { return ProcessWithMarker("fleet-cancel-marker"); }, 30s));
  auto running = FleetGet(id);
  EXPECT_EQ(running["state"], "running");

  auto cancel = Ctl({"fleet", "cancel", id});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_NE(cancel.out.find("cancel sent to 3 of 3 part(s)"), std::string::npos) << cancel.out;
  auto done = WaitFleetDone(id);
  ASSERT_EQ(done["state"], "completed") << done.dump();
  for (const auto& p : done["parts"]) {
    EXPECT_EQ(p["state"], "cancelled") << p.dump();
    EXPECT_EQ(p["error"]["code"], "CANCELLED");
  }
  EXPECT_FALSE(done["cancelled_at"].is_null());
  EXPECT_TRUE(WaitUntil([] { return !ProcessWithMarker("fleet-cancel-marker"); }, 30s))
      << "every part's process group is gone";
  // Cancelling again: nothing is running.
  auto again = Ctl({"fleet", "cancel", id});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("cancel sent to 0 of 3 part(s)"), std::string::npos) << again.out;

  // Ctrl-C on a streaming `fleet invoke` cancels its fleet command too: exit 130.
  ChildProcess cli(
      {ControllerBin(), "--config", ctl_->config_path(), "fleet", "invoke", "--selector",
       "os:linux", "--tool", "exec", "--arg", "command=sleep 300; echo fleet-sigint-marker"},
      dir_.path());
  ASSERT_TRUE(WaitUntil([] { return ProcessWithMarker("fleet-sigint-marker"); }, 30s))
      << cli.Stderr();
  ASSERT_TRUE(
      WaitUntil([&] { return cli.Stderr().find("fleet command") != std::string::npos; }, 30s));
  cli.Signal(SIGINT);
  auto rc = cli.Wait(30s);
  ASSERT_TRUE(rc.has_value()) << cli.Stderr();
  EXPECT_EQ(*rc, 130) << cli.Stdout() << cli.Stderr();
  EXPECT_NE(cli.Stdout().find("0 succeeded, 3 failed, 0 running"), std::string::npos)
      << cli.Stdout() << cli.Stderr();
  EXPECT_TRUE(WaitUntil([] { return !ProcessWithMarker("fleet-sigint-marker"); }, 30s));
}

TEST_F(FleetTest, RestFleetCommandsAreTenantScopedAndRefuseDeniedTools) {
  StartThree();
  // A fourth agent of another tenant.
  auto tok =
      Ctl({"token", "create", "--node", "other-01", "--tenant", "other", "--format", "json"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  WriteText(ConfigPath("other-01"), "node_id: other-01\ndata_dir: " + DataDir("other-01") +
                                        "\ncontroller:\n  join_token: \"" +
                                        Json(tok)["join_token"].get<std::string>() +
                                        "\"\nlog:\n  level: debug\n");
  StartAgent("other-01");
  ASSERT_TRUE(WaitConnected("other-01", true));

  const std::string alice = UserToken("alice", "default");
  const std::string mallory = UserToken("mallory", "other");

  auto created =
      Http("POST", "/v1/edge/fleet/commands", alice, R"({"selector":"os:linux","tool":"sysinfo"})");
  ASSERT_EQ(created.status, 202u) << created.body;
  auto c = Body(created);
  const std::string id = c["fleet_command_id"];
  auto parts = PartsByNode(c["parts"]);
  ASSERT_EQ(parts.size(), 3u) << created.body;
  EXPECT_FALSE(parts.contains("other-01")) << "another tenant's node never matches";
  for (const auto& [node, p] : parts)
    EXPECT_EQ(p["command_id"].get<std::string>().size(), 36u) << node;

  json got;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto g = Http("GET", "/v1/edge/fleet/commands/" + id, alice);
        got = Body(g);
        return g.status == 200 && got.value("state", "") == "completed";
      },
      60s))
      << got.dump();
  EXPECT_EQ(got["created_by"], "alice");
  for (const auto& p : got["parts"]) {
    EXPECT_EQ(p["state"], "ok") << p.dump();
    EXPECT_EQ(p["exit_code"], 0);
    EXPECT_TRUE(p["duration_ms"].is_number_integer());
    EXPECT_FALSE(p.contains("error"));
    EXPECT_EQ(p["command_id"], parts[p["node_id"]]["command_id"]);
  }
  // The admin CLI sees it too.
  EXPECT_EQ(FleetGet(id)["tenant_id"], "default");

  // Another tenant: the fleet command is 404, its own fleet only reaches its own node.
  EXPECT_EQ(Http("GET", "/v1/edge/fleet/commands/" + id, mallory).status, 404u);
  EXPECT_EQ(Http("POST", "/v1/edge/fleet/commands/" + id + "/cancel", mallory).status, 404u);
  auto theirs = Http("POST", "/v1/edge/fleet/commands", mallory,
                     R"({"selector":"os:linux","tool":"sysinfo"})");
  ASSERT_EQ(theirs.status, 202u) << theirs.body;
  ASSERT_EQ(Body(theirs)["parts"].size(), 1u);
  EXPECT_EQ(Body(theirs)["parts"][0]["node_id"], "other-01");
  auto by_id = Http("POST", "/v1/edge/fleet/commands", mallory,
                    R"({"selector":"node:edge-01","tool":"sysinfo"})");
  EXPECT_EQ(by_id.status, 404u) << by_id.body;
  EXPECT_EQ(Body(by_id)["code"], "NOT_FOUND");

  // Denied tools → 403; the admin socket may run them.
  for (const char* tool : {"exec", "file.write", "file.delete"}) {
    auto denied = Http("POST", "/v1/edge/fleet/commands", alice,
                       std::string(R"({"selector":"os:linux","tool":")") + tool +
                           R"(","args":{"command":"true"}})");
    EXPECT_EQ(denied.status, 403u) << tool << ": " << denied.body;
    EXPECT_EQ(Body(denied)["code"], "PERMISSION_DENIED") << denied.body;
    EXPECT_NE(Body(denied).value("message", "").find("http.denied_tools"), std::string::npos);
  }
  // Bad requests → 400 naming what is wrong; no token → 401; unknown id → 404.
  auto bad_selector = Http("POST", "/v1/edge/fleet/commands", alice,
                           R"({"selector":"os:linux,shape:round","tool":"sysinfo"})");
  EXPECT_EQ(bad_selector.status, 400u);
  EXPECT_EQ(Body(bad_selector)["code"], "INVALID_ARGUMENT");
  EXPECT_NE(Body(bad_selector).value("message", "").find("unknown kind \"shape\""),
            std::string::npos)
      << bad_selector.body;
  EXPECT_EQ(Http("POST", "/v1/edge/fleet/commands", alice, R"({"selector":"","tool":"x"})").status,
            400u);
  EXPECT_EQ(Http("POST", "/v1/edge/fleet/commands", alice, "not json").status, 400u);
  auto unknown_field = Http("POST", "/v1/edge/fleet/commands", alice,
                            R"({"selector":"os:linux","tool":"sysinfo","node":"x"})");
  EXPECT_EQ(unknown_field.status, 400u);
  EXPECT_NE(unknown_field.body.find("unknown field"), std::string::npos);
  auto anonymous = Http("POST", "/v1/edge/fleet/commands", "", R"({"selector":"os:linux"})");
  EXPECT_EQ(anonymous.status, 401u);
  EXPECT_EQ(Body(anonymous)["code"], "UNAUTHENTICATED");
  EXPECT_EQ(Http("GET", "/v1/edge/fleet/commands/nope", alice).status, 404u);

  // Cancel over REST: a long-running tool (not denied) on every node; each part ends.
  auto long_run =
      Http("POST", "/v1/edge/fleet/commands", alice, R"({"selector":"os:linux","tool":"sleeper"})");
  ASSERT_EQ(long_run.status, 202u) << long_run.body;
  const std::string long_id = Body(long_run)["fleet_command_id"];
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto f = FleetGet(long_id);
        return f.is_object() && f["parts"].size() == 3 &&
               std::all_of(f["parts"].begin(), f["parts"].end(),
                           [](const json& p) { return p["state"] == "running"; });
      },
      30s));
  auto cancel = Http("POST", "/v1/edge/fleet/commands/" + long_id + "/cancel", alice);
  ASSERT_EQ(cancel.status, 202u) << cancel.body;
  const json cancelled = Body(cancel);
  ASSERT_EQ(cancelled["parts"].size(), 3u) << cancel.body;
  for (const auto& p : cancelled["parts"])
    EXPECT_EQ(p["cancel"], "sent") << p.dump();
  json ended;
  ASSERT_TRUE(WaitUntil(
      [&] {
        ended = Body(Http("GET", "/v1/edge/fleet/commands/" + long_id, alice));
        return ended.value("state", "") == "completed";
      },
      60s))
      << ended.dump();
  for (const auto& p : ended["parts"]) {
    EXPECT_EQ(p["state"], "cancelled") << p.dump();
    EXPECT_EQ(p["error"]["code"], "CANCELLED");
    EXPECT_TRUE(p["exit_code"].is_null());
  }
  EXPECT_TRUE(ended["cancelled_at"].is_string());
}

}  // namespace
}  // namespace edge::testing
