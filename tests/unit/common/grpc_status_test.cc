// The one ErrorCode ⇄ gRPC mapping, checked against the table written out by hand here
// (design.md §7 codes; gRPC's code names as in grpc/status.h).
#include "common/grpc_status.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace edge {
namespace {

using G = grpc::StatusCode;

TEST(GrpcStatusTest, EveryErrorCodeHasItsGrpcCode) {
  const std::vector<std::pair<ErrorCode, G>> table = {
      {ErrorCode::kOk, G::OK},
      {ErrorCode::kInvalidArgument, G::INVALID_ARGUMENT},
      {ErrorCode::kNotFound, G::NOT_FOUND},
      {ErrorCode::kAlreadyExists, G::ALREADY_EXISTS},
      {ErrorCode::kPermissionDenied, G::PERMISSION_DENIED},
      {ErrorCode::kUnauthenticated, G::UNAUTHENTICATED},
      {ErrorCode::kLeaseRejected, G::PERMISSION_DENIED},
      {ErrorCode::kPathOutsideRoot, G::INVALID_ARGUMENT},
      {ErrorCode::kTimedOut, G::DEADLINE_EXCEEDED},
      {ErrorCode::kCancelled, G::CANCELLED},
      {ErrorCode::kResourceExhausted, G::RESOURCE_EXHAUSTED},
      {ErrorCode::kFailedPrecondition, G::FAILED_PRECONDITION},
      {ErrorCode::kDraining, G::UNAVAILABLE},
      {ErrorCode::kUnavailable, G::UNAVAILABLE},
      {ErrorCode::kAborted, G::ABORTED},
      {ErrorCode::kInternal, G::INTERNAL},
  };
  for (const auto& [code, grpc_code] : table) {
    EXPECT_EQ(ToGrpcCode(code), grpc_code) << ErrorCodeName(code);
  }
  const grpc::Status st = ToGrpcStatus(Error{ErrorCode::kLeaseRejected, "generation 4 < 5"});
  EXPECT_EQ(st.error_code(), G::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(), "generation 4 < 5");
}

TEST(GrpcStatusTest, AClientSeesTheMatchingCodeAndWhichCallFailed) {
  EXPECT_EQ(FromGrpcCode(G::DEADLINE_EXCEEDED), ErrorCode::kUnavailable);
  EXPECT_EQ(FromGrpcCode(G::UNAVAILABLE), ErrorCode::kUnavailable);
  EXPECT_EQ(FromGrpcCode(G::PERMISSION_DENIED), ErrorCode::kPermissionDenied);
  EXPECT_EQ(FromGrpcCode(G::UNAUTHENTICATED), ErrorCode::kUnauthenticated);
  EXPECT_EQ(FromGrpcCode(G::RESOURCE_EXHAUSTED), ErrorCode::kResourceExhausted);
  EXPECT_EQ(FromGrpcCode(G::UNIMPLEMENTED), ErrorCode::kInternal);
  EXPECT_EQ(FromGrpcCode(G::DATA_LOSS), ErrorCode::kInternal);

  Error e = FromGrpcStatus(grpc::Status(G::NOT_FOUND, "node n-1 is not enrolled"), "AttestNode");
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_EQ(e.message, "AttestNode: node n-1 is not enrolled");
  e = FromGrpcStatus(grpc::Status(G::INTERNAL, ""), "ConnectEdge");
  EXPECT_EQ(e.message, "ConnectEdge: gRPC status 13");
}

TEST(GrpcStatusTest, CodeNamesAreGrpcs) {
  EXPECT_EQ(GrpcCodeName(G::OK), "OK");
  EXPECT_EQ(GrpcCodeName(G::INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_EQ(GrpcCodeName(G::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_EQ(GrpcCodeName(G::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(static_cast<G>(99)), "UNKNOWN");
}

}  // namespace
}  // namespace edge
