// ControlPlaneClient: the worker's calls to its control plane (wire.md §4, the worker
// contract) over worker.control_plane_url:
//   POST {url}/api/v1/worker/{id}/leases/{resource_id}/renew   (worker.renew_lease)
//   POST {url}/api/v1/worker/{id}/heartbeat                    (the heartbeat client)
// with X-Worker-ID and X-Worker-Token. The token is the static one when configured
// (auth.worker_tokens.<id>, else auth.worker_token(_file), the file re-read per request),
// else a fresh signed token with aud = worker:control-plane and a 5-minute lifetime minted
// from the signing key. Blocking calls (each bounded by `timeout`): run them off the I/O
// threads (the worker door runs them on its own pool).
//
// Renew request body: {"resource_id", "ttl", "lease": <the presented lease>}; the answer is
// {"lease": {…}} (or the lease object itself), a non-2xx status is an error carrying the
// control plane's message.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/identity/worker_authenticator.h"
#include "common/clock.h"
#include "common/error.h"
#include "config/agent_config.h"
#include "http/url.h"
#include "sandbox/sandbox_types.h"

namespace edge::workerrpc {

using ControlPlaneUrl = http::Url;

class ControlPlaneClient {
 public:
  // `tls` applies to an https:// URL (worker.control_plane_tls).
  ControlPlaneClient(ControlPlaneUrl url, std::string worker_id, const config::WorkerAuth& auth,
                     Clock& clock, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                     config::ClientTlsConfig tls = {});

  Result<sandbox::Lease> RenewLease(const sandbox::Lease& presented, std::string_view ttl);
  // POSTs `body` (the heartbeat document) and returns the control plane's answer.
  Result<nlohmann::json> Heartbeat(const nlohmann::json& body);

  // The credential sent now (exposed for tests): UNAUTHENTICATED when none is configured.
  Result<std::string> Token() const;

 private:
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);

  ControlPlaneUrl url_;
  std::string worker_id_;
  std::chrono::milliseconds timeout_;
  config::ClientTlsConfig tls_;
  identity::WorkerCredentials credentials_;
};

}  // namespace edge::workerrpc
