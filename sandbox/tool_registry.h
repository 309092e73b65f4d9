// ToolRegistry: the tools this agent offers (the edge stream advertises List()) and how a
// call's JSON args become a typed request. Built-ins: exec, file.read, file.write, file.list,
// file.stat, file.delete, file.move, file.chmod, file.glob, file.search, sysinfo, and the
// session tools session.start, session.input, session.signal (wire.md §5.5); plus the tools
// from config (`tools.<name>`: argv template, timeout, security context, interactive). An
// interactive config tool runs only as a session's process (session.start), never by its
// own name. Running them is the Executor's job; this class only knows names, kinds and arg
// shapes, with the same INVALID_ARGUMENT messages on every door. Immutable after Make.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.h"
#include "common/error.h"
#include "sandbox/sandbox_types.h"
#include "sandbox/tool_template.h"

namespace edge::sandbox {

enum class ToolKind {
  kExec,
  kFileRead,
  kFileWrite,
  kFileList,
  kFileStat,
  kFileDelete,
  kFileMove,
  kFileChmod,
  kFileGlob,
  kFileSearch,
  kSysinfo,
  kSessionStart,
  kSessionInput,
  kSessionSignal,
  kConfig
};

// A config tool (`tools.<name>`).
struct ToolConfig {
  std::vector<std::string> command;      // argv template with {arg} placeholders
  std::chrono::milliseconds timeout{0};  // 0 = the executor's default
  std::string security_context;          // "" = the call's context (or "default")
  // Runs only as a session's process (session.start {agent_name: <name>}): one long process
  // with a persistent stdin pipe. Its command takes no {placeholders} (nothing fills them).
  bool interactive = false;
};

struct ToolDefinition {
  std::string name;
  ToolKind kind = ToolKind::kExec;
  std::optional<ToolTemplate> command;  // kConfig only
  std::chrono::milliseconds timeout{0};
  std::string security_context;
  bool interactive = false;  // kConfig only
};

// exec {command, args:[..], mode: ""|"shell"|"argv", cwd, env:{..}, stdin, timeout}
struct ExecArgs {
  std::string command;
  std::vector<std::string> args;
  bool shell = true;  // "" / "shell": sh -c with quoted args; "argv": [command, args...]
  std::string cwd;    // relative to the workspace ("" = its root)
  std::map<std::string, std::string> env;
  std::optional<std::string> stdin_data;
  std::chrono::milliseconds timeout{0};  // 0 = not given
};

// file.read {path, offset, length}, file.write {path, content (base64), mode},
// file.list {path}, file.stat {path}, file.delete {path, recursive},
// file.move {old_path, new_path}, file.chmod {path, mode}, file.glob {pattern}
// (the worker RPC contract's names, wire.md §4).
struct FileArgs {
  std::string path;  // file.move: old_path; file.glob: pattern
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  // file.write: the base64 text as sent (a view into the request's args, which must outlive
  // it), already checked whole, and the count of bytes it decodes to. The executor decodes it
  // a piece at a time as it writes (common/base64.h), never whole.
  std::string_view content_base64;
  uint64_t content_size = 0;
  std::string mode;      // file.write ("" = 0644), file.chmod (required)
  std::string new_path;  // file.move
  bool recursive = false;
};

// Session ids: [A-Za-z0-9._-]{1,128} (a UUID fits).
inline constexpr size_t kMaxSessionIdBytes = 128;
// One session.input line, without its newline.
inline constexpr size_t kMaxSessionLineBytes = 1u << 20;
// file.search: default and largest `limit`.
inline constexpr size_t kDefaultSearchLimit = 20;
inline constexpr size_t kMaxSearchLimit = 1000;

// session.start {session_id, agent_name, workspace_path?}
struct SessionStartArgs {
  std::string session_id;
  std::string agent_name;      // an interactive config tool
  std::string workspace_path;  // relative to the workspace root ("" = the root)
};

// session.input {session_id, line} and session.signal {session_id, signal: "INT"|"TERM"}
struct SessionInputArgs {
  std::string session_id;
  std::string line;  // without '\n'; the executor adds one
};
struct SessionSignalArgs {
  std::string session_id;
  int signal = 0;           // SIGINT or SIGTERM
  std::string signal_name;  // "INT" or "TERM"
};

// file.search {path, query, limit}
struct FileSearchArgs {
  std::string path;  // the directory searched ("" = the workspace root)
  std::string query;
  size_t limit = kDefaultSearchLimit;
};

class ToolRegistry {
 public:
  // INVALID_ARGUMENT naming the tool: a config tool named like a built-in, an empty name,
  // a bad argv template, or an interactive tool whose template has placeholders.
  static Result<ToolRegistry> Make(const std::map<std::string, ToolConfig>& config_tools);

  // Every tool name, sorted.
  std::vector<std::string> List() const;
  // NOT_FOUND naming the tool.
  Result<const ToolDefinition*> Find(std::string_view name) const;

  static Result<ExecArgs> ParseExecArgs(const nlohmann::json& args);
  // The args of file.read / write / list / stat / delete.
  static Result<FileArgs> ParseFileArgs(ToolKind kind, const nlohmann::json& args);
  // The session tools and file.search; INVALID_ARGUMENT naming the tool, the arg and the rule.
  static Result<SessionStartArgs> ParseSessionStartArgs(const nlohmann::json& args);
  static Result<SessionInputArgs> ParseSessionInputArgs(const nlohmann::json& args);
  static Result<SessionSignalArgs> ParseSessionSignalArgs(const nlohmann::json& args);
  static Result<FileSearchArgs> ParseFileSearchArgs(const nlohmann::json& args);
  // INVALID_ARGUMENT naming `field` unless `id` matches [A-Za-z0-9._-]{1,128}.
  static Status ValidateSessionId(std::string_view id, std::string_view field);

 private:
  std::map<std::string, ToolDefinition, std::less<>> tools_;
};

// A duration from JSON: a number of seconds (may be fractional) or a Go-style string such as
// "30s", "1m30s", "500ms", "1h". INVALID_ARGUMENT naming `field` for anything else or < 0.
Result<std::chrono::milliseconds> ParseDurationArg(const nlohmann::json& value,
                                                   std::string_view field);

// RFC 4648 standard base64 with padding (common/base64.h).
using edge::Base64Decode;
using edge::Base64Encode;

// Puts bytes into the JSON object `obj` as text (see common/utf8.h): obj[key] = the bytes when
// they are valid UTF-8; otherwise obj[key] = the text with U+FFFD replacements (for people)
// and obj[key + "_base64"] = the exact bytes in standard base64 (for programs).
void PutBytes(nlohmann::json& obj, const std::string& key, std::string_view bytes);

// {path, size, mode, is_dir, mod_time (RFC 3339 UTC)} as on the worker contract; a path that
// is not valid UTF-8 also gets `path_base64` (PutBytes).
nlohmann::json FileInfoToJson(const FileInfo& info);

}  // namespace edge::sandbox
