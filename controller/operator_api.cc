#include "controller/operator_api.h"

#include <algorithm>
#include <cctype>

#include "common/log.h"
#include "common/rfc3339.h"
#include "controller/edge_codec.h"

namespace edge::controller {
namespace {

using nlohmann::json;

constexpr const char* kDeviceNameLabel = "agent.device_name";
constexpr size_t kMaxTokenBytes = 16 << 10;

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
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return {400, "INVALID_ARGUMENT"};
    case ErrorCode::kUnauthenticated:
      return {401, "UNAUTHENTICATED"};
    // Another tenant's thing is 404, never 403 (§5.1): nothing leaks.
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kNotFound:
      return {404, "NOT_FOUND"};
    case ErrorCode::kResourceExhausted:
      return {429, "RATE_LIMITED"};
    default:
      return {500, "INTERNAL"};
  }
}

std::optional<std::string_view> OperatorApi::BearerToken(std::string_view header) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size() || header.size() > kScheme.size() + kMaxTokenBytes) {
    return std::nullopt;
  }
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  }
  std::string_view token = header.substr(kScheme.size());
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f) return std::nullopt;  // visible ASCII only (RFC 6750 b64token+)
  }
  return token;
}

std::string_view OperatorApi::DeriveStatus(const NodeView& v, int64_t now_ms,
                                           std::chrono::milliseconds stale) {
  if (!v.connected || !v.edge) return "offline";
  if (now_ms - v.edge->last_heartbeat_ms > stale.count()) return "offline";
  if (IsDraining(v.capabilities) || v.node.state == kNodeDraining) return "busy";
  return "online";
}

json OperatorApi::NodeJson(const NodeView& v, int64_t now_ms, std::chrono::milliseconds stale) {
  const auto& labels = v.capabilities.custom_labels();
  auto name = labels.find(kDeviceNameLabel);
  return json{{"node_id", v.node.node_id},
              {"device_name",
               name != labels.end() && !name->second.empty() ? name->second : v.node.node_id},
              {"status", DeriveStatus(v, now_ms, stale)},
              {"last_seen", FormatRfc3339(FromEpochMillis(LastSeenMs(v)))},
              {"capabilities", Tools(v)},
              {"active_sessions_count", 0},
              {"config_versions",
               {{"limits", 0}, {"capabilities", v.edge ? v.edge->capabilities_version : 0}}}};
}

json OperatorApi::ConfigJson(const NodeView& v) {
  const EdgeApiLimits limits;
  const int64_t enrolled_ms = EnrolledMs(v);
  const int64_t caps_version = v.edge ? v.edge->capabilities_version : 0;
  const int64_t caps_ms = v.edge && v.edge->capabilities_changed_ms != 0
                              ? v.edge->capabilities_changed_ms
                              : enrolled_ms;
  return json{{"node_id", v.node.node_id},
              {"limits",
               {{"config_version", 0},
                {"effective_at", FormatRfc3339(FromEpochMillis(enrolled_ms))},
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
}

void OperatorApi::Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e) {
  auto [status, code] = ErrorStatus(e.code);
  const auto& req = ex->request();
  Log()->info("{} {} from {} (request {}): {} {}", req.method, log::Escape(req.Path(), 200),
              req.remote, log::Escape(http::RequestId(req), 128), status,
              log::Escape(e.message, 512));
  http::Response resp = http::JsonError(status, code, e.message);
  if (status == 401) resp.headers.emplace_back("WWW-Authenticate", "Bearer");
  http::RespondEchoingRequestId(ex, std::move(resp));
}

std::optional<TenantTokenClaims> OperatorApi::Authenticate(
    const std::shared_ptr<http::Exchange>& ex) {
  auto header = ex->request().Header("Authorization");
  if (!header) {
    Fail(ex, {ErrorCode::kUnauthenticated, "an Authorization: Bearer <user token> is required"});
    return std::nullopt;
  }
  auto token = BearerToken(*header);
  if (!token) {
    Fail(ex,
         {ErrorCode::kUnauthenticated, "the Authorization header is not \"Bearer <user token>\""});
    return std::nullopt;
  }
  auto claims = users_.Verify(*token);
  if (!claims) {
    Fail(ex, claims.error());
    return std::nullopt;
  }
  return std::move(*claims);
}

void OperatorApi::ListNodes(const std::shared_ptr<http::Exchange>& ex) {
  auto user = Authenticate(ex);
  if (!user) return;
  auto nodes = fleet_.ListTenantNodes(user->tenant_id);
  if (!nodes) return Fail(ex, nodes.error());
  const int64_t now_ms = ToEpochMillis(clock_.Now());
  json list = json::array();
  for (const auto& v : *nodes)
    list.push_back(NodeJson(v, now_ms, settings_.stale_threshold));
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
  http::RespondEchoingRequestId(ex,
                                http::Response{.status = 200, .body = ConfigJson(*node).dump()});
}

}  // namespace edge::controller
