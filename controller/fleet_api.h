// FleetApi: fleet commands on the operator's REST API — an extension of wire.md §5 (contract
// document 002 has no fleet endpoints), registered on the controller's http::Router beside
// OperatorApi, with the same user-token authentication and {"code","message"} errors
// (OperatorHttp):
//   POST /v1/edge/fleet/commands {selector, tool, args?, timeout_ms?}
//        → 202 {fleet_command_id, parts:[{node_id, command_id, error?}]}
//   GET  /v1/edge/fleet/commands/{id}
//        → 200 {fleet_command_id, selector, tool, args, created_by, created_at, cancelled_at,
//               state: running|completed,
//               parts:[{node_id, command_id, state, exit_code, duration_ms, error?}]}
//   POST /v1/edge/fleet/commands/{id}/cancel
//        → 202 {fleet_command_id, parts:[{node_id, command_id, cancel, message?}]}
// The rules are FleetCommands' (fleet_commands.h: live nodes only, part states, durations);
// here only what the REST door adds:
//   - tenant scope: only the caller's tenant's nodes can match, and a fleet command is
//     visible only to users of the tenant that created it (another tenant's, or one created
//     on the admin socket, is 404 NOT_FOUND like an unknown id);
//   - tools named in `http.denied_tools` (default exec, file.write, file.delete — the key
//     wire.md §5.3 defines for sessions) are refused with 403 PERMISSION_DENIED: a user token
//     is not the operator's root-equivalent admin socket, which may run any tool;
//   - the body: a JSON object of exactly those fields (an unknown field is 400 naming it):
//     `selector` and `tool` non-empty strings, `args` a JSON object (default {}),
//     `timeout_ms` each part's deadline on its node, an integer from 0 (the agent's default)
//     to 86 400 000. Bad selectors are 400 INVALID_ARGUMENT naming the term; no live node of
//     the tenant matching is 404 NOT_FOUND (nothing is created);
//   - JSON of a part: `exit_code` and `duration_ms` are null until the part ends (exit_code
//     stays null for a part that did not end ok); `error` {code, message} is present for
//     error, timed_out and cancelled parts and for parts refused at dispatch (then
//     `command_id` is ""); `cancel` is sent | ended | not_delivered (fleet_commands.h).
// Work runs on the HTTP thread that got the request (short SQLite work and queued sends).
// Borrows the fleet commands and the tokens.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "controller/fleet_commands.h"
#include "controller/operator_http.h"
#include "controller/tenant_tokens.h"
#include "http/router.h"

namespace edge::controller {

struct FleetApiSettings {
  // http.denied_tools: tools a REST fleet command may not run.
  std::set<std::string> denied_tools{"exec", "file.write", "file.delete"};
};

class FleetApi {
 public:
  FleetApi(FleetCommands& commands, const TenantTokens& users, FleetApiSettings settings)
      : commands_(commands), http_(users, "fleet_api"), settings_(std::move(settings)) {}

  void Register(http::Router& router);

  // The POST body as a spec (selector, tool, args, deadline); INVALID_ARGUMENT naming the
  // field, its value and the rule. Tenant and creator are the caller's to fill in.
  static Result<FleetInvokeSpec> ParseInvokeBody(std::string_view body);
  static nlohmann::json PartJson(const FleetPartView& part);
  static nlohmann::json FleetJson(const FleetCommandView& view);

 private:
  void Create(const std::shared_ptr<http::Exchange>& ex);
  void Get(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  void Cancel(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);

  FleetCommands& commands_;
  OperatorHttp http_;
  const FleetApiSettings settings_;
};

}  // namespace edge::controller
