#include "common/grpc_status.h"

#include <string>

namespace edge {

grpc::StatusCode ToGrpcCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return grpc::StatusCode::OK;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kPathOutsideRoot:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kLeaseRejected:
      return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case ErrorCode::kTimedOut:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case ErrorCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kDraining:
    case ErrorCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kAborted:
    case ErrorCode::kAgentRestarted:
      return grpc::StatusCode::ABORTED;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

ErrorCode FromGrpcCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return ErrorCode::kOk;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return ErrorCode::kUnavailable;
    case grpc::StatusCode::CANCELLED:
      return ErrorCode::kCancelled;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return ErrorCode::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return ErrorCode::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS:
      return ErrorCode::kAlreadyExists;
    case grpc::StatusCode::PERMISSION_DENIED:
      return ErrorCode::kPermissionDenied;
    case grpc::StatusCode::UNAUTHENTICATED:
      return ErrorCode::kUnauthenticated;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return ErrorCode::kResourceExhausted;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return ErrorCode::kFailedPrecondition;
    case grpc::StatusCode::ABORTED:
      return ErrorCode::kAborted;
    default:
      return ErrorCode::kInternal;
  }
}

Error FromGrpcStatus(const grpc::Status& status, std::string_view rpc) {
  std::string msg = std::string(rpc) + ": ";
  msg += status.error_message().empty() ? "gRPC status " + std::to_string(status.error_code())
                                        : status.error_message();
  return Error{FromGrpcCode(status.error_code()), std::move(msg)};
}

std::string_view GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace edge
