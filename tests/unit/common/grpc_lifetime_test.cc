// CallbackQueuePin (common/grpc_lifetime.h). The test binary's main holds one pin for the
// whole run (tests/support/test_main.cc), as the agent and the controller do; these tests
// drop the last reference of a callback channel on gRPC's own callback thread — the stress
// run's double free — and check the queue and its threads survive it.
#include "common/grpc_lifetime.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>

namespace edge {
namespace {

int ThreadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string s;
    std::getline(comm, s);
    if (s == name) ++n;
  }
  return n;
}

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

// gRPC starts between 2 and 16 of them (half the cores), when the first pin is taken.
int NextingThreads() {
  return ThreadsNamed("nexting_thread");
}

TEST(CallbackQueuePinTest, ALastChannelDroppedOnTheCallbackThreadLeavesTheQueueRunning) {
  const int threads = NextingThreads();
  ASSERT_GE(threads, 2) << "test_main's pin started the queue";
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
    EXPECT_EQ(NextingThreads(), threads) << "round " << round;
  }
}

TEST(CallbackQueuePinTest, ASecondPinSharesTheQueueAndItsReleaseKeepsTheFirstOnesThreads) {
  const int threads = NextingThreads();
  ASSERT_GE(threads, 2) << "test_main's pin started the queue";
  {
    const CallbackQueuePin second;
    EXPECT_EQ(NextingThreads(), threads);
  }
  EXPECT_EQ(NextingThreads(), threads);
  LameCall call;
  std::promise<grpc::StatusCode> done;
  call.Start([&](const grpc::Status& st) { done.set_value(st.error_code()); });
  EXPECT_EQ(done.get_future().get(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace edge
