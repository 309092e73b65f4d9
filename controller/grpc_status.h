// The controller's one mapping from edge::ErrorCode to gRPC status codes.
#pragma once

#include <grpcpp/grpcpp.h>

#include "common/error.h"

namespace edge::controller {

grpc::StatusCode ToGrpcCode(ErrorCode code);
inline grpc::Status ToGrpcStatus(const Error& e) {
  return grpc::Status(ToGrpcCode(e.code), e.message);
}

}  // namespace edge::controller
