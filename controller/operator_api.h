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
//   active_sessions_count  0: sessions (§5.2 POST …/sessions) do not exist yet;
//   config_versions.capabilities  EdgeNodeRecord::capabilities_version (persisted; +1 each
//                  time a Hello or CapabilityUpdate changes the tool list; 0 = none reported);
//   config_versions.limits  0: the controller has no per-node `edge_api.limits` yet, so every
//                  node runs the defaults (version 0) until PushConfig of those limits exists.
//   tags           extension: the operator's tags of the node (`edge-controller tag`), an
//                  object of key → value ({} when none); never the node's own labels.
//   …/config       limits: version 0, the §5.2 defaults (kDefaultLimits), effective_at = the
//                  node's enrollment; capabilities: the version above, effective_at = when it
//                  last rose (capabilities_changed_ms), the enrollment while it is 0.
// Borrows the fleet, the tokens and the clock.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "controller/edge_fleet.h"
#include "controller/operator_http.h"
#include "controller/tenant_tokens.h"
#include "http/router.h"

namespace edge::controller {

// The §5.2 defaults of edge_api.limits, what every node runs until per-node limits exist.
struct EdgeApiLimits {
  int64_t rate_limit = 20;                             // control frames per second per session
  int64_t max_frame_size = 1 << 20;                    // bytes
  int64_t reattach_window = 300;                       // seconds
  int64_t max_buffer_size = 4 << 20;                   // bytes
  std::string buffer_overflow_policy = "drop_oldest";  // or "disconnect"
};

struct OperatorApiSettings {
  // A node whose last heartbeat is older is offline (cluster.stale_threshold_secs).
  std::chrono::milliseconds stale_threshold{90'000};
};

class OperatorApi {
 public:
  OperatorApi(EdgeFleet& fleet, const TenantTokens& users, Clock& clock,
              OperatorApiSettings settings)
      : fleet_(fleet), http_(users, "operator_api"), clock_(clock), settings_(settings) {}

  void Register(http::Router& router);

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
                                 std::chrono::milliseconds stale);
  // GET /v1/edge/nodes/{id}/config for a node (limits: the defaults, version 0).
  static nlohmann::json ConfigJson(const NodeView& node);
  // OperatorHttp::BearerToken.
  static std::optional<std::string_view> BearerToken(std::string_view header);

 private:
  void ListNodes(const std::shared_ptr<http::Exchange>& ex);
  void NodeConfig(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  // The caller's verified claims; otherwise answers 401 itself and returns nullopt.
  std::optional<TenantTokenClaims> Authenticate(const std::shared_ptr<http::Exchange>& ex);
  void Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e);

  EdgeFleet& fleet_;
  OperatorHttp http_;  // authentication and error answers, shared with FleetApi
  Clock& clock_;
  const OperatorApiSettings settings_;
};

}  // namespace edge::controller
