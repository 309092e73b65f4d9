#include "common/error.h"

#include <gtest/gtest.h>

namespace edge {
namespace {

TEST(ErrorCode, NamesRoundTrip) {
  for (auto code : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kLeaseRejected,
                    ErrorCode::kPathOutsideRoot, ErrorCode::kDraining, ErrorCode::kTimedOut}) {
    EXPECT_EQ(ErrorCodeFromName(ErrorCodeName(code)), code);
  }
  EXPECT_EQ(ErrorCodeName(ErrorCode::kLeaseRejected), "LEASE_REJECTED");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kPathOutsideRoot), "PATH_OUTSIDE_ROOT");
  EXPECT_EQ(ErrorCodeFromName("NO_SUCH_CODE"), ErrorCode::kInternal);
}

TEST(Error, ToStringNamesCodeAndMessage) {
  Error e{ErrorCode::kNotFound, "sandbox \"sb-1\" not found"};
  EXPECT_EQ(e.ToString(), "NOT_FOUND: sandbox \"sb-1\" not found");
}

}  // namespace
}  // namespace edge
