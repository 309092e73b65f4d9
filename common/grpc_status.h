// The one mapping between edge::ErrorCode (design.md §7) and gRPC status codes, both ways,
// and the gRPC codes' names. Every gRPC door, client and CLI uses it (separate library
// edge_grpc_status, so edge_common stays free of gRPC).
#pragma once

#include <grpcpp/grpcpp.h>

#include <string_view>

#include "common/error.h"

namespace edge {

// DRAINING and UNAVAILABLE → UNAVAILABLE; LEASE_REJECTED → PERMISSION_DENIED;
// PATH_OUTSIDE_ROOT → INVALID_ARGUMENT; TIMED_OUT → DEADLINE_EXCEEDED.
grpc::StatusCode ToGrpcCode(ErrorCode code);
inline grpc::Status ToGrpcStatus(const Error& e) {
  return grpc::Status(ToGrpcCode(e.code), e.message);
}

// A failed call seen by a client: DEADLINE_EXCEEDED counts as UNAVAILABLE (the peer did not
// answer in time; try again), codes with no counterpart as INTERNAL.
ErrorCode FromGrpcCode(grpc::StatusCode code);
// The error of a failed call of `rpc`: "<rpc>: <server's message>" (or the numeric status
// when the server gave none).
Error FromGrpcStatus(const grpc::Status& status, std::string_view rpc);

// "INVALID_ARGUMENT", "UNAVAILABLE", …, as gRPC spells them.
std::string_view GrpcCodeName(grpc::StatusCode code);

}  // namespace edge
