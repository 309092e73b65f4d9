#include "controller/grpc_status.h"

namespace edge::controller {

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
      return grpc::StatusCode::ABORTED;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

}  // namespace edge::controller
