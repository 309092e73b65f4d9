#include "sandbox/tool_registry.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "sandbox/sysinfo.h"

namespace edge::sandbox {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

TEST(ToolRegistryTest, ListsBuiltinsAndConfigTools) {
  auto reg = ToolRegistry::Make({{"grep", ToolConfig{{"grep", "{pattern}"}, 5s, ""}}});
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->List(),
            (std::vector<std::string>{"exec", "file.chmod", "file.delete", "file.glob", "file.list",
                                      "file.move", "file.read", "file.search", "file.stat",
                                      "file.write", "grep", "session.input", "session.signal",
                                      "session.start", "sysinfo"}));
  auto grep = reg->Find("grep");
  ASSERT_TRUE(grep.has_value());
  EXPECT_EQ((*grep)->kind, ToolKind::kConfig);
  EXPECT_EQ((*grep)->timeout, 5s);
  auto missing = reg->Find("nmap");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("'nmap'"), std::string::npos);
}

TEST(ToolRegistryTest, ConfigToolsCannotShadowBuiltinsOrHaveBadTemplates) {
  auto shadow = ToolRegistry::Make({{"exec", ToolConfig{{"sh"}, 0s, ""}}});
  ASSERT_FALSE(shadow.has_value());
  EXPECT_EQ(shadow.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(shadow.error().message.find("tools.exec"), std::string::npos);
  EXPECT_NE(shadow.error().message.find("built-in"), std::string::npos);
  auto bad = ToolRegistry::Make({{"t", ToolConfig{{"echo", "{unclosed"}, 0s, ""}}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("tools.t"), std::string::npos);
  EXPECT_NE(bad.error().message.find("unclosed"), std::string::npos);
}

TEST(ToolRegistryTest, InteractiveToolsAreMarkedAndTakeNoPlaceholders) {
  auto reg = ToolRegistry::Make({{"shell", ToolConfig{{"sh", "-i"}, 0s, "", true}},
                                 {"grep", ToolConfig{{"grep", "{pattern}"}, 0s, "", false}}});
  ASSERT_TRUE(reg.has_value()) << reg.error().ToString();
  EXPECT_TRUE((*reg->Find("shell"))->interactive);
  EXPECT_FALSE((*reg->Find("grep"))->interactive);
  EXPECT_EQ((*reg->Find("session.start"))->kind, ToolKind::kSessionStart);
  EXPECT_EQ((*reg->Find("file.search"))->kind, ToolKind::kFileSearch);
  auto holes = ToolRegistry::Make({{"agent", ToolConfig{{"run", "--model={m}"}, 0s, "", true}}});
  ASSERT_FALSE(holes.has_value());
  EXPECT_EQ(holes.error().message,
            "tools.agent.command: an interactive tool takes no placeholders ({m}): session.start "
            "has no args to fill them");
  auto shadow = ToolRegistry::Make({{"session.input", ToolConfig{{"sh"}, 0s, "", true}}});
  ASSERT_FALSE(shadow.has_value());
  EXPECT_NE(shadow.error().message.find("built-in"), std::string::npos);
}

TEST(ToolRegistryTest, SessionAndSearchArgs) {
  auto start = ToolRegistry::ParseSessionStartArgs(
      json{{"session_id", "3f1c-Ab_9.x"}, {"agent_name", "shell"}, {"workspace_path", "p/q"}});
  ASSERT_TRUE(start.has_value()) << start.error().ToString();
  EXPECT_EQ(start->session_id, "3f1c-Ab_9.x");
  EXPECT_EQ(start->agent_name, "shell");
  EXPECT_EQ(start->workspace_path, "p/q");
  EXPECT_TRUE(ToolRegistry::ValidateSessionId(std::string(128, 'x'), "f").has_value());
  EXPECT_FALSE(ToolRegistry::ValidateSessionId(std::string(129, 'x'), "f").has_value());
  EXPECT_FALSE(ToolRegistry::ValidateSessionId("a/b", "f").has_value());
  auto input = ToolRegistry::ParseSessionInputArgs(json{{"session_id", "s"}, {"line", ""}});
  ASSERT_TRUE(input.has_value()) << "an empty line is a line";
  auto sig = ToolRegistry::ParseSessionSignalArgs(json{{"session_id", "s"}, {"signal", "INT"}});
  ASSERT_TRUE(sig.has_value());
  EXPECT_EQ(sig->signal, SIGINT);
  auto search = ToolRegistry::ParseFileSearchArgs(json{{"query", "main"}});
  ASSERT_TRUE(search.has_value());
  EXPECT_EQ(search->limit, 20u);
  EXPECT_EQ(search->path, "");
  search = ToolRegistry::ParseFileSearchArgs(json{{"query", "x"}, {"limit", 1000}, {"path", "s"}});
  ASSERT_TRUE(search.has_value());
  EXPECT_EQ(search->limit, 1000u);
}

TEST(ToolRegistryTest, ExecArgs) {
  auto a = ToolRegistry::ParseExecArgs(json{{"command", "ls"},
                                            {"args", {"-l", "a b"}},
                                            {"mode", "argv"},
                                            {"cwd", "sub"},
                                            {"env", {{"K", "V"}}},
                                            {"stdin", "in"},
                                            {"timeout", "1m30s"}});
  ASSERT_TRUE(a.has_value()) << a.error().ToString();
  EXPECT_EQ(a->command, "ls");
  EXPECT_EQ(a->args, (std::vector<std::string>{"-l", "a b"}));
  EXPECT_FALSE(a->shell);
  EXPECT_EQ(a->cwd, "sub");
  EXPECT_EQ(a->env.at("K"), "V");
  EXPECT_EQ(a->stdin_data, "in");
  EXPECT_EQ(a->timeout, 90s);
  auto shell = ToolRegistry::ParseExecArgs(json{{"command", "ls"}, {"timeout", 2.5}});
  ASSERT_TRUE(shell.has_value());
  EXPECT_TRUE(shell->shell);
  EXPECT_EQ(shell->timeout, 2500ms);
  EXPECT_FALSE(shell->stdin_data.has_value());

  struct Bad {
    json args;
    std::string words;
  };
  for (const Bad& b :
       {Bad{json::object(), "'command': missing"}, Bad{json{{"command", 3}}, "'command'"},
        Bad{json{{"command", ""}}, "'command'"},
        Bad{json{{"command", "x"}, {"mode", "bash"}}, "'bash'"},
        Bad{json{{"command", "x"}, {"args", "a"}}, "'args'"},
        Bad{json{{"command", "x"}, {"args", {1}}}, "'args[0]'"},
        Bad{json{{"command", "x"}, {"env", {{"K", 1}}}}, "'env.K'"},
        Bad{json{{"command", "x"}, {"timeout", "10 parsecs"}}, "timeout"},
        Bad{json{{"command", "x"}, {"timeout", -1}}, "timeout"}, Bad{json::array(), "object"}}) {
    auto r = ToolRegistry::ParseExecArgs(b.args);
    ASSERT_FALSE(r.has_value()) << b.args.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(b.words), std::string::npos) << r.error().message;
  }
}

TEST(ToolRegistryTest, FileArgs) {
  auto read = ToolRegistry::ParseFileArgs(ToolKind::kFileRead,
                                          json{{"path", "a.txt"}, {"offset", 2}, {"length", 3}});
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->offset, 2u);
  EXPECT_EQ(read->length, 3u);
  // The content stays a view into the args, checked and counted ("hello"), not decoded.
  const json write_args{{"path", "b"}, {"content", "aGVsbG8="}, {"mode", "0600"}};
  auto write = ToolRegistry::ParseFileArgs(ToolKind::kFileWrite, write_args);
  ASSERT_TRUE(write.has_value());
  EXPECT_EQ(write->content_base64, "aGVsbG8=");
  EXPECT_EQ(write->content_base64.data(),
            write_args.at("content").get_ref<const std::string&>().data());
  EXPECT_EQ(write->content_size, 5u);
  EXPECT_EQ(write->mode, "0600");
  auto list = ToolRegistry::ParseFileArgs(ToolKind::kFileList, json::object());
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->path, "");
  auto del =
      ToolRegistry::ParseFileArgs(ToolKind::kFileDelete, json{{"path", "d"}, {"recursive", true}});
  ASSERT_TRUE(del.has_value());
  EXPECT_TRUE(del->recursive);

  auto no_path = ToolRegistry::ParseFileArgs(ToolKind::kFileStat, json::object());
  ASSERT_FALSE(no_path.has_value());
  EXPECT_NE(no_path.error().message.find("file.stat arg 'path': missing"), std::string::npos);
  auto neg = ToolRegistry::ParseFileArgs(ToolKind::kFileRead, json{{"path", "a"}, {"offset", -1}});
  ASSERT_FALSE(neg.has_value());
  EXPECT_NE(neg.error().message.find("'offset'"), std::string::npos);
  auto bad64 =
      ToolRegistry::ParseFileArgs(ToolKind::kFileWrite, json{{"path", "a"}, {"content", "a*=="}});
  ASSERT_FALSE(bad64.has_value());
  EXPECT_NE(bad64.error().message.find("'content'"), std::string::npos);
  auto rec =
      ToolRegistry::ParseFileArgs(ToolKind::kFileDelete, json{{"path", "a"}, {"recursive", "yes"}});
  ASSERT_FALSE(rec.has_value());
  EXPECT_NE(rec.error().message.find("'recursive'"), std::string::npos);
}

TEST(ToolRegistryTest, FileInfoJsonHasContractFields) {
  FileInfo info{"dir/a.txt", 12, "0644", false, Clock::WallTime(std::chrono::seconds(1700000000))};
  EXPECT_EQ(FileInfoToJson(info), (json{{"path", "dir/a.txt"},
                                        {"size", 12},
                                        {"mode", "0644"},
                                        {"is_dir", false},
                                        {"mod_time", "2023-11-14T22:13:20Z"}}));
}

TEST(ToolRegistryTest, SysinfoReportsHostFacts) {
  json s = CollectSysinfo("1.2.3");
  EXPECT_EQ(s["os"], "linux");
  EXPECT_EQ(s["agent_version"], "1.2.3");
  EXPECT_FALSE(s["kernel"].get<std::string>().empty());
  EXPECT_FALSE(s["arch"].get<std::string>().empty());
  EXPECT_GE(s["cpu_count"].get<long>(), 1);
  EXPECT_GT(s["memory_total_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(s["uptime_secs"].get<long>(), 0);
}

}  // namespace
}  // namespace edge::sandbox
