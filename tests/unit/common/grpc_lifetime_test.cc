// CallbackQueuePin (common/grpc_lifetime.h). The test binary's main holds one pin for the
// whole run (tests/support/test_main.cc), as the agent and the controller do; these tests
// drop the last reference of a callback channel on gRPC's own callback thread — the stress
// run's double free — and check the queue and its threads survive it.
#include "common/grpc_lifetime.h"

#include "tests/support/processes.h"
#include "tests/support/wait_until.h"

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <memory>
#include <string>

namespace edge {
namespace {

using testing::ThreadsNamed;

// One callback call on a lame channel (every call fails at once); `on_done` runs on gRPC's
// callback thread with the call's status. The channel's references are `owner` and ctx's.
struct LameCall {
  std::shared_ptr<grpc::Channel> owner = grpc::CreateChannel("edge-test-lame", nullptr);
  grpc::ClientContext ctx;
  grpc::Slice empty;
  grpc::ByteBuffer request{&empty, 1};
  grpc::ByteBuffer response;

  void Start(std::function<void(const grpc::Status&)> on_done) {
    grpc::GenericStub stub(owner);
    stub.UnaryCall(&ctx, "/edge.Test/None", grpc::StubOptions(), &request, &response,
                   std::move(on_done));
  }
};

// gRPC starts between 2 and 16 of them (half the cores) when the first pin is taken; each
// names itself once it runs, which on a loaded machine can be after the pin was built.
int NextingThreads() {
  return ThreadsNamed("nexting_thread");
}
int NamedNextingThreads() {
  EXPECT_TRUE(edge::testing::WaitUntil([] { return NextingThreads() >= 2; }))
      << "test_main's pin started the queue";
  return NextingThreads();
}

TEST(CallbackQueuePinTest, ALastChannelDroppedOnTheCallbackThreadLeavesTheQueueRunning) {
  const int threads = NamedNextingThreads();
  ASSERT_GE(threads, 2);
  for (int round = 0; round < 3; ++round) {
    // The call (its context holds the channel too) and with it the channel's only reference
    // go on a nexting thread. Without a pin that was the queue's last reference: the queue
    // was deleted under the thread running this callback.
    auto* call = new LameCall;
    std::promise<grpc::StatusCode> done;
    call->Start([call, &done](const grpc::Status& st) {
      delete call;
      done.set_value(st.error_code());
    });
    EXPECT_EQ(done.get_future().get(), grpc::StatusCode::INVALID_ARGUMENT) << "round " << round;
    EXPECT_GE(NextingThreads(), threads) << "round " << round << ": none of them went";
  }
}

TEST(CallbackQueuePinTest, ASecondPinSharesTheQueueAndItsReleaseKeepsTheFirstOnesThreads) {
  const int threads = NamedNextingThreads();
  ASSERT_GE(threads, 2);
  {
    const CallbackQueuePin second;
    EXPECT_GE(NextingThreads(), threads);
  }
  EXPECT_GE(NextingThreads(), threads) << "the second pin's release stopped none of them";
  LameCall call;
  std::promise<grpc::StatusCode> done;
  call.Start([&](const grpc::Status& st) { done.set_value(st.error_code()); });
  EXPECT_EQ(done.get_future().get(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace edge
