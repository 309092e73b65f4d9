// Issue 15 #13: after SIGTERM the controller waited over 10 minutes for a node that had
// crashed. Controller::Stop is bounded even when a node's stream stopped reading with
// commands queued behind a full flow-control window (the worst case: writes that never
// complete) and an operator's Invoke call is held open on it.
#include "tests/unit/controller/edge_test_support.h"

namespace edge::controller::testing {
namespace {

const std::string kSid = "6f1c1c1e-0000-4000-8000-0000000000e1";

class ShutdownTest : public ControllerHarness {};

TEST_F(ShutdownTest, StopIsBoundedWithANodeThatStoppedReading) {
  auto node = EnrolledNode("edge-01");
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + node->token);
  auto stream = node->stub->ConnectEdge(&ctx);  // never read from: a hung node
  ASSERT_TRUE(stream->Write(node->Hello(kSid)));
  ASSERT_TRUE(WaitConnected("edge-01"));

  // Queue ~16 MB of commands: far beyond what the transport buffers for a peer that reads
  // nothing, so the controller's writes stop completing.
  apb::InvokeRequest req;
  req.set_node_id("edge-01");
  req.set_tool("file.write");
  req.set_args_json(R"({"content":")" + std::string(512 * 1024, 'a') + R"("})");
  req.set_detach(true);
  for (int i = 0; i < 32; ++i) {
    grpc::ClientContext ictx;
    ictx.set_deadline(Deadline());
    auto reader = admin_->Invoke(&ictx, req);
    apb::InvokeEvent ev;
    while (reader->Read(&ev)) {
    }
    ASSERT_TRUE(reader->Finish().ok()) << i;
  }
  // And an operator waiting on one more.
  req.set_detach(false);
  grpc::ClientContext held_ctx;
  auto held = admin_->Invoke(&held_ctx, req);
  apb::InvokeEvent accepted;
  ASSERT_TRUE(held->Read(&accepted));

  const auto start = std::chrono::steady_clock::now();
  controller_.reset();  // Stop()
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 6s) << "stop took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms";
  ctx.TryCancel();
  (void)stream->Finish();
  apb::InvokeEvent ev;
  while (held->Read(&ev)) {
  }
  EXPECT_FALSE(held->Finish().ok()) << "the held call ended with the controller";
}

}  // namespace
}  // namespace edge::controller::testing
