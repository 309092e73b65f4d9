// The worker RPC wire (wire.md §4): the request envelope
//   {"id", "method", "worker_id", "lease": {"resource_id", "holder_id", "generation",
//    "expires_at"}, "params": {…}}
// parsed strictly (every wrong type is a 400 naming the field), the response envelope
//   {"id", "worker_id", "result": {…}} / {"id", "worker_id", "error": "<text>", "code": …}
// and THE one table from the executor's error codes to HTTP statuses. Stateless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/error.h"
#include "common/rfc3339.h"
#include "sandbox/sandbox_types.h"

namespace edge::workerrpc {

struct RpcRequest {
  std::string id;
  std::string method;
  std::string worker_id;
  std::optional<sandbox::Lease> lease;
  nlohmann::json params = nlohmann::json::object();
};

// INVALID_ARGUMENT naming what is wrong: not JSON, not an object, a field of the wrong type,
// no method, a lease field missing or malformed. Unknown top-level keys are ignored (the
// contract may grow). Nesting deeper than 64 levels is refused.
Result<RpcRequest> ParseRpcRequest(std::string_view body);
// The same for a body the caller gives up: a file_write's content of hundreds of MB becomes
// params.content in the body's own buffer, not a copy (ParseJsonBoundedInPlace).
Result<RpcRequest> ParseRpcRequestInPlace(std::string body);

// Lease times on this wire are RFC 3339 (common/rfc3339.h).
using edge::FormatRfc3339;
using edge::ParseRfc3339;

nlohmann::json LeaseToJson(const sandbox::Lease& lease);

// THE table: executor ErrorCode → HTTP status of the worker RPC door.
//   INVALID_ARGUMENT 400 · UNAUTHENTICATED 401 · PERMISSION_DENIED, LEASE_REJECTED,
//   PATH_OUTSIDE_ROOT 403 · NOT_FOUND 404 · ALREADY_EXISTS, FAILED_PRECONDITION, ABORTED 409 ·
//   RESOURCE_EXHAUSTED 429 · DRAINING, UNAVAILABLE 503 · TIMED_OUT 504 · CANCELLED, INTERNAL
//   and anything else 500.
unsigned HttpStatus(ErrorCode code);

// {"id", "worker_id", "result"}.
// One NDJSON line of a streamed exec, "\n" included: the bytes of
// Dump(ResultEnvelope(id, worker_id, {"data": data, "stream": stream})) + "\n", written
// straight into a string (the hot path of exec_stream). nullopt when a part is not valid
// UTF-8: the caller then builds the line through json (PutBytes adds data_base64).
std::optional<std::string> NdjsonChunkLine(std::string_view id, std::string_view worker_id,
                                           std::string_view stream, std::string_view data);
nlohmann::json ResultEnvelope(std::string_view id, std::string_view worker_id,
                              nlohmann::json result);
// {"id", "worker_id", "error": "<message>", "code": "<CODE>"}.
nlohmann::json ErrorEnvelope(std::string_view id, std::string_view worker_id, const Error& error);

}  // namespace edge::workerrpc
