// The dispatcher's two queues (issue 14). Dispatcher::OnResult: a node's results never wait
// for the disk on its stream's thread; the ones that arrive while a batch is being stored are
// stored together, in one transaction, and a command's observer hears of its result only once
// it is stored. Dispatcher::InvokeAsync: the same for the admin Invoke stream's commands —
// stored together, accepted only once stored, sent only after that, and one bad command in a
// batch refuses no other.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "controller/dispatcher.h"
#include "tests/unit/controller/edge_fleet_fixture.h"
#include "tests/unit/controller/forwarding_store.h"

namespace edge::controller {
namespace {

namespace pb = aegis::cluster::v1;
using namespace std::chrono_literals;

// Holds the first batch that enters it until released; counts every batch's size.
class BatchGate {
 public:
  void Enter(size_t batch_size) {
    bool first = false;
    {
      std::lock_guard lock(gate_mu_);
      first = batches_.empty();
      batches_.push_back(batch_size);
    }
    if (first) {
      entered.set_value();
      release_.wait();
    }
  }
  std::vector<size_t> batches() {
    std::lock_guard lock(gate_mu_);
    return batches_;
  }
  std::promise<void> entered;
  std::promise<void> release;

 private:
  std::shared_future<void> release_ = release.get_future().share();
  std::mutex gate_mu_;
  std::vector<size_t> batches_;
};

// The first batch of results waits inside the store.
class SlowResultsStore final : public ForwardingStore, public BatchGate {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<Result<bool>> CompleteCommands(
      const std::vector<CommandCompletion>& results) override {
    Enter(results.size());
    return s_.CompleteCommands(results);
  }
};

// The first batch of commands waits inside the store; commands stored one by one are counted.
class SlowInsertsStore final : public ForwardingStore, public BatchGate {
 public:
  using ForwardingStore::ForwardingStore;
  Status InsertCommands(const std::vector<CommandRecord>& commands) override {
    Enter(commands.size());
    return s_.InsertCommands(commands);
  }
  Status InsertCommand(const CommandRecord& command) override {
    ++alone_;
    return s_.InsertCommand(command);
  }
  int alone() const { return alone_.load(); }

 private:
  std::atomic<int> alone_{0};  // InsertCommand calls
};

// What a caller of Invoke hears of its command, from whichever thread tells it.
class ResultWaiter final : public CommandObserver {
 public:
  void OnAccepted(const std::string& id) override {
    std::lock_guard lock(mu_);
    accepted_.push_back(id);
  }
  std::vector<std::string> accepted() {
    std::lock_guard lock(mu_);
    return accepted_;
  }
  void OnProgress(pb::Chunk) override {}
  void OnResult(const CommandRecord& c) override { result_.set_value(c); }
  void OnNodeDisconnected(const std::string&) override {}
  void OnNodeReconnected(const std::string&) override {}

 private:
  std::mutex mu_;
  std::vector<std::string> accepted_;
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

// A result that comes after StopQueues (the controller stopping) is stored on its caller's
// thread, never dropped; one from a node the command was not sent to is refused.
TEST_F(DispatcherResultsTest, AfterStopAResultIsStoredOnItsCallersThread) {
  EnrollEdge01();
  auto waiter = std::make_shared<ResultWaiter>();
  auto id = dispatcher_->Invoke({.node_id = "edge-01", .tool = "exec", .args_json = "{}"}, waiter);
  ASSERT_TRUE(id) << id.error().ToString();
  dispatcher_->OnResult("edge-02", *id, Exited(2));  // not the node it was sent to
  dispatcher_->StopQueues();
  EXPECT_EQ(waiter->result.wait_for(0s), std::future_status::timeout) << "edge-02's was refused";
  dispatcher_->OnResult("edge-01", *id, Exited(3));
  ASSERT_EQ(waiter->result.wait_for(0s), std::future_status::ready)
      << "stored and told before OnResult returned";
  EXPECT_EQ(waiter->result.get().result.exit_code, 3);
}

// What InvokeAsync's `done` was called with, and on which thread.
struct DoneRecorder {
  std::mutex mu;
  std::vector<Result<std::string>> results;
  std::vector<std::thread::id> threads;
  Dispatcher::InvokeDone Callback() {
    return [this](Result<std::string> id) {
      std::lock_guard lock(mu);
      results.push_back(std::move(id));
      threads.push_back(std::this_thread::get_id());
    };
  }
  size_t count() {
    std::lock_guard lock(mu);
    return results.size();
  }
};

class DispatcherInvokesTest : public EdgeFleetFixture {
 protected:
  // edge-01 enrolled, and a dispatcher over `slow_` (its first batch held) with `sent_` as the
  // node's stream.
  void StartHeld() {
    EnrollEdge01();
    slow_.emplace(*store_);
    d_.emplace(*slow_, *node_tokens_, clock_);
    d_->Attach("edge-01", sent_);
  }
  std::optional<SlowInsertsStore> slow_;
  std::optional<Dispatcher> d_;  // after slow_: it goes first
  std::shared_ptr<RecordingStream> sent_ = std::make_shared<RecordingStream>();
};

InvokeSpec Exec(std::string command_id = "") {
  return {.node_id = "edge-01", .tool = "exec", .args_json = "{}", .command_id = command_id};
}

TEST_F(DispatcherInvokesTest,
       InvokesArrivingWhileTheDiskIsBusyAreStoredTogetherThenAcceptedAndSent) {
  StartHeld();
  SlowInsertsStore& slow = *slow_;
  Dispatcher& d = *d_;
  RecordingStream* stream = sent_.get();
  constexpr int kCommands = 5;
  std::vector<std::shared_ptr<ResultWaiter>> waiters;
  waiters.reserve(kCommands);  // read while the other thread adds to it, should that hang
  std::vector<DoneRecorder> done(kCommands + 1);
  waiters.push_back(std::make_shared<ResultWaiter>());
  d.InvokeAsync(Exec(), waiters.back(), done[0].Callback());
  ASSERT_EQ(slow.entered.get_future().wait_for(30s), std::future_status::ready);
  // The disk is busy with the first command: the others are taken at once all the same (the
  // caller is a gRPC thread that must not wait for the disk; a wait here would hang the test,
  // so they are made on another thread).
  auto invoking = std::async(std::launch::async, [&] {
    for (int i = 1; i < kCommands; ++i) {
      waiters.push_back(std::make_shared<ResultWaiter>());
      d.InvokeAsync(Exec(), waiters.back(), done[i].Callback());
    }
    // A bad spec is refused on the caller's thread, before InvokeAsync returns.
    d.InvokeAsync({.node_id = "edge-01", .tool = "", .args_json = "{}"}, nullptr,
                  done[kCommands].Callback());
  });
  const bool returned = invoking.wait_for(30s) == std::future_status::ready;
  EXPECT_EQ(done[kCommands].count(), 1u) << "the refusal is immediate";
  for (int i = 0; i < kCommands; ++i)
    EXPECT_EQ(done[i].count(), 0u) << i << ": done before the command was stored";
  EXPECT_TRUE(waiters[0]->accepted().empty()) << "accepted before it was stored";
  slow.release.set_value();
  ASSERT_TRUE(returned) << "InvokeAsync waited for the disk";
  d.FlushInvokes();

  EXPECT_EQ(slow.batches(), (std::vector<size_t>{1, kCommands - 1}))
      << "the first alone, then everything that came meanwhile in one transaction";
  ASSERT_EQ(stream->sent.size(), size_t{kCommands});
  for (int i = 0; i < kCommands; ++i) {
    ASSERT_EQ(done[i].count(), 1u) << i;
    const Result<std::string>& id = done[i].results.front();
    ASSERT_TRUE(id) << i << ": " << id.error().ToString();
    EXPECT_NE(done[i].threads.front(), std::this_thread::get_id()) << "done on the invokes thread";
    EXPECT_EQ(waiters[i]->accepted(), std::vector<std::string>{*id});
    EXPECT_EQ(stream->sent[i].invoke_tool().command_id(), *id) << "sent in the order queued";
    auto stored = store_->GetCommand(*id);
    ASSERT_TRUE(stored && *stored) << i;
    EXPECT_EQ((*stored)->state, kCommandDispatched);
  }
  const Result<std::string>& refused = done[kCommands].results.front();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.error().message, "tool is required");
  // The observers hear of their results as the synchronous Invoke's do.
  d.OnResult("edge-01", *done[2].results.front(), Exited(2));
  d.FlushResults();
  ASSERT_EQ(waiters[2]->result.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(waiters[2]->result.get().result.exit_code, 2);
}

// A command the batch's transaction cannot take (here a command id that is already used)
// does not take the others down with it: the batch is stored command by command.
TEST_F(DispatcherInvokesTest, OneBadCommandInABatchOfInvokesRefusesNoOther) {
  StartHeld();
  SlowInsertsStore& slow = *slow_;
  Dispatcher& d = *d_;
  RecordingStream* stream = sent_.get();
  DoneRecorder first, dup1, other, dup2;
  d.InvokeAsync(Exec(), nullptr, first.Callback());
  ASSERT_EQ(slow.entered.get_future().wait_for(30s), std::future_status::ready);
  auto dup2_waiter = std::make_shared<ResultWaiter>();
  auto invoking = std::async(std::launch::async, [&] {
    d.InvokeAsync(Exec("cmd-dup"), nullptr, dup1.Callback());
    d.InvokeAsync(Exec(), nullptr, other.Callback());
    d.InvokeAsync(Exec("cmd-dup"), dup2_waiter, dup2.Callback());
  });
  ASSERT_EQ(invoking.wait_for(30s), std::future_status::ready);
  slow.release.set_value();
  d.FlushInvokes();

  EXPECT_EQ(slow.batches(), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(slow.alone(), 3) << "the failed batch, stored command by command";
  ASSERT_EQ(dup1.count(), 1u);
  ASSERT_TRUE(dup1.results.front()) << dup1.results.front().error().ToString();
  EXPECT_EQ(*dup1.results.front(), "cmd-dup");
  ASSERT_EQ(other.count(), 1u);
  EXPECT_TRUE(other.results.front()) << other.results.front().error().ToString();
  ASSERT_EQ(dup2.count(), 1u);
  ASSERT_FALSE(dup2.results.front());
  EXPECT_EQ(dup2.results.front().error().code, ErrorCode::kAlreadyExists)
      << dup2.results.front().error().ToString();
  EXPECT_TRUE(dup2_waiter->accepted().empty()) << "a refused command is never accepted";
  EXPECT_EQ(stream->sent.size(), 3u) << "the first, cmd-dup once, and the other";
  // The refused one's observer was unsubscribed: the result of the cmd-dup that ran is not
  // told to it.
  d.OnResult("edge-01", "cmd-dup", Exited(0));
  d.FlushResults();
  EXPECT_EQ(dup2_waiter->result.wait_for(0s), std::future_status::timeout);
}

// A store that throws (a bug, or bad_alloc) still leaves every caller with an answer: the
// admin Invoke stream would otherwise wait forever for a command that may never be sent.
TEST_F(DispatcherInvokesTest, EveryCallerHearsOnceEvenWhenStoringABatchThrows) {
  EnrollEdge01();
  struct ThrowingStore final : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    Status InsertCommands(const std::vector<CommandRecord>&) override {
      throw std::runtime_error("the store blew up");
    }
  } throwing(*store_);
  Dispatcher d(throwing, *node_tokens_, clock_);
  auto stream = std::make_shared<RecordingStream>();
  d.Attach("edge-01", stream);
  auto waiter = std::make_shared<ResultWaiter>();
  DoneRecorder done;
  d.InvokeAsync(Exec(), waiter, done.Callback());
  d.FlushInvokes();
  ASSERT_EQ(done.count(), 1u);
  ASSERT_FALSE(done.results.front());
  EXPECT_EQ(done.results.front().error().code, ErrorCode::kInternal);
  EXPECT_NE(done.results.front().error().message.find("the store blew up"), std::string::npos)
      << done.results.front().error().message;
  EXPECT_TRUE(waiter->accepted().empty());
  EXPECT_TRUE(stream->sent.empty());
  // The invokes thread survived it.
  DoneRecorder next;
  d.InvokeAsync(Exec(), nullptr, next.Callback());
  d.FlushInvokes();
  ASSERT_EQ(next.count(), 1u);
  ASSERT_FALSE(next.results.front());
  EXPECT_EQ(next.results.front().error().code, ErrorCode::kInternal);
}

// Controller stop: what InvokeAsync queued is stored and sent before StopQueues returns, and
// a command that comes later is handled on its caller's thread.
TEST_F(DispatcherInvokesTest, StopQueuesStoresTheQueuedInvokesAndLaterOnesRunOnTheCallersThread) {
  StartHeld();
  SlowInsertsStore& slow = *slow_;
  Dispatcher& d = *d_;
  RecordingStream* stream = sent_.get();
  DoneRecorder queued, later;
  d.InvokeAsync(Exec(), nullptr, queued.Callback());
  ASSERT_EQ(slow.entered.get_future().wait_for(30s), std::future_status::ready);
  auto stopping = std::async(std::launch::async, [&] { d.StopQueues(); });
  EXPECT_EQ(stopping.wait_for(100ms), std::future_status::timeout)
      << "StopQueues returned while a command was still being stored";
  slow.release.set_value();
  ASSERT_EQ(stopping.wait_for(30s), std::future_status::ready);
  ASSERT_EQ(queued.count(), 1u) << "stored and sent before StopQueues returned";
  EXPECT_TRUE(queued.results.front());
  d.InvokeAsync(Exec(), nullptr, later.Callback());
  ASSERT_EQ(later.count(), 1u) << "handled before InvokeAsync returned";
  EXPECT_TRUE(later.results.front()) << later.results.front().error().ToString();
  EXPECT_EQ(later.threads.front(), std::this_thread::get_id());
  EXPECT_EQ(stream->sent.size(), 2u);
}

}  // namespace
}  // namespace edge::controller
