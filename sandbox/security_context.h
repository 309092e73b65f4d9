// SecurityContext: the named rules a tool runs under (config `security_contexts.<name>`):
// which tools it may run (fnmatch globs), which user runs them, which extra host paths a
// sandboxed command sees read-only, and the limits that apply. SecurityContexts is the set
// from config plus the built-in "default" (every tool, the agent's user, no extra limits)
// unless config defines "default" itself. Immutable values, built once per config version.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace edge::sandbox {

// 0 means "no limit of its own" for every field.
struct SecurityLimits {
  std::chrono::milliseconds timeout_cap{0};  // a longer requested timeout is cut to this
  uint64_t max_output_bytes = 0;             // the smaller of this and the agent's cap applies
  int max_concurrent = 0;                    // invocations running at once in this context
  int max_processes = 0;                     // processes per command (see ProcessSpec)
};

struct SecurityContextConfig {
  std::vector<std::string> allowed_tools;  // fnmatch globs, e.g. "file.*"; empty = none
  std::string run_as;                      // user name or uid; empty = the agent's user
  std::vector<std::string> mount_points;   // absolute host paths, shown read-only (bwrap)
  SecurityLimits limits;
};

class SecurityContext {
 public:
  // INVALID_ARGUMENT naming the context and field: an empty or over-long glob, a relative
  // mount point, a negative limit.
  static Result<SecurityContext> Make(std::string name, SecurityContextConfig config);

  const std::string& name() const { return name_; }
  const SecurityContextConfig& config() const { return config_; }
  // PERMISSION_DENIED naming the tool and this context unless a glob matches `tool`.
  Status CheckTool(std::string_view tool) const;
  // `requested` (0 = `fallback`) cut to the timeout cap.
  std::chrono::milliseconds EffectiveTimeout(std::chrono::milliseconds requested,
                                             std::chrono::milliseconds fallback) const;
  // The smaller non-zero of `agent_cap` and the context's cap.
  uint64_t EffectiveOutputCap(uint64_t agent_cap) const;

 private:
  std::string name_;
  SecurityContextConfig config_;
};

class SecurityContexts {
 public:
  static constexpr const char* kDefault = "default";
  static Result<SecurityContexts> Make(const std::map<std::string, SecurityContextConfig>& config);
  // `name` empty = "default". NOT_FOUND naming the context when there is none.
  Result<const SecurityContext*> Find(std::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, SecurityContext, std::less<>> contexts_;
};

}  // namespace edge::sandbox
