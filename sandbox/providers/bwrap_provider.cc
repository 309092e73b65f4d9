#include "sandbox/providers/bwrap_provider.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

namespace edge::sandbox {

std::vector<std::string> BwrapProvider::BwrapArgs(const WrapOptions& options,
                                                  const std::string& cwd) const {
  std::vector<std::string> args = {bwrap_path_, "--unshare-all"};
  if (options.network) args.push_back("--share-net");
  args.push_back("--die-with-parent");
  args.insert(args.end(), {"--ro-bind", "/usr", "/usr"});
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"}) {
    struct stat st {};
    if (::lstat(dir, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(dir, target, sizeof(target) - 1);
      if (n <= 0) continue;
      args.insert(args.end(), {"--symlink", std::string(target, static_cast<size_t>(n)), dir});
    } else {
      args.insert(args.end(), {"--ro-bind", dir, dir});
    }
  }
  args.insert(args.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  for (const auto& p : options.visible_paths)
    args.insert(args.end(), {"--ro-bind-try", p, p});
  args.insert(args.end(), {"--bind", options.workspace, options.workspace, "--chdir", cwd, "--"});
  return args;
}

Status BwrapProvider::Wrap(ProcessSpec& spec, const WrapOptions& options) const {
  if (::access(bwrap_path_.c_str(), X_OK) != 0) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "provider bwrap: '" + bwrap_path_ +
                         "' is not an executable (install bubblewrap or use provider local)");
  }
  if (spec.argv.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "argv: must not be empty");
  }
  if (auto st = CheckCwdInWorkspace(spec, options.workspace); !st) return st;
  WrapOptions resolved = options;
  char buf[PATH_MAX];
  if (::realpath(options.workspace.c_str(), buf) != nullptr) resolved.workspace = buf;
  std::vector<std::string> argv = BwrapArgs(resolved, spec.cwd);
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  spec.argv = std::move(argv);
  return OkStatus();
}

}  // namespace edge::sandbox
