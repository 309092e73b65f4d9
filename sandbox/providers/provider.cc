#include "sandbox/providers/provider.h"

#include <limits.h>
#include <stdlib.h>

#include "sandbox/providers/bwrap_provider.h"
#include "sandbox/providers/local_provider.h"

namespace edge::sandbox {
namespace {

Result<std::string> RealPath(const std::string& path, std::string_view field) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    return MakeError(ErrorCode::kNotFound, std::string(field) + " '" + path + "': does not exist");
  }
  return std::string(buf);
}

}  // namespace

Status CheckCwdInWorkspace(ProcessSpec& spec, const std::string& workspace) {
  if (workspace.empty() || workspace[0] != '/') {
    return MakeError(ErrorCode::kInvalidArgument,
                     "workspace '" + workspace + "': must be an absolute path");
  }
  auto ws = RealPath(workspace, "workspace");
  if (!ws) return std::unexpected(ws.error());
  if (spec.cwd.empty()) {
    spec.cwd = *ws;
    return OkStatus();
  }
  auto cwd = RealPath(spec.cwd, "cwd");
  if (!cwd) return std::unexpected(cwd.error());
  if (*cwd != *ws && cwd->rfind(*ws + "/", 0) != 0) {
    return MakeError(ErrorCode::kPathOutsideRoot,
                     "cwd '" + spec.cwd + "': outside the workspace '" + workspace + "'");
  }
  spec.cwd = *cwd;
  return OkStatus();
}

Result<std::shared_ptr<Provider>> MakeProvider(std::string_view name, std::string bwrap_path) {
  if (name == "local") return std::shared_ptr<Provider>(std::make_shared<LocalProvider>());
  if (name == "bwrap") {
    return std::shared_ptr<Provider>(std::make_shared<BwrapProvider>(std::move(bwrap_path)));
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "provider '" + std::string(name) + "': unknown (use \"local\" or \"bwrap\")");
}

}  // namespace edge::sandbox
