// CallMapper: the compute door's translation, and nothing else (docs/architecture.md "how a
// door is added"): a processor or criteria request becomes a sandbox::InvokeRequest for the
// tool its name maps to (compute.processors / compute.criteria), and the InvokeResult becomes
// the response the engine gets. The executor applies every rule (caps, deadlines, security
// context, output limits); the door only maps.
//
//   request → the mapped tool, with the request JSON on stdin, the auth attributes the server
//   attached (authtype, authid, authclaims) and the request's ids in the environment:
//     EDGE_COMPUTE_KIND (processor | criteria), EDGE_COMPUTE_NAME, EDGE_COMPUTE_REQUEST_ID,
//     EDGE_COMPUTE_ENTITY_ID, EDGE_COMPUTE_AUTHTYPE, EDGE_COMPUTE_AUTHID,
//     EDGE_COMPUTE_AUTHCLAIMS (only those present);
//   the call's timeout = the handler's; its cap = DoorLimit{"compute",
//   "compute.max_concurrent_calls", N}; command_id = "compute:" + requestId (a repeated
//   requestId is answered from the executor's result store, not run twice).
//
//   processor: exit 0 and stdout a JSON object → payload.data = that object; exit 0 and empty
//   stdout → the entity unchanged (the request's data echoed); anything else fails.
//   criteria: stdout a JSON object {"matches": bool, "reason"?: string} (exit 0 or 1) → that;
//   empty stdout → exit 0 matches, exit 1 does not; anything else fails.
//
// Failures are success:false with error {code, message, retryable} — ErrorFor is the one
// table from the executor's ErrorCode to the contract's error object.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "agent/compute/cloudevent_codec.h"
#include "common/error.h"
#include "config/agent_config.h"
#include "sandbox/executor_types.h"

namespace edge::compute {

// Codes the door itself produces (beside the executor's ErrorCodeName spellings).
inline constexpr std::string_view kToolFailed = "TOOL_FAILED";
inline constexpr std::string_view kInvalidOutput = "INVALID_OUTPUT";

// The door name and its cap key, as the executor counts them.
inline constexpr std::string_view kDoorName = "compute";
inline constexpr std::string_view kCapKey = "compute.max_concurrent_calls";

// The one table: executor error → contract error object (code = ErrorCodeName; retryable
// for what may pass by itself: RESOURCE_EXHAUSTED, DRAINING, UNAVAILABLE, TIMED_OUT,
// CANCELLED, ABORTED, INTERNAL).
ErrorObject ErrorFor(const Error& error);

class CallMapper {
 public:
  CallMapper(const config::ComputeConfig& config, size_t max_stdin_bytes = 16u << 20)
      : processors_(config.processors),
        criteria_(config.criteria),
        max_concurrent_(static_cast<size_t>(config.max_concurrent_calls)),
        max_stdin_bytes_(max_stdin_bytes) {}

  // NOT_FOUND naming the processor or criterion when no handler of that name is configured.
  Result<sandbox::InvokeRequest> ToInvoke(
      const CalculationRequest& request,
      const std::map<std::string, std::string>& attributes) const;

  // The response for `request` from the tool's result.
  nlohmann::json Answer(const CalculationRequest& request,
                        const sandbox::InvokeResult& result) const;
  // A success:false response for `request` (unknown handler, refused, ...).
  static nlohmann::json Failure(const CalculationRequest& request, const ErrorObject& error);

 private:
  std::map<std::string, config::ComputeHandler> processors_;
  std::map<std::string, config::ComputeHandler> criteria_;
  size_t max_concurrent_;
  size_t max_stdin_bytes_;
};

}  // namespace edge::compute
