#include "controller/operator_api.h"

#include <algorithm>

#include "common/log.h"
#include "common/rfc3339.h"
#include "controller/edge_codec.h"
#include "controller/session_manager.h"

namespace edge::controller {
namespace {

using nlohmann::json;

constexpr const char* kDeviceNameLabel = "agent.device_name";

std::shared_ptr<spdlog::logger> Log() {
  return log::Get("operator_api");
}

int64_t EnrolledMs(const NodeView& v) {
  return v.edge && v.edge->edge_enrolled_at_ms != 0 ? v.edge->edge_enrolled_at_ms
                                                    : v.node.enrolled_at_ms;
}

json Tools(const NodeView& v) {
  json tools = json::array();
  for (const auto& t : v.capabilities.local_tools())
    tools.push_back(t);
  return tools;
}

int64_t LastSeenMs(const NodeView& v) {
  int64_t ms = std::max(v.node.last_seen_ms, v.edge ? v.edge->last_heartbeat_ms : 0);
  if (ms == 0 && v.edge) ms = v.edge->edge_enrolled_at_ms;
  if (ms == 0) ms = v.node.enrolled_at_ms;
  return ms;
}

}  // namespace

std::pair<unsigned, const char*> OperatorApi::ErrorStatus(ErrorCode code) {
  return OperatorHttp::ErrorStatus(code);
}

std::optional<std::string_view> OperatorApi::BearerToken(std::string_view header) {
  return OperatorHttp::BearerToken(header);
}

std::string_view OperatorApi::DeriveStatus(const NodeView& v, int64_t now_ms,
                                           std::chrono::milliseconds stale) {
  if (NodeIsOffline(v, now_ms, stale)) return "offline";
  if (NodeIsDraining(v)) return "busy";
  return "online";
}

json OperatorApi::NodeJson(const NodeView& v, int64_t now_ms, std::chrono::milliseconds stale,
                           size_t active_sessions) {
  const auto& labels = v.capabilities.custom_labels();
  auto name = labels.find(kDeviceNameLabel);
  return json{{"node_id", v.node.node_id},
              {"device_name",
               name != labels.end() && !name->second.empty() ? name->second : v.node.node_id},
              {"status", DeriveStatus(v, now_ms, stale)},
              {"last_seen", FormatRfc3339(FromEpochMillis(LastSeenMs(v)))},
              {"capabilities", Tools(v)},
              // Extension: which of them a session may run (wire.md §5.5).
              {"interactive_tools", InteractiveTools(v)},
              {"active_sessions_count", active_sessions},
              {"config_versions",
               {{"limits", v.edge ? v.edge->limits_version : 0},
                {"capabilities", v.edge ? v.edge->capabilities_version : 0}}},
              // Extension: the operator's tags (never the node's labels).
              {"tags", v.tags.empty() ? json::object() : json(v.tags)}};
}

json OperatorApi::ConfigJson(const NodeView& v, const NodeLimits& node_limits) {
  const EdgeApiLimits& limits = node_limits.limits;
  const int64_t enrolled_ms = EnrolledMs(v);
  const int64_t caps_version = v.edge ? v.edge->capabilities_version : 0;
  const int64_t caps_ms = v.edge && v.edge->capabilities_changed_ms != 0
                              ? v.edge->capabilities_changed_ms
                              : enrolled_ms;
  return json{{"node_id", v.node.node_id},
              {"limits",
               {{"config_version", node_limits.version},
                {"effective_at",
                 FormatRfc3339(FromEpochMillis(
                     node_limits.version != 0 ? node_limits.effective_at_ms : enrolled_ms))},
                {"limits",
                 {{"rate_limit", limits.rate_limit},
                  {"max_frame_size", limits.max_frame_size},
                  {"reattach_window", limits.reattach_window},
                  {"max_buffer_size", limits.max_buffer_size},
                  {"buffer_overflow_policy", limits.buffer_overflow_policy}}}}},
              {"capabilities",
               {{"config_version", caps_version},
                {"effective_at", FormatRfc3339(FromEpochMillis(caps_ms))},
                {"capabilities", Tools(v)}}}};
}

void OperatorApi::Register(http::Router& router) {
  router.Add(
      "GET", "/v1/edge/nodes",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams&) { ListNodes(ex); });
  router.Add(
      "GET", "/v1/edge/nodes/{id}/config",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) { NodeConfig(ex, p); });
  RegisterSessions(router);
}

void OperatorApi::Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e) {
  http_.Fail(ex, e);
}

std::optional<TenantTokenClaims> OperatorApi::Authenticate(
    const std::shared_ptr<http::Exchange>& ex) {
  return http_.Authenticate(ex);
}

void OperatorApi::ListNodes(const std::shared_ptr<http::Exchange>& ex) {
  auto user = Authenticate(ex);
  if (!user) return;
  auto nodes = fleet_.ListTenantNodes(user->tenant_id);
  if (!nodes) return Fail(ex, nodes.error());
  const int64_t now_ms = ToEpochMillis(clock_.Now());
  json list = json::array();
  for (const auto& v : *nodes)
    list.push_back(NodeJson(v, now_ms, settings_.stale_threshold,
                            sessions_ ? sessions_->ActiveSessions(v.node.node_id) : 0));
  Log()->debug("GET /v1/edge/nodes by {} (tenant {}): {} node(s)", log::Escape(user->subject, 128),
               log::Escape(user->tenant_id, 128), list.size());
  http::RespondEchoingRequestId(
      ex, http::Response{.status = 200, .body = json{{"nodes", std::move(list)}}.dump()});
}

void OperatorApi::NodeConfig(const std::shared_ptr<http::Exchange>& ex,
                             const http::PathParams& params) {
  auto user = Authenticate(ex);
  if (!user) return;
  auto node = fleet_.GetTenantNode(user->tenant_id, params.at("id"));
  if (!node) return Fail(ex, node.error());
  http::RespondEchoingRequestId(
      ex, http::Response{.status = 200,
                         .body = ConfigJson(*node, node->edge ? fleet_.LimitsOf(*node->edge)
                                                              : fleet_.LimitsOf(node->node.node_id))
                                     .dump()});
}

}  // namespace edge::controller
