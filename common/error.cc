#include "common/error.h"

#include <array>

namespace edge {
namespace {
struct NamedCode {
  ErrorCode code;
  std::string_view name;
};
constexpr std::array kNames = {
    NamedCode{ErrorCode::kOk, "OK"},
    NamedCode{ErrorCode::kInvalidArgument, "INVALID_ARGUMENT"},
    NamedCode{ErrorCode::kNotFound, "NOT_FOUND"},
    NamedCode{ErrorCode::kAlreadyExists, "ALREADY_EXISTS"},
    NamedCode{ErrorCode::kPermissionDenied, "PERMISSION_DENIED"},
    NamedCode{ErrorCode::kUnauthenticated, "UNAUTHENTICATED"},
    NamedCode{ErrorCode::kLeaseRejected, "LEASE_REJECTED"},
    NamedCode{ErrorCode::kPathOutsideRoot, "PATH_OUTSIDE_ROOT"},
    NamedCode{ErrorCode::kTimedOut, "TIMED_OUT"},
    NamedCode{ErrorCode::kCancelled, "CANCELLED"},
    NamedCode{ErrorCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    NamedCode{ErrorCode::kFailedPrecondition, "FAILED_PRECONDITION"},
    NamedCode{ErrorCode::kDraining, "DRAINING"},
    NamedCode{ErrorCode::kUnavailable, "UNAVAILABLE"},
    NamedCode{ErrorCode::kAborted, "ABORTED"},
    NamedCode{ErrorCode::kInternal, "INTERNAL"},
    NamedCode{ErrorCode::kAgentRestarted, "AGENT_RESTARTED"},
};
}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  for (const auto& n : kNames) {
    if (n.code == code) return n.name;
  }
  return "INTERNAL";
}

ErrorCode ErrorCodeFromName(std::string_view name) {
  for (const auto& n : kNames) {
    if (n.name == name) return n.code;
  }
  return ErrorCode::kInternal;
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code));
  out += ": ";
  out += message;
  return out;
}

}  // namespace edge
