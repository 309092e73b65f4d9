// BwrapProvider: the `bwrap` sandbox provider. Wraps the command as
//   bwrap --unshare-all [--share-net] --die-with-parent
//         --ro-bind /usr /usr (and /bin /sbin /lib /lib64 /etc, symlinks kept as symlinks)
//         --proc /proc --dev /dev --tmpfs /tmp
//         --ro-bind-try <visible path> <visible path>...
//         --bind <workspace> <workspace> --chdir <cwd> -- <argv...>
// so it runs in new mount/pid/ipc/uts (and user, when allowed) namespaces, sees the system
// read-only and can write only to its workspace (and a private /tmp). The network is shared
// only when WrapOptions::network is set. bwrap is a child in the command's process group,
// so cancel and deadline stop it like any command; --die-with-parent covers the rest.
#pragma once

#include <string>
#include <vector>

#include "sandbox/providers/provider.h"

namespace edge::sandbox {

class BwrapProvider final : public Provider {
 public:
  explicit BwrapProvider(std::string bwrap_path = "/usr/bin/bwrap")
      : bwrap_path_(std::move(bwrap_path)) {}
  std::string_view name() const override { return "bwrap"; }
  // FAILED_PRECONDITION naming the path when the bwrap binary is missing.
  Status Wrap(ProcessSpec& spec, const WrapOptions& options) const override;
  // The bwrap argv (without the command) for `options` and working directory `cwd`.
  std::vector<std::string> BwrapArgs(const WrapOptions& options, const std::string& cwd) const;

 private:
  std::string bwrap_path_;
};

}  // namespace edge::sandbox
