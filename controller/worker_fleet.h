// WorkerFleet: the controller's control plane for workers (`edge-agent --listen`, wire.md §4,
// the worker contract), as plain operations over the Store — what the HTTP endpoints
// (WorkerControlPlaneApi) and the admin API (WorkerAdminImpl) both call, so neither holds a
// rule of its own:
//   - a worker's heartbeat, validated field by field and recorded;
//   - a worker's lease renewal (the presented lease must be the current one it holds);
//   - the worker list with each worker's derived state (stale after two missed intervals);
//   - what an operator's call to a worker needs: its rpc_url, a freshly minted aud=worker:rpc
//     token and, when asked, the lease acquired for it; and the lease's release.
// Borrows the Store and the Clock; thread-safe (the Store is).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/identity/worker_authenticator.h"
#include "common/clock.h"
#include "common/error.h"
#include "config/agent_config.h"
#include "controller/store.h"

namespace edge::controller {

struct WorkerFleetSettings {
  std::chrono::milliseconds heartbeat_interval{30'000};
  std::chrono::milliseconds lease_ttl{300'000};
  std::chrono::milliseconds max_lease_ttl{3'600'000};
  std::chrono::milliseconds call_token_ttl{300'000};
};

// Worker states as shown: the reported status unless the worker is stale.
inline constexpr const char* kWorkerOnline = "online";
inline constexpr const char* kWorkerDraining = "draining";
inline constexpr const char* kWorkerStale = "stale";

struct WorkerView {
  WorkerRecord record;
  std::string state;  // online | draining | stale
};

struct WorkerCallPlan {
  std::string worker_id;
  std::string rpc_url;
  std::string token;  // aud=worker:rpc; a secret: never logged
  std::string state;  // the worker's state now
  std::optional<LeaseRecord> lease;
};

class WorkerFleet {
 public:
  WorkerFleet(Store& store, Clock& clock, WorkerFleetSettings settings,
              const config::WorkerAuth& auth);

  // A heartbeat body {hostname, status, providers, capabilities, capacity: {max_sandboxes,
  // max_sandboxes_per_owner, preview_domain, rpc_url}} from `worker_id` (authenticated by
  // the caller). INVALID_ARGUMENT naming the field, its value and why. Unknown keys are
  // ignored (a newer worker may send more).
  Status RecordHeartbeat(const std::string& worker_id, const nlohmann::json& body,
                         const std::string& remote);

  // A renewal from `worker_id` of the lease on `resource_id` (the path): body {"resource_id"
  // (optional, must equal the path's), "ttl" ("5m" or seconds, optional), "lease": the
  // presented lease}. The presented lease must name this resource and this worker as holder
  // and carry the current generation. INVALID_ARGUMENT for a malformed body; NOT_FOUND /
  // ABORTED / FAILED_PRECONDITION from the store's rules.
  Result<LeaseRecord> RenewForWorker(const std::string& worker_id, const std::string& resource_id,
                                     const nlohmann::json& body);

  Result<std::vector<WorkerView>> List() const;

  // NOT_FOUND for a worker that never sent a heartbeat; FAILED_PRECONDITION for one that
  // advertises no rpc_url; UNAUTHENTICATED when no worker credential is configured. With
  // `lease_resource`, the lease on it is acquired for the worker (ttl 0 = the default).
  Result<WorkerCallPlan> PrepareCall(const std::string& worker_id,
                                     const std::string& lease_resource,
                                     std::chrono::milliseconds lease_ttl);
  Status ReleaseLease(const std::string& resource_id, const std::string& worker_id);

  // {"resource_id","holder_id","generation","expires_at"} (RFC 3339), the wire's lease.
  static nlohmann::json LeaseJson(const LeaseRecord& lease);

  const WorkerFleetSettings& settings() const { return settings_; }

 private:
  std::string StateOf(const WorkerRecord& w) const;
  Result<std::chrono::milliseconds> CheckTtl(std::chrono::milliseconds ttl) const;
  int64_t NowMs() const;

  Store& store_;
  Clock& clock_;
  WorkerFleetSettings settings_;
  identity::WorkerCredentials credentials_;
};

}  // namespace edge::controller
