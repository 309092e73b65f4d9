// WorkerControlPlaneApi: the controller's HTTP endpoints for workers (wire.md §4, the worker
// contract), registered on the controller's http::Router:
//   POST /api/v1/worker/{id}/heartbeat                  → 200 {"worker_id","status":"ok",…}
//   POST /api/v1/worker/{id}/leases/{resource_id}/renew → 200 {"lease":{…}}
// Each request is authenticated with the worker credentials (WorkerAuthenticator for any
// worker, audience worker:control-plane); the path's id must be the authenticated id (403
// otherwise). The body is handed to WorkerFleet; its errors map to HTTP statuses in one table
// (ErrorStatus). Error bodies are {"code","message"} and never carry a token; X-Request-ID is
// echoed and logged. The work is short SQLite transactions, run on the HTTP thread that got
// the request. Borrows the fleet and the authenticator.
#pragma once

#include <memory>

#include "agent/identity/worker_authenticator.h"
#include "controller/worker_fleet.h"
#include "http/router.h"

namespace edge::controller {

class WorkerControlPlaneApi {
 public:
  WorkerControlPlaneApi(WorkerFleet& fleet, const identity::WorkerAuthenticator& auth)
      : fleet_(fleet), auth_(auth) {}

  void Register(http::Router& router);

  // The HTTP status and code for an error of the fleet or the store.
  static std::pair<unsigned, const char*> ErrorStatus(ErrorCode code);

 private:
  void Heartbeat(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  void Renew(const std::shared_ptr<http::Exchange>& ex, const http::PathParams& params);
  // The authenticated worker id when the request may act for the path's `id`; otherwise
  // answers 401/403 itself and returns nullopt.
  std::optional<std::string> Authorize(const std::shared_ptr<http::Exchange>& ex,
                                       const http::PathParams& params);
  void Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e);

  WorkerFleet& fleet_;
  const identity::WorkerAuthenticator& auth_;
};

}  // namespace edge::controller
