// Dispatcher::OnResult (issue 14): a node's results never wait for the disk on its stream's
// thread; the ones that arrive while a batch is being stored are stored together, in one
// transaction, and a command's observer hears of its result only once it is stored.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/dispatcher.h"
#include "tests/unit/controller/edge_fleet_fixture.h"
#include "tests/unit/controller/forwarding_store.h"

namespace edge::controller {
namespace {

namespace pb = aegis::cluster::v1;
using namespace std::chrono_literals;

// Holds the first batch of results inside the store until released; counts every batch.
class SlowResultsStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<Result<bool>> CompleteCommands(
      const std::vector<CommandCompletion>& results) override {
    bool first = false;
    {
      std::lock_guard lock(mu_);
      first = batches_.empty();
      batches_.push_back(results.size());
    }
    if (first) {
      entered.set_value();
      release_.wait();
    }
    return s_.CompleteCommands(results);
  }
  std::vector<size_t> batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }
  std::promise<void> entered;
  std::promise<void> release;

 private:
  std::shared_future<void> release_ = release.get_future().share();
  std::mutex mu_;
  std::vector<size_t> batches_;
};

// What a caller of Invoke hears of its command's result, from whichever thread tells it.
class ResultWaiter final : public CommandObserver {
 public:
  void OnAccepted(const std::string&) override {}
  void OnProgress(const pb::Chunk&) override {}
  void OnResult(const CommandRecord& c) override { result_.set_value(c); }
  void OnNodeDisconnected(const std::string&) override {}
  void OnNodeReconnected(const std::string&) override {}

 private:
  std::promise<CommandRecord> result_;  // before `result`, which is made from it

 public:
  std::future<CommandRecord> result = result_.get_future();
};

pb::EdgeResult Exited(int code) {
  pb::EdgeResult r;
  r.mutable_ok()->set_exit_code(code);
  return r;
}

class DispatcherResultsTest : public EdgeFleetFixture {};

TEST_F(DispatcherResultsTest, ResultsArrivingWhileTheDiskIsBusyAreStoredTogether) {
  pb::EdgeCapabilities caps;
  caps.set_os("linux");
  caps.add_local_tools("exec");
  EnrollNode("edge-01", "t1", caps, nullptr);
  SlowResultsStore slow(*store_);
  Dispatcher d(slow, *node_tokens_, clock_);
  d.Attach("edge-01", std::make_shared<RecordingStream>());
  constexpr int kCommands = 5;
  std::vector<std::string> ids;
  std::vector<std::shared_ptr<ResultWaiter>> waiters;
  for (int i = 0; i < kCommands; ++i) {
    waiters.push_back(std::make_shared<ResultWaiter>());
    auto id = d.Invoke({.node_id = "edge-01", .tool = "exec", .args_json = "{}"}, waiters.back());
    ASSERT_TRUE(id) << id.error().ToString();
    ids.push_back(*id);
  }

  d.OnResult("edge-01", ids[0], Exited(0));
  ASSERT_EQ(slow.entered.get_future().wait_for(30s), std::future_status::ready);
  // The disk is busy with the first result: the others are taken at once all the same (a
  // stream's thread that waited here would deadlock this test; it runs them on another one).
  auto delivering = std::async(std::launch::async, [&] {
    for (int i = 1; i < kCommands; ++i)
      d.OnResult("edge-01", ids[i], Exited(i));
    d.OnResult("edge-01", ids[1], Exited(99));             // a duplicate (an outbox resend)
    d.OnResult("edge-01", "no-such-command", Exited(98));  // refused alone: NOT_FOUND
  });
  const bool returned = delivering.wait_for(30s) == std::future_status::ready;
  EXPECT_EQ(waiters[0]->result.wait_for(0s), std::future_status::timeout)
      << "told before its result was stored";
  slow.release.set_value();
  ASSERT_TRUE(returned) << "OnResult waited for the disk";
  d.FlushResults();

  EXPECT_EQ(slow.batches(), (std::vector<size_t>{1, kCommands + 1}))
      << "the first alone, then everything that came meanwhile in one transaction";
  for (int i = 0; i < kCommands; ++i) {
    ASSERT_EQ(waiters[i]->result.wait_for(0s), std::future_status::ready) << i;
    const CommandRecord c = waiters[i]->result.get();
    EXPECT_EQ(c.command_id, ids[i]);
    EXPECT_EQ(c.state, kCommandCompleted);
    EXPECT_EQ(c.result.exit_code, i) << "the first result of each command, the duplicate ignored";
    auto stored = store_->GetCommand(ids[i]);
    ASSERT_TRUE(stored && *stored);
    EXPECT_EQ((*stored)->result.exit_code, i);
  }
}

// A result that comes after StopResults (the controller stopping) is stored on its caller's
// thread, never dropped; one from a node the command was not sent to is refused.
TEST_F(DispatcherResultsTest, AfterStopAResultIsStoredOnItsCallersThread) {
  EnrollEdge01();
  auto waiter = std::make_shared<ResultWaiter>();
  auto id = dispatcher_->Invoke({.node_id = "edge-01", .tool = "exec", .args_json = "{}"}, waiter);
  ASSERT_TRUE(id) << id.error().ToString();
  dispatcher_->OnResult("edge-02", *id, Exited(2));  // not the node it was sent to
  dispatcher_->StopResults();
  EXPECT_EQ(waiter->result.wait_for(0s), std::future_status::timeout) << "edge-02's was refused";
  dispatcher_->OnResult("edge-01", *id, Exited(3));
  ASSERT_EQ(waiter->result.wait_for(0s), std::future_status::ready)
      << "stored and told before OnResult returned";
  EXPECT_EQ(waiter->result.get().result.exit_code, 3);
}

}  // namespace
}  // namespace edge::controller
