// OperatorApi: the controller's northbound REST API for operator users (wire.md §5,
// contract document 002 "Edge Node API"), registered on the controller's http::Router:
//   GET /v1/edge/nodes → 200 {"nodes":[{node_id, device_name, status, last_seen, capabilities,
//                               active_sessions_count, config_versions:{limits, capabilities}}]}
//   GET /v1/edge/nodes/{id}/config → 200 {node_id, limits:{config_version, effective_at,
//       limits:{rate_limit, max_frame_size, reattach_window, max_buffer_size,
//       buffer_overflow_policy}}, capabilities:{config_version, effective_at, capabilities}}
//       (404 NOT_FOUND for an unknown node, another tenant's or a revoked one)
// Every request carries `Authorization: Bearer <user token>` (UserTokens: aud "edge-api",
// minted by the controller or by an issuer of http.trusted_issuers); anything else — no or a
// malformed header, a bad signature, another audience (compute, node, join or invoke tokens),
// an expired token — is 401 UNAUTHENTICATED with `WWW-Authenticate: Bearer`. A user sees only
// the nodes of the token's tenant (`tid`). Errors are {"code","message"} (§5.1), mapped from
// the domain's error codes in one table (ErrorStatus); X-Request-ID is echoed and logged. The
// work is short SQLite reads through EdgeFleet, on the HTTP thread that got the request.
//
// What the fields mean today:
//   device_name    the node's `agent.device_name` label (agent config `labels`), else node_id;
//   status         DeriveStatus below;
//   last_seen      the node's last Hello or heartbeat (else its enrollment), RFC 3339 UTC;
//   capabilities   the node's tools (EdgeCapabilities.local_tools), as last reported;
//   active_sessions_count  the node's sessions not yet TERMINATED (SessionManager);
//   config_versions.capabilities  EdgeNodeRecord::capabilities_version (persisted; +1 each
//                  time a Hello or CapabilityUpdate changes the tool list; 0 = none reported);
//   config_versions.limits  EdgeNodeRecord::limits_version (persisted; 0 = the controller's
//                  edge_api.limits; +1 each PushConfig that changed the node's own, see
//                  edge_api_limits.h);
//   interactive_tools  extension: the tools a session may run (the agent's
//                  `agent.interactive_tools` label, wire.md §5.5), [] when none;
//   tags           extension: the operator's tags of the node (`edge-controller tag`), an
//                  object of key → value ({} when none); never the node's own labels.
//   …/config       limits: EdgeFleet::LimitsOf (the node's own, else the controller's
//                  edge_api.limits), effective_at = when their version last rose, the
//                  enrollment while it is 0; capabilities: the version above, effective_at =
//                  when it last rose (capabilities_changed_ms), the enrollment while it is 0.
// Borrows the fleet, the tokens and the clock.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "controller/edge_api_limits.h"
#include "controller/edge_fleet.h"
#include "controller/operator_http.h"
#include "controller/tenant_tokens.h"
#include "http/router.h"

namespace edge::controller {

struct OperatorApiSettings {
  // A node whose last heartbeat is older is offline (cluster.stale_threshold_secs).
  std::chrono::milliseconds stale_threshold{90'000};
  // Browser origins besides the controller's own allowed to open session sockets
  // (http.allowed_origins), e.g. "https://dashboard.example".
  std::vector<std::string> allowed_origins;
  std::chrono::milliseconds ws_ping_interval{30'000};
  std::chrono::milliseconds ws_idle_timeout{90'000};
};

class SessionManager;

class OperatorApi {
 public:
  OperatorApi(EdgeFleet& fleet, const TenantTokens& users, Clock& clock,
              OperatorApiSettings settings)
      : fleet_(fleet), http_(users, "operator_api"), clock_(clock), settings_(settings) {}

  // The sessions behind the session endpoints and the WebSocket relay (without them, only
  // the node endpoints are served). Before Register; borrowed.
  void AttachSessions(SessionManager* sessions) { sessions_ = sessions; }
  void Register(http::Router& router);

  // The UTC window [since, until) of a metrics period at `now`: "today" (from 00:00),
  // "week" (from Monday 00:00), "month" (from the 1st, 00:00), until just after `now`;
  // INVALID_ARGUMENT for anything else ("" = today).
  static Result<std::pair<int64_t, int64_t>> PeriodWindow(std::string_view period,
                                                          Clock::WallTime now);

  // The HTTP status and §5.1 code for an error of the tokens or the domain layer
  // (OperatorHttp::ErrorStatus).
  static std::pair<unsigned, const char*> ErrorStatus(ErrorCode code);

  // A node's §5.2 status at `now_ms`: "offline" without a live edge stream, without an edge
  // record, or when its last heartbeat is older than `stale`; "busy" when it is draining
  // (its agent.state label or its node state); else "online". The node's in-flight cap is
  // not known to the controller, so "commands in flight at the cap" is not detected: busy
  // means draining only.
  static std::string_view DeriveStatus(const NodeView& node, int64_t now_ms,
                                       std::chrono::milliseconds stale);
  // One element of GET /v1/edge/nodes.
  static nlohmann::json NodeJson(const NodeView& node, int64_t now_ms,
                                 std::chrono::milliseconds stale, size_t active_sessions = 0);
  // GET /v1/edge/nodes/{id}/config for a node (limits: the defaults, version 0).
  static nlohmann::json ConfigJson(const NodeView& node, const NodeLimits& limits = {});
  // OperatorHttp::BearerToken.
  static std::optional<std::string_view> BearerToken(std::string_view header);

 private:
  void ListNodes(const std::shared_ptr<http::Exchange>& ex);
  void NodeConfig(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  // operator_api_sessions.cc
  void RegisterSessions(http::Router& router);
  void NodeMetrics(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  void CreateSession(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  void ListSessions(const std::shared_ptr<http::Exchange>& ex);
  void OpenStream(const std::shared_ptr<http::Exchange>& ex);
  bool OriginAllowed(const http::Request& req) const;
  // The caller's verified claims; otherwise answers 401 itself and returns nullopt.
  std::optional<TenantTokenClaims> Authenticate(const std::shared_ptr<http::Exchange>& ex);
  void Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e);

  EdgeFleet& fleet_;
  OperatorHttp http_;  // authentication and error answers, shared with FleetApi
  Clock& clock_;
  const OperatorApiSettings settings_;
  SessionManager* sessions_ = nullptr;
};

}  // namespace edge::controller
