// Fuzzes the built-in tools' arg parsers (sandbox/tool_registry.h) with arbitrary JSON, as a
// door would hand it over: none may crash, and what they accept keeps the rules the executor
// relies on — a session id matches [A-Za-z0-9._-]{1,128}, a session.input line has no '\n'
// and at most 1 MiB, a signal is SIGINT or SIGTERM, a file.search limit is 1..1000.
#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/tool_registry.h"

namespace {

using edge::sandbox::ToolKind;
using edge::sandbox::ToolRegistry;

void CheckId(const std::string& id) {
  if (!ToolRegistry::ValidateSessionId(id, "id")) std::abort();
  if (id.empty() || id.size() > edge::sandbox::kMaxSessionIdBytes) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json args =
      nlohmann::json::parse(reinterpret_cast<const char*>(data),
                            reinterpret_cast<const char*>(data) + size, nullptr, false);
  if (args.is_discarded()) return 0;
  (void)ToolRegistry::ParseExecArgs(args);
  for (ToolKind kind :
       {ToolKind::kFileRead, ToolKind::kFileWrite, ToolKind::kFileList, ToolKind::kFileStat,
        ToolKind::kFileDelete, ToolKind::kFileMove, ToolKind::kFileChmod, ToolKind::kFileGlob}) {
    (void)ToolRegistry::ParseFileArgs(kind, args);
  }
  if (auto s = ToolRegistry::ParseSessionStartArgs(args)) {
    CheckId(s->session_id);
    if (s->agent_name.empty()) std::abort();
  }
  if (auto in = ToolRegistry::ParseSessionInputArgs(args)) {
    CheckId(in->session_id);
    if (in->line.find('\n') != std::string::npos) std::abort();
    if (in->line.size() > edge::sandbox::kMaxSessionLineBytes) std::abort();
  }
  if (auto sig = ToolRegistry::ParseSessionSignalArgs(args)) {
    CheckId(sig->session_id);
    if (sig->signal != SIGINT && sig->signal != SIGTERM) std::abort();
  }
  if (auto search = ToolRegistry::ParseFileSearchArgs(args)) {
    if (search->limit < 1 || search->limit > edge::sandbox::kMaxSearchLimit) std::abort();
  }
  return 0;
}
