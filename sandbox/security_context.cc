#include "sandbox/security_context.h"

#include <fnmatch.h>

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
  if (!set.contexts_.contains(kDefault)) {
    SecurityContextConfig all;
    all.allowed_tools = {"*"};
    set.contexts_.emplace(kDefault, *SecurityContext::Make(kDefault, all));
  }
  return set;
}

Result<const SecurityContext*> SecurityContexts::Find(std::string_view name) const {
  if (name.empty()) name = kDefault;
  auto it = contexts_.find(name);
  if (it == contexts_.end()) {
    return MakeError(ErrorCode::kNotFound,
                     "security context '" + std::string(name) + "' is not configured");
  }
  return &it->second;
}

std::vector<std::string> SecurityContexts::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, ctx] : contexts_)
    out.push_back(name);
  return out;
}

}  // namespace edge::sandbox
