// KeyRotation before any controller call: a node that is not enrolled, or has no key, gets one
// error naming the cause and the next step, and nothing is written under keys/. The rotation
// itself runs against the fake controller in edge_session_test and through the binaries in
// tests/integration/edge_stream_test.cc (RotateKeyWhileRunning…).
#include "agent/edge/key_rotation.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/manual_clock.h"
#include "tests/unit/edge/test_support.h"

namespace edge::agentedge {
namespace {

TEST(KeyRotation, ANodeThatIsNotEnrolledIsToldToEnrollFirst) {
  testing::TempDir dir;
  config::AgentConfig cfg;
  cfg.data_dir = dir.path() + "/agent";
  cfg.node_id = "edge-01";
  cfg.controller.address = "127.0.0.1:1";
  ManualClock clock;
  auto r = KeyRotation(cfg, clock).Run();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(r.error().message.rfind("not enrolled (", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("run `edge-agent enroll` first"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(cfg.data_dir + "/keys"));
}

}  // namespace
}  // namespace edge::agentedge
