// SecurityContext: the named rules a tool runs under (config `security_contexts.<name>`):
// which tools it may run (fnmatch globs), which user runs them, which extra host paths a
// sandboxed command sees read-only, which caller roles it requires, and the limits that
// apply. SecurityContexts is the set from config. Only when NO context is configured at all
// does it hold the implicit "default" (every tool, the agent's user, no extra limits) — the
// agent warns loudly then and `config check --production` fails; once any context is
// configured there is no implicit allow-all. Immutable values, built once per config version.
//
// Binding (SecurityContexts::Resolve): a tool's configured context is mandatory and a request
// can only narrow it, never widen it — see Resolve.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
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
  // The caller must hold one of these roles (the `roles` claim of its verified user token);
  // empty = no role required.
  std::vector<std::string> require_roles;
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
  // PERMISSION_DENIED naming the context and the roles it requires unless `caller_roles`
  // (nullopt = the caller's identity was not verified) holds one of them.
  Status CheckRoles(const std::optional<std::vector<std::string>>& caller_roles) const;
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
  // True when no context is configured and the implicit allow-all "default" is in force.
  bool implicit_default() const { return implicit_default_; }

  // The context a call of `tool` runs under, and the checks of the tool and roles against it:
  //  - `tool_context` (the config tool's own `security_context`, "" = none) binds: the call
  //    runs under it whatever the request says. A `requested` context that differs narrows
  //    it: it must exist and allow the tool too, it must not change the user (its run_as is
  //    empty or the same), and for each limit the stricter of the two applies; mount points
  //    are those both list; required roles add up. The result keeps the bound context's name.
  //  - a tool without its own context runs under `requested`, or "default" when empty.
  // NOT_FOUND / PERMISSION_DENIED naming the tool, the contexts and the rule.
  Result<SecurityContext> Resolve(
      std::string_view tool, std::string_view tool_context, std::string_view requested,
      const std::optional<std::vector<std::string>>& caller_roles) const;

 private:
  std::map<std::string, SecurityContext, std::less<>> contexts_;
  bool implicit_default_ = false;
};

}  // namespace edge::sandbox
