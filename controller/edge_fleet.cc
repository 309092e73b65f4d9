#include "controller/edge_fleet.h"

#include "common/json_parse.h"
#include "common/log.h"
#include "config/agent_config.h"
#include "config/controller_config.h"
#include "controller/edge_codec.h"
#include "controller/fleet_selector.h"

namespace edge::controller {

FleetSummary EdgeFleet::Summary() const {
  FleetSummary s;
  if (auto nodes = store_.ListNodes()) s.nodes = nodes->size();
  if (auto toks = store_.ListJoinTokens(false, ToEpochMillis(clock_.Now()))) {
    s.active_join_tokens = toks->size();
  }
  return s;
}

Result<MintedJoinToken> EdgeFleet::CreateJoinToken(const std::string& node_id,
                                                   const std::string& tenant_id,
                                                   std::chrono::seconds ttl, bool replace) {
  auto minted = tokens_.Create(node_id, tenant_id, ttl, replace);
  if (!minted) return minted;
  log::Get("admin")->info("join token {} created (node \"{}\", tenant \"{}\")", minted->token_id,
                          log::Escape(node_id), log::Escape(tenant_id));
  if (replace) {
    std::string state = "not known yet";
    if (auto node = store_.GetNode(node_id); node && *node) state = (*node)->state;
    log::Get("audit")->warn(
        "join token {} created with --replace: it may replace the identity of node {} "
        "(currently {}) and lift a revocation",
        minted->token_id, log::Escape(node_id), state);
  }
  return minted;
}

Status EdgeFleet::RevokeJoinToken(const std::string& token_id) {
  if (token_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "token_id is required");
  if (auto st = store_.RevokeJoinToken(token_id, ToEpochMillis(clock_.Now())); !st) return st;
  log::Get("admin")->info("join token {} revoked", log::Escape(token_id));
  return OkStatus();
}

Result<std::vector<JoinTokenRecord>> EdgeFleet::ListJoinTokens(bool include_inactive) const {
  return store_.ListJoinTokens(include_inactive, ToEpochMillis(clock_.Now()));
}

Result<std::vector<NodeView>> EdgeFleet::ListNodes() const {
  auto nodes = store_.ListNodes();
  if (!nodes) return std::unexpected(nodes.error());
  auto tags = store_.ListNodeTags();
  if (!tags) return std::unexpected(tags.error());
  std::vector<NodeView> out;
  out.reserve(nodes->size());
  for (auto& n : *nodes) {
    NodeView v;
    v.connected = dispatcher_.IsConnected(n.node_id);
    v.connected_since_ms = dispatcher_.ConnectedSinceMs(n.node_id);
    auto edge = store_.GetEdgeNode(n.node_id);
    if (!edge) return std::unexpected(edge.error());
    if (*edge) {
      v.capabilities = CapabilitiesFromJson((*edge)->capabilities_json);
      v.edge = std::move(**edge);
    }
    if (auto t = tags->find(n.node_id); t != tags->end()) v.tags = std::move(t->second);
    v.node = std::move(n);
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<NodeView>> EdgeFleet::ListTenantNodes(const std::string& tenant_id) const {
  if (tenant_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "tenant_id is required");
  auto all = ListNodes();
  if (!all) return all;
  std::erase_if(*all, [&](const NodeView& v) {
    const std::string& tenant = v.edge ? v.edge->tenant_id : v.node.tenant_id;
    return tenant != tenant_id || v.node.state == kNodeRevoked;
  });
  return all;
}

Result<NodeView> EdgeFleet::GetTenantNode(const std::string& tenant_id,
                                          const std::string& node_id) const {
  if (node_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  auto nodes = ListTenantNodes(tenant_id);
  if (!nodes) return std::unexpected(nodes.error());
  for (auto& v : *nodes)
    if (v.node.node_id == node_id) return std::move(v);
  return MakeError(ErrorCode::kNotFound, "node " + log::Escape(node_id, 128) + " not found");
}

Result<NodeActivity> EdgeFleet::GetNodeActivity(const std::string& tenant_id,
                                                const std::string& node_id, int64_t since_ms,
                                                int64_t until_ms) const {
  auto node = GetTenantNode(tenant_id, node_id);
  if (!node) return std::unexpected(node.error());
  return store_.GetNodeActivity(node_id, since_ms, until_ms);
}

Status EdgeFleet::RevokeNode(const std::string& node_id) {
  if (node_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  if (auto st = store_.RevokeNode(node_id, ToEpochMillis(clock_.Now())); !st) return st;
  dispatcher_.Disconnect(node_id, grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                               "node " + node_id + " was revoked"));
  log::Get("audit")->warn(
      "node {} revoked by the operator: it stays revoked until a join token created with "
      "`token create --node {} --replace` re-enrolls it",
      log::Escape(node_id), log::Escape(node_id));
  return OkStatus();
}

Result<NodeTags> EdgeFleet::GetNodeTags(const std::string& node_id) const {
  if (node_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  return store_.GetNodeTags(node_id);
}

Result<NodeTags> EdgeFleet::UpdateNodeTags(const std::string& node_id, const NodeTags& set,
                                           const std::vector<TagRemoval>& remove) {
  if (node_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  if (set.empty() && remove.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "no tag to add or remove");
  }
  for (const auto& [key, value] : set) {
    if (auto st = ValidateTagKey(key); !st) return std::unexpected(st.error());
    if (auto st = ValidateTagValue(key, value); !st) return std::unexpected(st.error());
  }
  for (const auto& r : remove) {
    if (auto st = ValidateTagKey(r.key); !st) return std::unexpected(st.error());
    if (r.value) {
      if (auto st = ValidateTagValue(r.key, *r.value); !st) return std::unexpected(st.error());
    }
  }
  auto tags =
      store_.UpdateNodeTags(node_id, set, remove, kMaxTagsPerNode, ToEpochMillis(clock_.Now()));
  if (!tags) return tags;
  std::string change;
  for (const auto& [key, value] : set)
    change += " +" + key + "=" + value;
  for (const auto& r : remove)
    change += " -" + r.key + (r.value ? "=" + *r.value : "");
  log::Get("audit")->info("node {} tags changed by the operator:{}", log::Escape(node_id), change);
  return tags;
}

namespace {
void LogRefusal(const std::string& tool, const std::string& node_id, const Error& e) {
  log::Get("admin")->warn("invoke {} on node {} refused: {}", log::Escape(tool),
                          log::Escape(node_id), log::Escape(e.ToString(), 512));
}
}  // namespace

Result<std::string> EdgeFleet::Invoke(const InvokeSpec& spec,
                                      std::shared_ptr<CommandObserver> observer) {
  auto id = dispatcher_.Invoke(spec, std::move(observer));
  if (!id) LogRefusal(spec.tool, spec.node_id, id.error());
  return id;
}

void EdgeFleet::InvokeAsync(const InvokeSpec& spec, std::shared_ptr<CommandObserver> observer,
                            Dispatcher::InvokeDone done) {
  dispatcher_.InvokeAsync(
      spec, std::move(observer),
      [tool = spec.tool, node_id = spec.node_id, done = std::move(done)](Result<std::string> id) {
        if (!id) LogRefusal(tool, node_id, id.error());
        done(std::move(id));
      });
}

Result<CommandRecord> EdgeFleet::GetCommand(const std::string& command_id) const {
  if (command_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "command_id is required");
  auto c = store_.GetCommand(command_id);
  if (!c) return std::unexpected(c.error());
  if (!*c) return MakeError(ErrorCode::kNotFound, "command " + command_id + " not found");
  return std::move(**c);
}

Result<std::vector<CommandRecord>> EdgeFleet::ListCommands(const std::string& node_id,
                                                           int limit) const {
  if (limit < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "limit " + std::to_string(limit) + " is negative");
  }
  return store_.ListCommands(node_id, limit);
}

Status EdgeFleet::CancelCommand(const std::string& command_id, const std::string& reason) {
  return dispatcher_.Cancel(command_id, reason);
}

Status EdgeFleet::DrainNode(const std::string& node_id) {
  return dispatcher_.Drain(node_id);
}

Status EdgeFleet::ShutdownNode(const std::string& node_id, std::chrono::milliseconds grace) {
  return dispatcher_.Shutdown(node_id, grace);
}

Result<PushedConfig> EdgeFleet::PushConfig(const std::string& node_id, const std::string& delta,
                                           const std::string& version) {
  if (node_id.empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is empty");
  if (delta.empty()) return MakeError(ErrorCode::kInvalidArgument, "config delta is empty");
  if (auto st = CheckJsonDepth(delta, "config delta"); !st) return std::unexpected(st.error());
  auto edge = store_.GetEdgeNode(node_id);
  if (!edge) return std::unexpected(edge.error());
  const NodeLimits current = *edge ? LimitsOf(**edge) : NodeLimits{.limits = default_limits_};
  auto parts = config::SplitPushConfigDelta(delta, LimitsToConfig(current.limits), "config delta");
  if (!parts) return MakeError(ErrorCode::kInvalidArgument, parts.error().ToString());
  std::optional<EdgeApiLimits> limits;
  if (parts->edge_api) {
    if (!*edge) {
      return MakeError(ErrorCode::kNotFound,
                       "node \"" + node_id +
                           "\" is not edge-enrolled; edge_api.limits apply to an edge node's "
                           "sessions");
    }
    limits = LimitsFromConfig(*parts->edge_api);
  }
  if (parts->node_delta.empty() && !limits) {
    return MakeError(ErrorCode::kInvalidArgument, "config delta is empty");
  }
  PushedConfig out;
  if (!parts->node_delta.empty()) {
    if (auto st = ValidateConfigDelta(parts->node_delta); !st) return std::unexpected(st.error());
    out.version = version.empty() ? "v" + std::to_string(ToEpochMillis(clock_.Now())) : version;
    if (auto st = dispatcher_.PushConfig(node_id, parts->node_delta, out.version); !st) {
      return std::unexpected(st.error());
    }
  }
  if (limits) {
    out.limits_version = current.version;
    if (*limits != current.limits) {
      auto v =
          store_.SetEdgeNodeLimits(node_id, LimitsToJson(*limits), ToEpochMillis(clock_.Now()));
      if (!v) return std::unexpected(v.error());
      out.limits_version = *v;
    }
    if (*out.limits_version != current.version) {
      log::Get("audit")->info(
          "node {} edge_api.limits changed by the operator: config_version "
          "{} -> {}",
          log::Escape(node_id), current.version, *out.limits_version);
      if (limits_listener_) limits_listener_(node_id, *out.limits_version);
    }
  }
  return out;
}

bool NodeIsOffline(const NodeView& v, int64_t now_ms, std::chrono::milliseconds stale) {
  return !v.connected || !v.edge || now_ms - v.edge->last_heartbeat_ms > stale.count();
}

bool NodeIsDraining(const NodeView& v) {
  return IsDraining(v.capabilities) || v.node.state == kNodeDraining;
}

std::vector<std::string> InteractiveTools(const NodeView& v) {
  std::vector<std::string> out;
  const auto& labels = v.capabilities.custom_labels();
  auto it = labels.find("agent.interactive_tools");
  if (it == labels.end()) return out;
  const std::string& s = it->second;
  for (size_t start = 0; start <= s.size();) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

NodeLimits EdgeFleet::LimitsOf(const EdgeNodeRecord& edge) const {
  if (edge.limits_version == 0) return {.limits = default_limits_};
  auto own = LimitsFromJson(edge.limits_json);
  // A damaged row keeps its version: the operator sees it and can push the limits again.
  return {.limits = own.value_or(default_limits_),
          .version = edge.limits_version,
          .effective_at_ms = edge.limits_changed_ms};
}

NodeLimits EdgeFleet::LimitsOf(const std::string& node_id) const {
  auto edge = store_.GetEdgeNode(node_id);
  if (!edge || !*edge) return {.limits = default_limits_};
  return LimitsOf(**edge);
}

Status EdgeFleet::ValidateConfigDelta(const std::string& delta) {
  if (delta.empty()) return MakeError(ErrorCode::kInvalidArgument, "config delta is empty");
  // YAML flow collections and JSON nest with [ and {: bound them before a recursive parser.
  if (auto st = CheckJsonDepth(delta, "config delta"); !st) return st;
  // A minimal agent config stands in for the node's own; problems that depend on it
  // (references to tools or contexts the node may define) are left to the node.
  static const auto base = config::LoadAgentConfigFromString(
      "node_id: delta-check\n", "", [](const std::string&) { return std::nullopt; });
  if (!base) return MakeError(ErrorCode::kInternal, "base config: " + base.error().ToString());
  auto merged = config::ApplyDelta(*base, delta);
  if (merged) return OkStatus();
  auto issues = merged.error().issues;
  std::erase_if(issues, [](const config::ConfigIssue& i) { return i.cross_reference; });
  if (issues.empty()) return OkStatus();
  config::ConfigErrors errs;
  errs.issues = std::move(issues);
  return MakeError(ErrorCode::kInvalidArgument, errs.ToString());
}

}  // namespace edge::controller
