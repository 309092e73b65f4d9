#include "controller/fleet_api.h"

#include "common/json_parse.h"
#include "common/log.h"
#include "common/rfc3339.h"

namespace edge::controller {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTimeoutMs = 86'400'000;  // 24 h

json Time(int64_t ms) {
  return ms == 0 ? json(nullptr) : json(FormatRfc3339(FromEpochMillis(ms)));
}

std::string Short(const json& j) {
  return log::Escape(j.dump(-1, ' ', false, json::error_handler_t::replace), 80);
}

void Respond(const std::shared_ptr<http::Exchange>& ex, unsigned status, const json& body) {
  http::RespondEchoingRequestId(
      ex, http::Response{.status = status,
                         .body = body.dump(-1, ' ', false, json::error_handler_t::replace)});
}

}  // namespace

Result<FleetInvokeSpec> FleetApi::ParseInvokeBody(std::string_view body) {
  auto j = ParseJsonBounded(body, "request body");
  if (!j) return std::unexpected(j.error());
  if (!j->is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the request body must be a JSON object {selector, tool, args, timeout_ms}");
  }
  FleetInvokeSpec spec;
  for (const auto& [key, value] : j->items()) {
    if (key == "selector" || key == "tool") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         key + " must be a non-empty string, not " + Short(value));
      }
      (key == "selector" ? spec.selector : spec.tool) = value.get<std::string>();
    } else if (key == "args") {
      if (!value.is_object()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "args must be a JSON object, not " + Short(value));
      }
      spec.args_json = value.dump(-1, ' ', false, json::error_handler_t::replace);
    } else if (key == "timeout_ms") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
          value.get<int64_t>() > kMaxTimeoutMs) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "timeout_ms must be an integer from 0 (the agent's default) to " +
                             std::to_string(kMaxTimeoutMs) + ", not " + Short(value));
      }
      spec.deadline = std::chrono::milliseconds(value.get<int64_t>());
    } else {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown field \"" + log::Escape(key, 64) +
                           "\" (the fields are selector, tool, args, timeout_ms)");
    }
  }
  if (spec.selector.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "selector is required, such as \"os:linux\"");
  }
  if (spec.tool.empty()) return MakeError(ErrorCode::kInvalidArgument, "tool is required");
  return spec;
}

json FleetApi::PartJson(const FleetPartView& p) {
  json j = {{"node_id", p.node_id},
            {"command_id", p.command_id},
            {"state", p.state},
            {"exit_code", p.exit_code ? json(*p.exit_code) : json(nullptr)},
            {"duration_ms", p.duration_ms ? json(*p.duration_ms) : json(nullptr)}};
  if (!p.error_code.empty()) j["error"] = {{"code", p.error_code}, {"message", p.error_message}};
  j["output_capped"] = !p.output_cap_note.empty();
  if (!p.output_cap_note.empty()) j["output_cap_note"] = p.output_cap_note;
  return j;
}

json FleetApi::FleetJson(const FleetCommandView& v) {
  const auto& r = v.record;
  auto args = json::parse(r.args_json, nullptr, false);
  json parts = json::array();
  for (const auto& p : v.parts)
    parts.push_back(PartJson(p));
  return {{"fleet_command_id", r.fleet_id},
          {"selector", r.selector},
          {"tool", r.tool},
          {"args", args.is_discarded() ? json::object() : args},
          {"created_by", r.created_by},
          {"created_at", Time(r.created_at_ms)},
          {"cancelled_at", Time(r.cancelled_at_ms)},
          {"state", v.finished() ? "completed" : "running"},
          {"parts", std::move(parts)}};
}

void FleetApi::Register(http::Router& router) {
  router.Add("POST", "/v1/edge/fleet/commands",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams&) { Create(ex); });
  router.Add("GET", "/v1/edge/fleet/commands/{id}",
             [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) { Get(ex, p); });
  router.Add(
      "POST", "/v1/edge/fleet/commands/{id}/cancel",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) { Cancel(ex, p); });
}

void FleetApi::Create(const std::shared_ptr<http::Exchange>& ex) {
  auto user = http_.Authenticate(ex);
  if (!user) return;
  auto spec = ParseInvokeBody(ex->request().body);
  if (!spec) return http_.Fail(ex, spec.error());
  if (settings_.denied_tools.contains(spec->tool)) {
    return http_.Refuse(ex, 403, "PERMISSION_DENIED",
                        "tool \"" + log::Escape(spec->tool, 64) +
                            "\" is in http.denied_tools: the REST API may not run it on a "
                            "fleet (the operator's admin CLI may)");
  }
  spec->tenant_id = user->tenant_id;
  spec->created_by = user->subject;
  auto view = commands_.Invoke(*spec);
  if (!view) return http_.Fail(ex, view.error());
  json parts = json::array();
  for (const auto& p : view->parts) {
    json part = {{"node_id", p.node_id}, {"command_id", p.command_id}};
    if (!p.error_code.empty()) {
      part["error"] = {{"code", p.error_code}, {"message", p.error_message}};
    }
    parts.push_back(std::move(part));
  }
  log::Get("fleet_api")
      ->info("fleet command {} created by {} (tenant {}): {} part(s)", view->record.fleet_id,
             log::Escape(user->subject, 128), log::Escape(user->tenant_id, 128), parts.size());
  Respond(ex, 202, {{"fleet_command_id", view->record.fleet_id}, {"parts", std::move(parts)}});
}

void FleetApi::Get(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params) {
  auto user = http_.Authenticate(ex);
  if (!user) return;
  auto view = commands_.Get(params.at("id"), user->tenant_id);
  if (!view) return http_.Fail(ex, view.error());
  Respond(ex, 200, FleetJson(*view));
}

void FleetApi::Cancel(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params) {
  auto user = http_.Authenticate(ex);
  if (!user) return;
  const std::string& id = params.at("id");
  auto parts = commands_.Cancel(id, user->tenant_id,
                                "fleet command " + id + " cancelled by " + user->subject);
  if (!parts) return http_.Fail(ex, parts.error());
  json out = json::array();
  for (const auto& p : *parts) {
    json part = {{"node_id", p.node_id}, {"command_id", p.command_id}, {"cancel", p.outcome}};
    if (!p.message.empty()) part["message"] = p.message;
    out.push_back(std::move(part));
  }
  Respond(ex, 202, {{"fleet_command_id", id}, {"parts", std::move(out)}});
}

}  // namespace edge::controller
