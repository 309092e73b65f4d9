#include "sandbox/security_context.h"

#include <fnmatch.h>

#include <algorithm>

namespace edge::sandbox {

Result<SecurityContext> SecurityContext::Make(std::string name, SecurityContextConfig config) {
  std::string where = "security_contexts." + name;
  if (name.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "security_contexts: a context name is empty");
  }
  for (const auto& glob : config.allowed_tools) {
    if (glob.empty() || glob.size() > 256) {
      return MakeError(ErrorCode::kInvalidArgument,
                       where + ".allowed_tools: pattern '" + glob + "' must be 1-256 characters");
    }
  }
  for (const auto& mp : config.mount_points) {
    if (mp.empty() || mp[0] != '/') {
      return MakeError(ErrorCode::kInvalidArgument,
                       where + ".mount_points: '" + mp + "' must be an absolute path");
    }
  }
  const auto& l = config.limits;
  if (l.timeout_cap.count() < 0 || l.max_concurrent < 0 || l.max_processes < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     where + ".limits: timeout_cap, max_concurrent and max_processes must be >= 0");
  }
  SecurityContext ctx;
  ctx.name_ = std::move(name);
  ctx.config_ = std::move(config);
  return ctx;
}

Status SecurityContext::CheckTool(std::string_view tool) const {
  std::string t(tool);
  for (const auto& glob : config_.allowed_tools) {
    if (::fnmatch(glob.c_str(), t.c_str(), 0) == 0) return OkStatus();
  }
  return MakeError(ErrorCode::kPermissionDenied,
                   "tool '" + t + "' is not allowed in security context '" + name_ + "'");
}

Status SecurityContext::CheckRoles(
    const std::optional<std::vector<std::string>>& caller_roles) const {
  if (config_.require_roles.empty()) return OkStatus();
  std::string wanted;
  for (const auto& r : config_.require_roles)
    wanted += (wanted.empty() ? "'" : ", '") + r + "'";
  if (!caller_roles) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "security context '" + name_ + "' requires a role (" + wanted +
                         ") but the caller's user token was not verified (configure "
                         "security.user_token_issuers)");
  }
  for (const auto& r : *caller_roles) {
    if (std::find(config_.require_roles.begin(), config_.require_roles.end(), r) !=
        config_.require_roles.end()) {
      return OkStatus();
    }
  }
  return MakeError(ErrorCode::kPermissionDenied, "security context '" + name_ +
                                                     "' requires one of the roles " + wanted +
                                                     "; the caller has none of them");
}

std::chrono::milliseconds SecurityContext::EffectiveTimeout(
    std::chrono::milliseconds requested, std::chrono::milliseconds fallback) const {
  auto t = requested.count() > 0 ? requested : fallback;
  auto cap = config_.limits.timeout_cap;
  if (cap.count() > 0 && (t.count() <= 0 || t > cap)) t = cap;
  return t;
}

uint64_t SecurityContext::EffectiveOutputCap(uint64_t agent_cap) const {
  uint64_t own = config_.limits.max_output_bytes;
  if (own == 0) return agent_cap;
  if (agent_cap == 0) return own;
  return std::min(own, agent_cap);
}

Result<SecurityContexts> SecurityContexts::Make(
    const std::map<std::string, SecurityContextConfig>& config) {
  SecurityContexts set;
  for (const auto& [name, cfg] : config) {
    auto ctx = SecurityContext::Make(name, cfg);
    if (!ctx) return std::unexpected(ctx.error());
    set.contexts_.emplace(name, std::move(*ctx));
  }
  if (set.contexts_.empty()) {
    SecurityContextConfig all;
    all.allowed_tools = {"*"};
    set.contexts_.emplace(kDefault, *SecurityContext::Make(kDefault, all));
    set.implicit_default_ = true;
  }
  return set;
}

Result<const SecurityContext*> SecurityContexts::Find(std::string_view name) const {
  if (name.empty()) name = kDefault;
  auto it = contexts_.find(name);
  if (it == contexts_.end()) {
    return MakeError(ErrorCode::kNotFound,
                     "security context '" + std::string(name) + "' is not configured" +
                         (name == kDefault ? " (name a context, or configure 'default')" : ""));
  }
  return &it->second;
}

namespace {

// The stricter of two "0 = no limit" values.
template <typename T>
T Stricter(T a, T b) {
  if (a <= T{0}) return b;
  if (b <= T{0}) return a;
  return std::min(a, b);
}

}  // namespace

Result<SecurityContext> SecurityContexts::Resolve(
    std::string_view tool, std::string_view tool_context, std::string_view requested,
    const std::optional<std::vector<std::string>>& caller_roles) const {
  const std::string t(tool);
  auto bound = Find(tool_context.empty() ? requested : tool_context);
  if (!bound) return std::unexpected(bound.error());
  SecurityContext ctx = **bound;
  if (auto st = ctx.CheckTool(tool); !st) return std::unexpected(st.error());
  if (auto st = ctx.CheckRoles(caller_roles); !st) return std::unexpected(st.error());
  if (tool_context.empty() || requested.empty() || requested == tool_context) return ctx;

  // A request naming another context than the tool's own: it can only narrow.
  auto other = Find(requested);
  if (!other) return std::unexpected(other.error());
  const SecurityContext& c = **other;
  if (auto st = c.CheckTool(tool); !st) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "tool '" + t + "' is bound to security context '" + ctx.name() +
                         "'; the requested context '" + c.name() +
                         "' can only narrow it, and it does not allow the tool");
  }
  if (auto st = c.CheckRoles(caller_roles); !st) return std::unexpected(st.error());
  const SecurityContextConfig& a = ctx.config();
  const SecurityContextConfig& b = c.config();
  if (!b.run_as.empty() && b.run_as != a.run_as) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "tool '" + t + "' is bound to security context '" + ctx.name() +
                         "' (run_as '" + a.run_as + "'); the requested context '" + c.name() +
                         "' would run it as '" + b.run_as +
                         "': a request can narrow the tool's context, not change its user");
  }
  SecurityContextConfig merged = a;
  merged.mount_points.clear();
  for (const auto& mp : a.mount_points) {
    if (std::find(b.mount_points.begin(), b.mount_points.end(), mp) != b.mount_points.end()) {
      merged.mount_points.push_back(mp);
    }
  }
  merged.require_roles.insert(merged.require_roles.end(), b.require_roles.begin(),
                              b.require_roles.end());
  merged.limits.timeout_cap = Stricter(a.limits.timeout_cap, b.limits.timeout_cap);
  merged.limits.max_output_bytes = Stricter(a.limits.max_output_bytes, b.limits.max_output_bytes);
  merged.limits.max_concurrent = Stricter(a.limits.max_concurrent, b.limits.max_concurrent);
  merged.limits.max_processes = Stricter(a.limits.max_processes, b.limits.max_processes);
  return SecurityContext::Make(ctx.name(), std::move(merged));
}

std::vector<std::string> SecurityContexts::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, ctx] : contexts_)
    out.push_back(name);
  return out;
}

}  // namespace edge::sandbox
