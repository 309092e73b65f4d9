// The edge door's translation between the Executor and the wire (design.md §7): THE one table
// from the executor's stable error codes to EdgeResult.Err.code, and the conversions of
// results and JSON payloads into EdgeResult / google.protobuf.Struct. Stateless functions.
//
// Result shapes (brief B): Ok{exit_code, payload = Any(Struct of the executor's JSON payload),
// duration}; an exec that exits non-zero is Ok with that exit code. For exec, the payload's
// stdout/stderr keep only their last 64 KiB each (output_truncated: true when cut or when the
// executor's output cap cut them), so a result always fits one gRPC message; the whole output
// went out as CommandProgress chunks. output_capped: true (with output_cap_bytes), from the
// executor, tells the controller that the cap dropped output that no chunk carried. Err{code,
// message, exit_code}; TimedOut{deadline}; Cancelled{reason}.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/struct.pb.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/struct_json.h"  // JsonToStruct, StructToJson
#include "node_cluster.pb.h"
#include "sandbox/executor.h"

namespace edge::agentedge {

inline constexpr size_t kResultOutputTailBytes = 64 * 1024;

// EdgeResult.Err.code for an executor error code: "INVALID_ARGUMENT", "NOT_FOUND",
// "PERMISSION_DENIED", "LEASE_REJECTED", "PATH_OUTSIDE_ROOT", "RESOURCE_EXHAUSTED",
// "DRAINING", "INTERNAL", ... (the stable names of design.md §7).
std::string_view EdgeErrorCode(ErrorCode code);

// Keeps the last `limit` bytes of a string, cut at a UTF-8 character boundary.
std::string TailUtf8(std::string_view s, size_t limit);

// The exec payload with stdout/stderr cut to their tails and output_truncated set.
nlohmann::json TrimOutputs(nlohmann::json payload, bool executor_truncated,
                           size_t limit = kResultOutputTailBytes);

// The wire result of an executor result. `deadline` (the InvokeTool's) is what TimedOut
// reports; without one, the run's duration.
aegis::cluster::v1::EdgeResult ToEdgeResult(const sandbox::InvokeResult& result,
                                            std::optional<std::chrono::milliseconds> deadline);

// Err{code, message} for a refusal by the edge door itself.
aegis::cluster::v1::EdgeResult ErrorResult(ErrorCode code, std::string message);

// One line for logs: "ok exit N", "err CODE", "timed_out", "cancelled (reason)", "empty".
std::string DescribeResult(const aegis::cluster::v1::EdgeResult& result);

}  // namespace edge::agentedge
