#include "sandbox/tool_registry.h"

#include "common/utf8.h"

#include <signal.h>

#include <cctype>
#include <cmath>
#include <ctime>

namespace edge::sandbox {
namespace {

using json = nlohmann::json;

const std::map<std::string, ToolKind>& Builtins() {
  static const std::map<std::string, ToolKind> kBuiltins = {
      {"exec", ToolKind::kExec},
      {"file.read", ToolKind::kFileRead},
      {"file.write", ToolKind::kFileWrite},
      {"file.list", ToolKind::kFileList},
      {"file.stat", ToolKind::kFileStat},
      {"file.delete", ToolKind::kFileDelete},
      {"file.move", ToolKind::kFileMove},
      {"file.chmod", ToolKind::kFileChmod},
      {"file.glob", ToolKind::kFileGlob},
      {"file.search", ToolKind::kFileSearch},
      {"sysinfo", ToolKind::kSysinfo},
      {"session.start", ToolKind::kSessionStart},
      {"session.input", ToolKind::kSessionInput},
      {"session.signal", ToolKind::kSessionSignal}};
  return kBuiltins;
}

Status RequireObject(const json& args, std::string_view tool) {
  if (args.is_null() || args.is_object()) return OkStatus();
  return MakeError(
      ErrorCode::kInvalidArgument,
      "args of " + std::string(tool) + ": must be a JSON object, got " + args.type_name());
}

// The string arg `field` of `args`, viewed in place (file contents can be hundreds of MB),
// empty when absent and not `required`.
Result<std::string_view> StringArg(const json& args, const char* field, std::string_view tool,
                                   bool required) {
  if (args.is_null() || !args.contains(field) || args.at(field).is_null()) {
    if (required) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(tool) + " arg '" + field + "': missing (a string is required)");
    }
    return std::string_view();
  }
  const json& v = args.at(field);
  if (!v.is_string()) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(tool) + " arg '" + field +
                                                      "': must be a string, got " + v.type_name());
  }
  const auto& s = v.get_ref<const std::string&>();
  if (s.find('\0') != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(tool) + " arg '" + field + "': must not contain a NUL byte");
  }
  return s;
}

Result<std::string> OptString(const json& args, const char* field, std::string_view tool,
                              bool required) {
  auto s = StringArg(args, field, tool, required);
  if (!s) return std::unexpected(s.error());
  return std::string(*s);
}

Result<std::optional<uint64_t>> OptUint(const json& args, const char* field,
                                        std::string_view tool) {
  if (args.is_null() || !args.contains(field) || args.at(field).is_null()) {
    return std::optional<uint64_t>{};
  }
  const json& v = args.at(field);
  if (v.is_number_unsigned()) return std::optional<uint64_t>(v.get<uint64_t>());
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    return std::optional<uint64_t>(static_cast<uint64_t>(v.get<int64_t>()));
  }
  return MakeError(
      ErrorCode::kInvalidArgument,
      std::string(tool) + " arg '" + field + "': must be a non-negative integer, got " + v.dump());
}

}  // namespace

Result<ToolRegistry> ToolRegistry::Make(const std::map<std::string, ToolConfig>& config_tools) {
  ToolRegistry reg;
  for (const auto& [name, kind] : Builtins()) {
    reg.tools_.emplace(name, ToolDefinition{name, kind, std::nullopt, {}, {}});
  }
  for (const auto& [name, cfg] : config_tools) {
    if (name.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "tools: a tool name is empty");
    }
    if (Builtins().contains(name)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "tools." + name + ": the name is taken by a built-in tool");
    }
    auto tmpl = ToolTemplate::Parse(cfg.command);
    if (!tmpl) {
      return MakeError(ErrorCode::kInvalidArgument, "tools." + name + "." + tmpl.error().message);
    }
    if (cfg.timeout.count() < 0) {
      return MakeError(ErrorCode::kInvalidArgument, "tools." + name + ".timeout: must be >= 0");
    }
    if (cfg.interactive && !tmpl->placeholders().empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "tools." + name + ".command: an interactive tool takes no placeholders ({" +
                           tmpl->placeholders().front() +
                           "}): session.start has no args to fill them");
    }
    reg.tools_.emplace(name, ToolDefinition{name, ToolKind::kConfig, std::move(*tmpl), cfg.timeout,
                                            cfg.security_context, cfg.interactive});
  }
  return reg;
}

std::vector<std::string> ToolRegistry::List() const {
  std::vector<std::string> out;
  for (const auto& [name, def] : tools_)
    out.push_back(name);
  return out;
}

Result<const ToolDefinition*> ToolRegistry::Find(std::string_view name) const {
  auto it = tools_.find(name);
  if (it == tools_.end()) {
    return MakeError(ErrorCode::kNotFound, "tool '" + std::string(name) + "' is not known");
  }
  return &it->second;
}

Result<ExecArgs> ToolRegistry::ParseExecArgs(const json& args) {
  if (auto st = RequireObject(args, "exec"); !st) return std::unexpected(st.error());
  ExecArgs out;
  auto command = OptString(args, "command", "exec", true);
  if (!command) return std::unexpected(command.error());
  if (command->empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "exec arg 'command': must not be empty");
  }
  out.command = *command;
  if (!args.is_null() && args.contains("args") && !args.at("args").is_null()) {
    const json& a = args.at("args");
    if (!a.is_array()) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          std::string("exec arg 'args': must be an array of strings, got ") + a.type_name());
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string() || a[i].get_ref<const std::string&>().find('\0') != std::string::npos) {
        return MakeError(ErrorCode::kInvalidArgument, "exec arg 'args[" + std::to_string(i) +
                                                          "]': must be a string without NUL");
      }
      out.args.push_back(a[i].get<std::string>());
    }
  }
  auto mode = OptString(args, "mode", "exec", false);
  if (!mode) return std::unexpected(mode.error());
  if (*mode == "" || *mode == "shell") {
    out.shell = true;
  } else if (*mode == "argv") {
    out.shell = false;
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "exec arg 'mode': '" + *mode + "' is not one of \"\", \"shell\", \"argv\"");
  }
  auto cwd = OptString(args, "cwd", "exec", false);
  if (!cwd) return std::unexpected(cwd.error());
  out.cwd = *cwd;
  if (!args.is_null() && args.contains("env") && !args.at("env").is_null()) {
    const json& e = args.at("env");
    if (!e.is_object()) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          std::string("exec arg 'env': must be an object of strings, got ") + e.type_name());
    }
    for (const auto& [k, v] : e.items()) {
      if (!v.is_string()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "exec arg 'env." + k + "': must be a string, got " + v.type_name());
      }
      out.env[k] = v.get<std::string>();
    }
  }
  if (!args.is_null() && args.contains("stdin") && !args.at("stdin").is_null()) {
    auto in = OptString(args, "stdin", "exec", true);
    if (!in) return std::unexpected(in.error());
    out.stdin_data = *in;
  }
  if (!args.is_null() && args.contains("timeout") && !args.at("timeout").is_null()) {
    auto t = ParseDurationArg(args.at("timeout"), "exec arg 'timeout'");
    if (!t) return std::unexpected(t.error());
    out.timeout = *t;
  }
  return out;
}

Result<FileArgs> ToolRegistry::ParseFileArgs(ToolKind kind, const json& args) {
  const char* tool = "file";
  for (const auto& [name, k] : Builtins()) {
    if (k == kind) tool = name.c_str();
  }
  if (auto st = RequireObject(args, tool); !st) return std::unexpected(st.error());
  FileArgs out;
  const char* path_key = kind == ToolKind::kFileMove   ? "old_path"
                         : kind == ToolKind::kFileGlob ? "pattern"
                                                       : "path";
  auto path = OptString(args, path_key, tool, kind != ToolKind::kFileList);
  if (!path) return std::unexpected(path.error());
  out.path = *path;
  if (kind == ToolKind::kFileMove) {
    auto to = OptString(args, "new_path", tool, true);
    if (!to) return std::unexpected(to.error());
    out.new_path = *to;
  }
  if (kind == ToolKind::kFileChmod) {
    auto mode = OptString(args, "mode", tool, true);
    if (!mode) return std::unexpected(mode.error());
    out.mode = *mode;
  }
  if (kind == ToolKind::kFileRead) {
    auto off = OptUint(args, "offset", tool);
    if (!off) return std::unexpected(off.error());
    out.offset = off->value_or(0);
    auto len = OptUint(args, "length", tool);
    if (!len) return std::unexpected(len.error());
    out.length = *len;
  }
  if (kind == ToolKind::kFileWrite) {
    auto content = StringArg(args, "content", tool, true);
    if (!content) return std::unexpected(content.error());
    auto size = Base64Validate(*content, "file.write arg 'content'");
    if (!size) return std::unexpected(size.error());
    out.content_base64 = *content;
    out.content_size = *size;
    auto mode = OptString(args, "mode", tool, false);
    if (!mode) return std::unexpected(mode.error());
    out.mode = *mode;
  }
  if (kind == ToolKind::kFileDelete && !args.is_null() && args.contains("recursive") &&
      !args.at("recursive").is_null()) {
    if (!args.at("recursive").is_boolean()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("file.delete arg 'recursive': must be a bool, got ") +
                           args.at("recursive").type_name());
    }
    out.recursive = args.at("recursive").get<bool>();
  }
  return out;
}

Status ToolRegistry::ValidateSessionId(std::string_view id, std::string_view field) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(field) + ": '" + ToValidUtf8(id.substr(0, 64)) + "' " + why);
  };
  if (id.empty()) return MakeError(ErrorCode::kInvalidArgument, std::string(field) + ": empty");
  if (id.size() > kMaxSessionIdBytes) {
    return bad("is " + std::to_string(id.size()) + " bytes, more than " +
               std::to_string(kMaxSessionIdBytes));
  }
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return bad("must match [A-Za-z0-9._-]{1,128}");
    }
  }
  return OkStatus();
}

Result<SessionStartArgs> ToolRegistry::ParseSessionStartArgs(const json& args) {
  constexpr const char* kTool = "session.start";
  if (auto st = RequireObject(args, kTool); !st) return std::unexpected(st.error());
  SessionStartArgs out;
  auto id = OptString(args, "session_id", kTool, true);
  if (!id) return std::unexpected(id.error());
  if (auto st = ValidateSessionId(*id, "session.start arg 'session_id'"); !st) {
    return std::unexpected(st.error());
  }
  out.session_id = *id;
  auto agent = OptString(args, "agent_name", kTool, true);
  if (!agent) return std::unexpected(agent.error());
  if (agent->empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "session.start arg 'agent_name': empty (name an interactive tool)");
  }
  out.agent_name = *agent;
  auto ws = OptString(args, "workspace_path", kTool, false);
  if (!ws) return std::unexpected(ws.error());
  out.workspace_path = *ws;
  return out;
}

Result<SessionInputArgs> ToolRegistry::ParseSessionInputArgs(const json& args) {
  constexpr const char* kTool = "session.input";
  if (auto st = RequireObject(args, kTool); !st) return std::unexpected(st.error());
  SessionInputArgs out;
  auto id = OptString(args, "session_id", kTool, true);
  if (!id) return std::unexpected(id.error());
  if (auto st = ValidateSessionId(*id, "session.input arg 'session_id'"); !st) {
    return std::unexpected(st.error());
  }
  out.session_id = *id;
  auto line = OptString(args, "line", kTool, true);
  if (!line) return std::unexpected(line.error());
  if (line->size() > kMaxSessionLineBytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "session.input arg 'line': " + std::to_string(line->size()) +
                         " bytes, more than the " + std::to_string(kMaxSessionLineBytes) +
                         " a line may have");
  }
  if (auto nl = line->find('\n'); nl != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "session.input arg 'line': contains a newline at byte " + std::to_string(nl) +
                         " (one line per call; the agent adds the newline)");
  }
  out.line = *line;
  return out;
}

Result<SessionSignalArgs> ToolRegistry::ParseSessionSignalArgs(const json& args) {
  constexpr const char* kTool = "session.signal";
  if (auto st = RequireObject(args, kTool); !st) return std::unexpected(st.error());
  SessionSignalArgs out;
  auto id = OptString(args, "session_id", kTool, true);
  if (!id) return std::unexpected(id.error());
  if (auto st = ValidateSessionId(*id, "session.signal arg 'session_id'"); !st) {
    return std::unexpected(st.error());
  }
  out.session_id = *id;
  auto sig = OptString(args, "signal", kTool, true);
  if (!sig) return std::unexpected(sig.error());
  if (*sig == "INT") {
    out.signal = SIGINT;
  } else if (*sig == "TERM") {
    out.signal = SIGTERM;
  } else {
    return MakeError(ErrorCode::kInvalidArgument, "session.signal arg 'signal': '" +
                                                      ToValidUtf8(sig->substr(0, 64)) +
                                                      "' is not one of \"INT\", \"TERM\"");
  }
  out.signal_name = *sig;
  return out;
}

Result<FileSearchArgs> ToolRegistry::ParseFileSearchArgs(const json& args) {
  constexpr const char* kTool = "file.search";
  if (auto st = RequireObject(args, kTool); !st) return std::unexpected(st.error());
  FileSearchArgs out;
  auto path = OptString(args, "path", kTool, false);
  if (!path) return std::unexpected(path.error());
  out.path = *path;
  auto query = OptString(args, "query", kTool, true);
  if (!query) return std::unexpected(query.error());
  if (query->size() > 1024) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "file.search arg 'query': " + std::to_string(query->size()) + " bytes, more than 1024");
  }
  out.query = *query;
  auto limit = OptUint(args, "limit", kTool);
  if (!limit) return std::unexpected(limit.error());
  if (limit->has_value()) {
    if (**limit == 0 || **limit > kMaxSearchLimit) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "file.search arg 'limit': " + std::to_string(**limit) +
                           " is not between 1 and " + std::to_string(kMaxSearchLimit));
    }
    out.limit = static_cast<size_t>(**limit);
  }
  return out;
}

Result<std::chrono::milliseconds> ParseDurationArg(const json& value, std::string_view field) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(field) + ": " + value.dump() + " " + why);
  };
  if (value.is_number()) {
    double secs = value.get<double>();
    if (!std::isfinite(secs) || secs < 0 || secs > 1e9) {
      return bad("must be a number of seconds >= 0");
    }
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(secs * 1000)));
  }
  if (!value.is_string()) return bad("must be seconds or a duration such as \"30s\"");
  const std::string& s = value.get_ref<const std::string&>();
  if (s.empty()) return bad("must not be empty");
  double total_ms = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'))
      ++i;
    if (i == start) return bad("is not a duration such as \"1m30s\"");
    double n = std::strtod(s.substr(start, i - start).c_str(), nullptr);
    size_t ustart = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i])))
      ++i;
    std::string unit = s.substr(ustart, i - ustart);
    double mult = unit == "ms"  ? 1
                  : unit == "s" ? 1000
                  : unit == "m" ? 60000
                  : unit == "h" ? 3600000
                                : -1;
    if (mult < 0) return bad("has unit '" + unit + "' (use ms, s, m or h)");
    total_ms += n * mult;
  }
  if (total_ms > 1e12) return bad("is too long");
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
}

void PutBytes(json& obj, const std::string& key, std::string_view bytes) {
  if (IsValidUtf8(bytes)) {
    obj[key] = std::string(bytes);
    return;
  }
  obj[key] = ToValidUtf8(bytes);
  obj[key + "_base64"] = Base64Encode(bytes);
}

json FileInfoToJson(const FileInfo& info) {
  std::time_t t = std::chrono::system_clock::to_time_t(info.mod_time);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  json out = json::object();
  PutBytes(out, "path", info.path);
  out["size"] = info.size;
  out["mode"] = info.mode;
  out["is_dir"] = info.is_dir;
  out["mod_time"] = buf;
  return out;
}

}  // namespace edge::sandbox
