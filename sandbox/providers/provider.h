// Provider: how a command is placed inside a sandbox. The executor builds a ProcessSpec for
// the command and asks the sandbox's provider to wrap it (check or set its working
// directory, add an isolation layer) before ProcessRunner starts it. Providers are
// stateless and shared; the workspace directory is owned by the SandboxRegistry.
//   local  — runs the command directly in the workspace, in its own process group.
//   bwrap  — runs it under bubblewrap: new mount/pid/ipc/uts namespaces, read-only system,
//            the workspace as the only writable path (see bwrap_provider.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "sandbox/process_spec.h"

namespace edge::sandbox {

struct WrapOptions {
  std::string workspace;                   // absolute path of the sandbox's root directory
  std::vector<std::string> visible_paths;  // extra host paths shown read-only (mount_points)
  bool network = false;                    // keep the host network (bwrap only)
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const = 0;
  // Rewrites `spec` to run in the sandbox. spec.cwd empty = the workspace; a cwd outside
  // the workspace is PATH_OUTSIDE_ROOT.
  virtual Status Wrap(ProcessSpec& spec, const WrapOptions& options) const = 0;
};

// Checks spec.cwd (defaulting it to the workspace) lies beneath the workspace, after
// resolving symlinks. Shared by every provider.
Status CheckCwdInWorkspace(ProcessSpec& spec, const std::string& workspace);

// "local" or "bwrap" (with `bwrap_path`, normally /usr/bin/bwrap); INVALID_ARGUMENT naming
// the provider and the accepted names otherwise. A missing bwrap binary is reported when a
// command is wrapped, not here, so an agent configured for bwrap still starts.
Result<std::shared_ptr<Provider>> MakeProvider(std::string_view name,
                                               std::string bwrap_path = "/usr/bin/bwrap");

}  // namespace edge::sandbox
