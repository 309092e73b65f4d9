#include "controller/worker_control_plane_api.h"

#include "agent/identity/worker_token.h"
#include "common/json_parse.h"
#include "common/log.h"
#include "config/duration.h"

namespace edge::controller {
namespace {

using nlohmann::json;

std::shared_ptr<spdlog::logger> Log() {
  return log::Get("worker_api");
}

}  // namespace

std::pair<unsigned, const char*> WorkerControlPlaneApi::ErrorStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return {400, "BAD_REQUEST"};
    case ErrorCode::kUnauthenticated:
      return {401, "UNAUTHORIZED"};
    case ErrorCode::kPermissionDenied:
      return {403, "FORBIDDEN"};
    case ErrorCode::kNotFound:
      return {404, "NOT_FOUND"};
    case ErrorCode::kAborted:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kAlreadyExists:
      return {409, "CONFLICT"};
    case ErrorCode::kUnavailable:
      return {503, "UNAVAILABLE"};
    default:
      return {500, "INTERNAL"};
  }
}

void WorkerControlPlaneApi::Register(http::Router& router) {
  router.Add(
      "POST", "/api/v1/worker/{id}/heartbeat",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) { Heartbeat(ex, p); });
  router.Add(
      "POST", "/api/v1/worker/{id}/leases/{resource_id}/renew",
      [this](std::shared_ptr<http::Exchange> ex, const http::PathParams& p) { Renew(ex, p); });
}

void WorkerControlPlaneApi::Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e) {
  auto [status, code] = ErrorStatus(e.code);
  const auto& req = ex->request();
  Log()->info("{} {} from {} (request {}): {} {}", req.method, log::Escape(req.Path(), 200),
              req.remote, log::Escape(http::RequestId(req), 128), status, e.message);
  http::RespondEchoingRequestId(ex, http::JsonError(status, code, e.message));
}

std::optional<std::string> WorkerControlPlaneApi::Authorize(
    const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params) {
  const auto& req = ex->request();
  auto ok = auth_.Authenticate([&req](std::string_view n) { return req.Header(n); },
                               identity::kWorkerControlPlaneAudience);
  if (!ok) {
    Fail(ex, {ErrorCode::kUnauthenticated, ok.error().message});
    return std::nullopt;
  }
  const std::string& path_id = params.at("id");
  if (path_id != ok->worker_id) {
    Fail(ex, {ErrorCode::kPermissionDenied,
              "worker \"" + ok->worker_id + "\" may not act for worker \"" +
                  log::Escape(path_id, 64) + "\" (the path's id must be the authenticated id)"});
    return std::nullopt;
  }
  return ok->worker_id;
}

void WorkerControlPlaneApi::Heartbeat(const std::shared_ptr<http::Exchange>& ex,
                                      const http::PathParams& params) {
  auto worker = Authorize(ex, params);
  if (!worker) return;
  auto body = ParseJsonBounded(ex->request().body, "heartbeat body");
  if (!body) return Fail(ex, body.error());
  if (auto st = fleet_.RecordHeartbeat(*worker, *body, ex->request().remote); !st) {
    return Fail(ex, st.error());
  }
  Log()->debug("heartbeat from worker {} ({})", *worker, ex->request().remote);
  json answer = {
      {"worker_id", *worker},
      {"status", "ok"},
      {"heartbeat_interval", config::FormatDuration(fleet_.settings().heartbeat_interval)}};
  http::RespondEchoingRequestId(ex, http::Response{.status = 200, .body = answer.dump()});
}

void WorkerControlPlaneApi::Renew(const std::shared_ptr<http::Exchange>& ex,
                                  const http::PathParams& params) {
  auto worker = Authorize(ex, params);
  if (!worker) return;
  auto body = ParseJsonBounded(ex->request().body, "renew body");
  if (!body) return Fail(ex, body.error());
  const std::string& resource = params.at("resource_id");
  auto lease = fleet_.RenewForWorker(*worker, resource, *body);
  if (!lease) return Fail(ex, lease.error());
  Log()->info("worker {} renewed its lease on {} (generation {})", *worker,
              log::Escape(resource, 128), lease->generation);
  json answer = {{"lease", WorkerFleet::LeaseJson(*lease)}};
  http::RespondEchoingRequestId(ex, http::Response{.status = 200, .body = answer.dump()});
}

}  // namespace edge::controller
