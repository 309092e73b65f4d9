// FitResult: a result that would not fit one edge stream message is never sent as it is
// (the controller would end the stream, and the outbox would resend it for ever).
#include <gtest/gtest.h>

#include "agent/edge/command_dispatcher.h"

namespace edge::agentedge {
namespace {

namespace pb = aegis::cluster::v1;

TEST(FitResultTest, AResultThatFitsIsKeptAsItIs) {
  pb::EdgeResult r;
  r.mutable_ok()->set_exit_code(3);
  pb::EdgeResult fitted = FitResult("c1", r, 1 << 20);
  ASSERT_TRUE(fitted.has_ok());
  EXPECT_EQ(fitted.ok().exit_code(), 3);
}

TEST(FitResultTest, AResultOverTheLimitBecomesResourceExhaustedNamingSizeAndLimit) {
  pb::EdgeResult r;
  r.mutable_err()->set_message(std::string(100000, 'x'));
  const size_t size = r.ByteSizeLong();
  const uint64_t limit = 64 * 1024;  // 64 KiB minus the envelope reserve = 48 KiB for results
  pb::EdgeResult fitted = FitResult("c1", r, limit);
  ASSERT_TRUE(fitted.has_err());
  EXPECT_EQ(fitted.err().code(), "RESOURCE_EXHAUSTED");
  const std::string& m = fitted.err().message();
  EXPECT_NE(m.find(std::to_string(size) + " bytes"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(limit - kResultEnvelopeReserve)), std::string::npos) << m;
  EXPECT_NE(m.find("edge.max_message_bytes 65536"), std::string::npos) << m;
  EXPECT_LT(fitted.ByteSizeLong(), limit - kResultEnvelopeReserve);
}

}  // namespace
}  // namespace edge::agentedge
