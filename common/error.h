// Errors as values: every module boundary returns Result<T> = std::expected<T, Error>.
// ErrorCode is the stable set of codes of design.md §7; each door maps them to its wire
// format in exactly one table (EdgeResult.Err.code, gRPC status, HTTP status, CloudEvents).
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace edge {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kUnauthenticated,
  kLeaseRejected,
  kPathOutsideRoot,
  kTimedOut,
  kCancelled,
  kResourceExhausted,
  kFailedPrecondition,
  kDraining,
  kUnavailable,
  kAborted,
  kInternal,
  // The command was admitted, and the agent died (or was killed) before it ended; what ran
  // of it was killed when the agent started again. Its one terminal result (issue 16).
  kAgentRestarted,
};

// The stable spelling used on every wire ("INVALID_ARGUMENT", "LEASE_REJECTED", ...).
std::string_view ErrorCodeName(ErrorCode code);
// Inverse of ErrorCodeName; unknown names map to kInternal.
ErrorCode ErrorCodeFromName(std::string_view name);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  // "CODE: message", for logs and CLI output.
  std::string ToString() const;
};

template <typename T>
using Result = std::expected<T, Error>;

// For functions that return nothing on success.
using Status = std::expected<void, Error>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

inline Status OkStatus() {
  return {};
}

}  // namespace edge
