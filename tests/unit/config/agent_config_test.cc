#include "config/agent_config.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace edge::config {
namespace {

using std::chrono::milliseconds;

EnvLookup NoEnv() {
  return [](const std::string&) { return std::optional<std::string>(); };
}
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

AgentConfig LoadOk(const std::string& yaml, const EnvLookup& env = NoEnv()) {
  auto r = LoadAgentConfigFromString(yaml, "agent.yaml", env);
  EXPECT_TRUE(r) << (r ? "" : r.error().ToString());
  return r ? *r : AgentConfig{};
}

// The single issue a bad config produces, as text.
std::string OnlyError(const std::string& yaml, const EnvLookup& env = NoEnv()) {
  auto r = LoadAgentConfigFromString(yaml, "agent.yaml", env);
  if (r) return "<loaded>";
  EXPECT_EQ(r.error().issues.size(), 1u) << r.error().ToString();
  return r.error().ToString();
}

class TempFiles : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  edge::testing::TempDir tmp_{"cfg"};
  std::string dir_ = tmp_.path();
};

TEST(AgentConfig, DefaultsFromAnEmptyFile) {
  auto c = LoadOk("node_id: n1\n");
  EXPECT_EQ(c.data_dir, "/var/lib/edge-agent");
  EXPECT_EQ(c.cluster.heartbeat_interval_secs, 30);
  EXPECT_TRUE(c.edge.enabled);
  EXPECT_EQ(c.edge.max_concurrent_commands, 64);
  EXPECT_EQ(c.sandbox.provider, "local");
  EXPECT_EQ(c.sandbox.max_sandboxes, 10);
  EXPECT_EQ(c.sandbox.default_timeout, milliseconds(60'000));
  EXPECT_EQ(c.sandbox.max_output_bytes, 64ull << 20);
  EXPECT_EQ(c.sandbox.kill_grace, milliseconds(10'000));
  EXPECT_EQ(c.sandbox.root, "/var/lib/edge-agent/sandboxes");
  EXPECT_EQ(c.worker.worker_id, "n1");
  EXPECT_EQ(c.worker.heartbeat_interval, milliseconds(30'000));
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.log.format, "text");
}

TEST(AgentConfig, NodeIdDefaultsToAValidHostName) {
  auto c = LoadOk("data_dir: /tmp/x\n");
  EXPECT_FALSE(c.node_id.empty());
  EXPECT_TRUE(IsValidNodeId(c.node_id)) << c.node_id;
}

TEST(AgentConfig, ReadsEverySection) {
  auto c = LoadOk(R"(node_id: edge-07
data_dir: /srv/agent
controller: { address: "ctl.example.com:50056", ca_pin: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" }
cluster: { heartbeat_interval_secs: 5 }
edge: { enabled: false, max_concurrent_commands: 3 }
sandbox: { provider: bwrap, default_timeout: 1h30m, max_output_bytes: 512KiB, kill_grace: 250ms }
security_contexts:
  ops: { allowed_tools: ["file.*"], run_as: nobody, mount_points: ["/var/log"], limits: { max_concurrent: 2 } }
tools:
  uptime: { command: ["uptime"], security_context: ops }
compute:
  processors: { p1: { tool: uptime, timeout: 5s } }
labels: { site: lab }
)");
  EXPECT_EQ(c.controller.address, "ctl.example.com:50056");
  EXPECT_EQ(c.cluster.heartbeat_interval_secs, 5);
  EXPECT_FALSE(c.edge.enabled);
  EXPECT_EQ(c.sandbox.provider, "bwrap");
  EXPECT_EQ(c.sandbox.default_timeout, milliseconds(5'400'000));
  EXPECT_EQ(c.sandbox.max_output_bytes, 512u << 10);
  EXPECT_EQ(c.sandbox.kill_grace, milliseconds(250));
  EXPECT_EQ(c.security_contexts.at("ops").run_as, "nobody");
  EXPECT_EQ(c.security_contexts.at("ops").limits.max_concurrent, 2);
  EXPECT_EQ(c.tools.at("uptime").command, std::vector<std::string>{"uptime"});
  EXPECT_EQ(c.compute.processors.at("p1").tool, "uptime");
  EXPECT_EQ(c.labels.at("site"), "lab");
}

TEST(AgentConfig, SyntaxErrorNamesLineAndColumn) {
  EXPECT_EQ(OnlyError("node_id: a\nsandbox: [1, 2\n"),
            "agent.yaml:3:1: YAML syntax error: end of sequence flow not found");
}

TEST(AgentConfig, UnknownKeySuggestsTheNearestOne) {
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  max_sandboxs: 3\n"),
            "agent.yaml:3:3: sandbox.max_sandboxs: unknown key (did you mean \"max_sandboxes\"?)");
  EXPECT_EQ(OnlyError("node_id: a\ncompletely_wrong: 1\n"),
            "agent.yaml:2:1: completely_wrong: unknown key");
}

TEST(AgentConfig, OutOfRangeAndWrongTypes) {
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  max_sandboxes: -3\n"),
            "agent.yaml:3:18: sandbox.max_sandboxes: value \"-3\": must be an integer between 1 "
            "and 10000");
  EXPECT_EQ(OnlyError("node_id: a\nedge:\n  enabled: maybe\n"),
            "agent.yaml:3:12: edge.enabled: value \"maybe\": must be true or false");
  EXPECT_EQ(OnlyError("node_id: a\nsandbox: 5\n"),
            "agent.yaml:2:10: sandbox: value \"5\": must be a map");
  EXPECT_EQ(OnlyError("node_id: a\ncompute:\n  tags: lab\n"),
            "agent.yaml:3:9: compute.tags: value \"lab\": must be a list of strings");
}

TEST(AgentConfig, BadDurationAndSize) {
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  default_timeout: 30\n"),
            "agent.yaml:3:20: sandbox.default_timeout: value \"30\": must be a duration such as "
            "250ms, 30s, 5m or 1h30m");
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  max_output_bytes: 64MB\n"),
            "agent.yaml:3:21: sandbox.max_output_bytes: value \"64MB\": must be a size such as "
            "512KiB, 64MiB, 1GiB or a byte count");
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  default_timeout: 48h\n"),
            "agent.yaml:3:20: sandbox.default_timeout: value \"48h\": must be between 1s and 24h");
}

TEST(AgentConfig, BadNodeIdAndAddresses) {
  EXPECT_EQ(OnlyError("node_id: \"bad id!\"\n"),
            "agent.yaml:1:10: node_id: value \"bad id!\": must match [A-Za-z0-9._-]{1,64}");
  EXPECT_EQ(OnlyError("node_id: a\ncontroller:\n  address: ctl.example.com\n"),
            "agent.yaml:3:12: controller.address: value \"ctl.example.com\": must be host:port "
            "with a port between 1 and 65535");
  EXPECT_EQ(OnlyError("node_id: a\ncontroller:\n  ca_pin: md5:abc\n"),
            "agent.yaml:3:11: controller.ca_pin: value \"md5:abc\": must be sha256: followed by 64 "
            "hex digits");
}

TEST(AgentConfig, DanglingReferences) {
  EXPECT_EQ(OnlyError("node_id: a\ntools:\n  t: { command: [ls], security_context: nope }\n"),
            "agent.yaml:3:41: tools.t.security_context: value \"nope\": names no entry of "
            "security_contexts");
  EXPECT_EQ(OnlyError("node_id: a\ncompute:\n  criteria: { c1: { tool: missing } }\n"),
            "agent.yaml:3:27: compute.criteria.c1.tool: value \"missing\": names no built-in or "
            "configured tool");
  EXPECT_EQ(
      OnlyError("node_id: a\ntools:\n  exec: { command: [ls] }\n"),
      "agent.yaml:3:3: tools.exec: value \"exec\": is a built-in tool and cannot be redefined");
}

// wire.md §5.5: tools.<name>.interactive marks a session's process; sandbox.max_sessions caps
// the live sessions.
TEST(AgentConfig, InteractiveToolsAndMaxSessions) {
  auto defaults = LoadOk("node_id: a\ntools:\n  t: { command: [ls] }\n");
  EXPECT_EQ(defaults.sandbox.max_sessions, 8);
  EXPECT_FALSE(defaults.tools.at("t").interactive);

  auto c = LoadOk(
      "node_id: a\nsandbox: { max_sessions: 3 }\ntools:\n"
      "  claude: { command: [claude, --stdio], interactive: true, timeout: 8h }\n"
      "  ls: { command: [ls], interactive: false }\n");
  EXPECT_EQ(c.sandbox.max_sessions, 3);
  EXPECT_TRUE(c.tools.at("claude").interactive);
  EXPECT_EQ(c.tools.at("claude").timeout, milliseconds(8 * 3600 * 1000));
  EXPECT_FALSE(c.tools.at("ls").interactive);
  // The dump says both.
  const std::string dump = DumpRedacted(c);
  EXPECT_NE(dump.find("max_sessions: 3"), std::string::npos) << dump;
  EXPECT_NE(dump.find("interactive: true"), std::string::npos) << dump;
  // An environment override, validated like the file.
  EXPECT_EQ(
      LoadOk("node_id: a\n", Env({{"EDGE_AGENT_SANDBOX_MAX_SESSIONS", "2"}})).sandbox.max_sessions,
      2);
}

// sandbox.io_threads: the executor's event-loop threads, one unless the file or the
// environment says otherwise, 1-16, and a restart-only setting like the rest of sandbox.
TEST(AgentConfig, IoThreadsDefaultOverrideAndBounds) {
  EXPECT_EQ(LoadOk("node_id: a\n").sandbox.io_threads, 1);
  auto c = LoadOk("node_id: a\nsandbox: { io_threads: 4 }\n");
  EXPECT_EQ(c.sandbox.io_threads, 4);
  EXPECT_NE(DumpRedacted(c).find("io_threads: 4"), std::string::npos) << DumpRedacted(c);
  EXPECT_EQ(
      LoadOk("node_id: a\n", Env({{"EDGE_AGENT_SANDBOX_IO_THREADS", "2"}})).sandbox.io_threads, 2);
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  io_threads: 0\n"),
            "agent.yaml:3:15: sandbox.io_threads: value \"0\": must be an integer between 1 and "
            "16");
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  io_threads: 17\n"),
            "agent.yaml:3:15: sandbox.io_threads: value \"17\": must be an integer between 1 and "
            "16");
  EXPECT_EQ(OnlyError("node_id: a\n", Env({{"EDGE_AGENT_SANDBOX_IO_THREADS", "two"}})),
            "environment EDGE_AGENT_SANDBOX_IO_THREADS: sandbox.io_threads: value \"two\": must "
            "be an integer between 1 and 16");
}

TEST(AgentConfig, BadInteractiveAndMaxSessionsAreRefusedWithWhereAndWhy) {
  EXPECT_EQ(OnlyError("node_id: a\ntools:\n  t: { command: [sh], interactive: maybe }\n"),
            "agent.yaml:3:36: tools.t.interactive: value \"maybe\": must be true or false");
  EXPECT_EQ(OnlyError("node_id: a\ntools:\n  t: { command: [sh], interactive: [true] }\n"),
            "agent.yaml:3:36: tools.t.interactive: value \"<list>\": must be true or false");
  EXPECT_EQ(OnlyError("node_id: a\ntools:\n  t: { command: [sh], interactiv: true }\n"),
            "agent.yaml:3:23: tools.t.interactiv: unknown key (did you mean \"interactive\"?)");
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  max_sessions: 0\n"),
            "agent.yaml:3:17: sandbox.max_sessions: value \"0\": must be an integer between 1 "
            "and 1000");
  EXPECT_EQ(OnlyError("node_id: a\nsandbox:\n  max_sessions: many\n"),
            "agent.yaml:3:17: sandbox.max_sessions: value \"many\": must be an integer between 1 "
            "and 1000");
  EXPECT_EQ(OnlyError("node_id: a\n", Env({{"EDGE_AGENT_SANDBOX_MAX_SESSIONS", "1001"}})),
            "environment EDGE_AGENT_SANDBOX_MAX_SESSIONS: sandbox.max_sessions: value \"1001\": "
            "must be an "
            "integer between 1 and 1000");
  // The session tools are built-ins: a config tool cannot take their names.
  for (const char* name : {"session.start", "session.input", "session.signal", "file.search"}) {
    EXPECT_EQ(OnlyError("node_id: a\ntools:\n  " + std::string(name) + ": { command: [ls] }\n"),
              "agent.yaml:3:3: tools." + std::string(name) + ": value \"" + name +
                  "\": is a built-in tool and cannot be redefined");
  }
  // An interactive tool runs only through session.start: a compute handler cannot name it.
  EXPECT_EQ(OnlyError("node_id: a\ntools:\n  sh: { command: [sh], interactive: true }\n"
                      "compute:\n  processors: { p1: { tool: sh } }\n"),
            "agent.yaml:5:29: compute.processors.p1.tool: value \"sh\": names an interactive "
            "tool, which runs only through session.start");
}

TEST(AgentConfig, CollectsEveryProblemNotJustTheFirst) {
  auto r = LoadAgentConfigFromString(
      "node_id: a\nsandbox: { provider: lxc, max_sandboxes: 0 }\nlog: { level: loud }\n",
      "agent.yaml", NoEnv());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().issues.size(), 3u) << r.error().ToString();
}

TEST_F(TempFiles, SecretsFromFilesAndConflicts) {
  auto tok = Write("token", "secret-join-token-value\n");
  auto c = LoadAgentConfigFromString("node_id: a\ncontroller: { join_token_file: " + tok + " }\n",
                                     "agent.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->controller.join_token, "secret-join-token-value");

  EXPECT_EQ(OnlyError("node_id: a\nworker:\n  auth: { worker_token: abcdefgh, worker_token_file: " +
                      tok + " }\n"),
            "agent.yaml:3:54: worker.auth.worker_token_file: value \"" + tok +
                "\": set either worker_token or worker_token_file, not both");
  auto missing = OnlyError("node_id: a\ncontroller: { join_token_file: " + dir_ + "/nope }\n");
  EXPECT_NE(missing.find("controller.join_token_file: value \"" + dir_ +
                         "/nope\": cannot read secret file"),
            std::string::npos)
      << missing;
  auto empty = Write("empty", "\n");
  EXPECT_NE(OnlyError("node_id: a\ncontroller: { join_token_file: " + empty + " }\n")
                .find("secret file is empty"),
            std::string::npos);
}

TEST_F(TempFiles, LoadsFromAFileAndNamesItInErrors) {
  auto p = Write("agent.yaml", "node_id: a\nlog: { format: xml }\n");
  auto r = LoadAgentConfig(p, NoEnv());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ToString(),
            p + ":2:16: log.format: value \"xml\": must be one of text, json");
  auto none = LoadAgentConfig(dir_ + "/absent.yaml", NoEnv());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().ToString().find("absent.yaml: cannot read config file"),
            std::string::npos);
}

TEST(AgentConfig, EnvironmentOverridesWinAndAreValidated) {
  auto c = LoadOk("node_id: a\nlog: { level: info }\n",
                  Env({{"EDGE_AGENT_LOG_LEVEL", "debug"},
                       {"EDGE_AGENT_CLUSTER_HEARTBEAT_INTERVAL_SECS", "7"},
                       {"EDGE_AGENT_NODE_ID", "from-env"},
                       {"EDGE_AGENT_WORKER_AUTH_WORKER_TOKEN", "tok-from-env"}}));
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.cluster.heartbeat_interval_secs, 7);
  EXPECT_EQ(c.node_id, "from-env");
  EXPECT_EQ(c.worker.auth.worker_token, "tok-from-env");
  EXPECT_EQ(OnlyError("node_id: a\n", Env({{"EDGE_AGENT_SANDBOX_MAX_SANDBOXES", "lots"}})),
            "environment EDGE_AGENT_SANDBOX_MAX_SANDBOXES: sandbox.max_sandboxes: value \"lots\": "
            "must be an integer between 1 and 10000");
}

TEST(AgentConfig, RedactedDumpHidesEverySecret) {
  auto c = LoadOk(R"(node_id: a
controller: { join_token: "jt-secret-123456" }
worker:
  auth:
    worker_token: "wt-secret-123456"
    worker_tokens: { w1: "pw-secret-123456" }
    worker_signing_key: "sk-secret-123456"
    worker_signing_keys: ["old-secret-123456"]
)");
  std::string dump = DumpRedacted(c);
  for (const char* s : {"jt-secret", "wt-secret", "pw-secret", "sk-secret", "old-secret"}) {
    EXPECT_EQ(dump.find(s), std::string::npos) << s << " leaked:\n" << dump;
  }
  EXPECT_NE(dump.find("join_token: \"[REDACTED]\""), std::string::npos) << dump;
  // The dump is itself a valid config that loads to the same values (secrets aside).
  auto again = LoadAgentConfigFromString(dump, "dump", NoEnv());
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(again->node_id, "a");
}

TEST(AgentConfig, ExampleFileValidates) {
  auto c = LoadAgentConfig(edge::testing::SourceDir() + "/config/agent.yaml", NoEnv());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_TRUE(c->controller.join_token.empty()) << "the example must not carry a join token";
  EXPECT_TRUE(c->tools.contains("disk-usage"));
}

TEST(ApplyDelta, MergesMapsReplacesScalarsAndValidates) {
  auto base = LoadOk(
      "node_id: a\ncluster: { heartbeat_interval_secs: 30 }\nlabels: { site: lab, rack: r1 }\n");
  auto yaml = ApplyDelta(base, "cluster:\n  heartbeat_interval_secs: 5\nlabels: { site: field }\n");
  ASSERT_TRUE(yaml) << yaml.error().ToString();
  EXPECT_EQ(yaml->cluster.heartbeat_interval_secs, 5);
  EXPECT_EQ(yaml->labels.at("site"), "field");
  EXPECT_EQ(yaml->labels.at("rack"), "r1") << "maps merge key by key";
  EXPECT_EQ(yaml->node_id, "a");
  auto json = ApplyDelta(base, R"({"cluster":{"heartbeat_interval_secs":9}})");
  ASSERT_TRUE(json) << json.error().ToString();
  EXPECT_EQ(json->cluster.heartbeat_interval_secs, 9);
}

// Found by config_delta_fuzz (issue 16): yaml-cpp took a label key holding a NUL and bytes
// that are not UTF-8; merging the same delta twice then gave two different keys, and such a
// label could not travel in a protobuf string. YAML text is Unicode: refused, with where.
TEST(ApplyDelta, TextThatIsNotUnicodeIsRefusedWithItsPosition) {
  auto base = LoadOk("node_id: a\n");
  auto nul = ApplyDelta(base, std::string("labels:\n  ke\0y: v\n", 18));
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().ToString(),
            "config delta:2:5: YAML/JSON holds the control character 0x00 (YAML allows tab, LF "
            "and CR only)");
  auto latin1 = ApplyDelta(base, "labels:\n  site: caf\xe9\n");
  ASSERT_FALSE(latin1);
  EXPECT_EQ(latin1.error().ToString(), "config delta:2:12: YAML/JSON is not valid UTF-8");
  auto file = LoadAgentConfigFromString("node_id: a\nlabels: { s\xc3\xa9: \"x\x1by\" }\n",
                                        "agent.yaml", NoEnv());
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().ToString(),
            "agent.yaml:2:17: YAML holds the control character 0x1B (YAML allows tab, LF and CR "
            "only)");
  auto ok = ApplyDelta(base, "labels:\n  site: \"caf\xc3\xa9\"\r\n");
  ASSERT_TRUE(ok) << ok.error().ToString();
  EXPECT_EQ(ok->labels.at("site"), "caf\xc3\xa9");
}

// Found by config_delta_fuzz (issue 16): a key written twice in one mapping. yaml-cpp kept
// both; the checks read the first and the merge kept the last, so a delta accepted once was
// refused when applied again. Keys are unique: refused where the repeat is.
TEST(ApplyDelta, ARepeatedKeyIsRefusedWithBothPositions) {
  auto base = LoadOk("node_id: a\n");
  auto twice = ApplyDelta(base, "compute:\n  processors: ~\n  processors: {x: ~}\n");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().ToString(),
            "config delta:3:3: YAML/JSON repeats the key \"processors\" (first at line 2); keys "
            "are unique");
  auto json = ApplyDelta(base, R"({"labels":{"a":"1"},"labels":{"b":"2"}})");
  ASSERT_FALSE(json);
  EXPECT_NE(json.error().ToString().find("repeats the key \"labels\""), std::string::npos);
  auto file =
      LoadAgentConfigFromString("node_id: a\nlabels:\n  - x\nnode_id: b\n", "agent.yaml", NoEnv());
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().ToString(),
            "agent.yaml:4:1: YAML repeats the key \"node_id\" (first at line 1); keys are unique");
}

// The repeated-key check must not walk what aliases stand for: 40 levels of aliases, each
// doubling the last, stand for 2^40 nodes (a walk of the loaded graph never ended). The
// document is read once; it is refused for its unknown keys, not hung on.
TEST(AgentConfig, NestedAliasesAreReadInTheTimeOfTheirText) {
  std::string text = "l0: &l0 [x, x]\n";
  for (int i = 1; i < 40; ++i) {
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [*l" + std::to_string(i - 1) +
            ", *l" + std::to_string(i - 1) + "]\n";
  }
  auto cfg = LoadAgentConfigFromString(text, "agent.yaml", NoEnv());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().ToString().find("l0"), std::string::npos) << cfg.error().ToString();
  auto repeated = LoadAgentConfigFromString(text + "l7: again\n", "agent.yaml", NoEnv());
  ASSERT_FALSE(repeated);
  EXPECT_NE(repeated.error().ToString().find(
                "agent.yaml:41:1: YAML repeats the key \"l7\" (first at line 8)"),
            std::string::npos)
      << repeated.error().ToString();
}

// Issue 15 #9: block nesting has no brackets for the flow check to count; a compact `- - …`
// costs two bytes a level. Refused on the parser's events at the 65th level, naming where,
// before the loader (or yaml-cpp's own recursion) sees the rest.
TEST(AgentConfig, BlockNestingDeeperThan64LevelsIsRefusedWhereItGoesTooDeep) {
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += "- ";
  deep += "x\n";
  auto cfg = LoadAgentConfigFromString(deep, "agent.yaml", NoEnv());
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.error().ToString(),
            "agent.yaml:1:129: YAML nests collections more than 64 levels deep; the limit is 64");
  std::string fits = "labels:\n  a: x\nx:\n";
  for (int i = 0; i < 62; ++i)
    fits += "- ";
  fits += "x\n";
  auto ok = LoadAgentConfigFromString(fits, "agent.yaml", NoEnv());
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.error().ToString().find("levels deep"), std::string::npos) << ok.error().ToString();
}

TEST(ApplyDelta, RejectsUnknownKeysBadValuesAndNonMaps) {
  auto base = LoadOk("node_id: a\n");
  auto unknown = ApplyDelta(base, "clustr: { heartbeat_interval_secs: 5 }\n");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().ToString(),
            "config delta:1:1: clustr: unknown key (did you mean \"cluster\"?)");
  auto bad = ApplyDelta(base, R"({"cluster":{"heartbeat_interval_secs":0}})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().ToString().find("cluster.heartbeat_interval_secs: value \"0\""),
            std::string::npos);
  EXPECT_FALSE(ApplyDelta(base, "[1,2]"));
  EXPECT_FALSE(ApplyDelta(base, "{unclosed"));
}

// Issue 9 #7: "names something undefined" is a typed fact of the issue, not a phrase to search.
TEST(LoadAgentConfig, ReferencesToUndefinedNamesAreMarkedAsCrossReferences) {
  auto r = LoadAgentConfigFromString(
      "node_id: a\ntools:\n  t:\n    command: [x]\n    security_context: ghost\n"
      "sandbox:\n  max_sandboxes: -1\n",
      "agent.yaml", {});
  ASSERT_FALSE(r);
  int cross = 0, other = 0;
  for (const auto& i : r.error().issues) {
    (i.cross_reference ? cross : other) += 1;
    if (i.cross_reference) {
      EXPECT_EQ(i.key, "tools.t.security_context");
    }
  }
  EXPECT_EQ(cross, 1);
  EXPECT_EQ(other, 1);
}

// Issue 15 #9: a deeply nested document must be refused before any recursive code sees it.
TEST(ApplyDelta, DeepNestingIsRefusedNotRecursedInto) {
  auto base = LoadOk("node_id: a\n");
  const std::string deep = "labels: {x: " + std::string(100000, '[') + "]}\n";
  auto r = ApplyDelta(base, deep);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().ToString().find("100001 levels deep; the limit is 64"), std::string::npos)
      << r.error().ToString();
  // Brackets inside quotes and comments do not count; 64 levels are fine.
  auto quoted = ApplyDelta(base, "labels: {x: \"" + std::string(200, '[') + "\"} # [[[[[\n");
  EXPECT_TRUE(quoted) << quoted.error().ToString();
  auto file = LoadAgentConfigFromString("node_id: a\nlabels: " + std::string(70, '{') + "\n",
                                        "agent.yaml", {});
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().ToString().find("limit is 64"), std::string::npos);
}

}  // namespace
}  // namespace edge::config
