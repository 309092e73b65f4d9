// The edge door against a FakeExecutor: what it asks of the executor and how it maps the
// answers, with no io_context, child process or executor state behind it.
#include "agent/edge/command_dispatcher.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "tests/support/fake_executor.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/edge/test_support.h"

namespace edge::agentedge {
namespace {

namespace pb = aegis::cluster::v1;
using edge::testing::FakeExecutor;

class RecordingHost final : public DispatcherHost {
 public:
  void SendProgress(const std::string& id, pb::Chunk chunk, std::function<void()> ack) override {
    {
      std::lock_guard lock(mu_);
      progress.emplace_back(id, chunk.stdout());
    }
    ack();
  }
  void SendResult(const std::string& id, const pb::EdgeResult& result) override {
    std::lock_guard lock(mu_);
    results.emplace_back(id, result);
  }
  void ConfigApplied(const config::AgentConfig&, bool) override {}
  void DrainRequested() override {
    std::lock_guard lock(mu_);
    ++drains;
  }
  void ShutdownFinished() override {
    std::lock_guard lock(mu_);
    ++shutdowns;
  }

  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> progress;
  std::vector<std::pair<std::string, pb::EdgeResult>> results;
  int drains = 0;
  int shutdowns = 0;
};

class CommandDispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto outbox = OutboxStore::Open(dir_.path(), clock_);
    ASSERT_TRUE(outbox) << outbox.error().ToString();
    outbox_ = std::move(*outbox);
    config_.edge.max_concurrent_commands = 7;
    dispatcher_ = CommandDispatcher::Create(
        executor_, *outbox_, config_, [](const config::AgentConfig&) { return OkStatus(); },
        clock_);
    dispatcher_->SetTenant("tenant-a");
    dispatcher_->Attach(&host_);
  }
  void TearDown() override { dispatcher_->Detach(); }

  edge::testing::TempDir dir_{"dispatcher"};
  ManualClock clock_;
  FakeExecutor executor_;
  std::unique_ptr<OutboxStore> outbox_;
  config::AgentConfig config_;
  std::shared_ptr<CommandDispatcher> dispatcher_;
  RecordingHost host_;
};

TEST_F(CommandDispatcherTest, AnInvokeToolBecomesOneExecutorRequestWithTheDoorsLimits) {
  pb::EdgeCommand cmd = testing::Invoke("c-1", "exec", {{"command", "echo hi"}});
  cmd.mutable_invoke_tool()->mutable_deadline()->set_seconds(9);
  ASSERT_TRUE(dispatcher_->Handle(cmd));
  const auto requests = executor_.requests();
  ASSERT_EQ(requests.size(), 1u);
  const sandbox::InvokeRequest& r = requests[0];
  EXPECT_EQ(r.command_id, "c-1");
  EXPECT_EQ(r.tool, "exec");
  EXPECT_EQ(r.args, (nlohmann::json{{"command", "echo hi"}}));
  ASSERT_TRUE(r.timeout.has_value());
  EXPECT_EQ(r.timeout->count(), 9000);
  ASSERT_TRUE(r.door_limit.has_value());
  EXPECT_EQ(r.door_limit->door, "edge");
  EXPECT_EQ(r.door_limit->key, "edge.max_concurrent_commands");
  EXPECT_EQ(r.door_limit->max_concurrent, 7u);
  EXPECT_EQ(r.max_result_bytes, config_.edge.max_message_bytes - kResultEnvelopeReserve);
  EXPECT_EQ(dispatcher_->stats().running, 1u);

  // Output is progress; the end is one result, stored in the outbox before it is sent.
  bool acked = false;
  ASSERT_TRUE(
      executor_.Chunk("c-1", {sandbox::OutputStream::kStdout, "hi\n"}, [&] { acked = true; }));
  EXPECT_TRUE(acked);
  sandbox::InvokeResult done;
  done.payload = {{"exit_code", 0}, {"stdout", "hi\n"}, {"stderr", ""}};
  ASSERT_TRUE(executor_.Finish("c-1", done));
  ASSERT_EQ(host_.progress.size(), 1u);
  EXPECT_EQ(host_.progress[0].second, "hi\n");
  ASSERT_EQ(host_.results.size(), 1u);
  EXPECT_EQ(host_.results[0].first, "c-1");
  EXPECT_TRUE(host_.results[0].second.has_ok());
  EXPECT_EQ(testing::PayloadJson(host_.results[0].second)["stdout"], "hi\n");
  auto unsent = outbox_->All();
  ASSERT_TRUE(unsent);
  EXPECT_EQ(unsent->size(), 1u);
}

TEST_F(CommandDispatcherTest, ADuplicateOfARunningCommandIsNotSentToTheExecutorAgain) {
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-2", "sleep 5")));
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-2", "sleep 5")));
  EXPECT_EQ(executor_.requests().size(), 1u);
  EXPECT_TRUE(host_.results.empty());
}

TEST_F(CommandDispatcherTest, TheExecutorsRefusalIsTheAnswerWithItsCode) {
  executor_.RefuseNext(Error{ErrorCode::kResourceExhausted,
                             "edge.max_concurrent_commands 7 commands already running"});
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-3", "true")));
  ASSERT_EQ(host_.results.size(), 1u);
  const pb::EdgeResult& r = host_.results[0].second;
  ASSERT_TRUE(r.has_err());
  EXPECT_EQ(r.err().code(), "RESOURCE_EXHAUSTED");
  EXPECT_NE(r.err().message().find("edge.max_concurrent_commands 7"), std::string::npos);
}

// Issue 15 #1: no exception leaves the gRPC read callback. One thrown inside the executor
// answers its command INTERNAL (through the outbox, like any result) and the door keeps
// taking commands: the node neither dies nor goes deaf.
TEST_F(CommandDispatcherTest, AnExceptionInsideTheExecutorAnswersTheCommandAndTheDoorGoesOn) {
  executor_.ThrowOnNextInvoke("boom \xff");
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-5", "true")));
  ASSERT_EQ(host_.results.size(), 1u);
  EXPECT_EQ(host_.results[0].first, "c-5");
  const pb::EdgeResult& r = host_.results[0].second;
  ASSERT_TRUE(r.has_err());
  EXPECT_EQ(r.err().code(), "INTERNAL");
  EXPECT_EQ(r.err().message(), "the agent failed while handling the command: boom \xef\xbf\xbd");
  auto stored = outbox_->Get("c-5");
  ASSERT_TRUE(stored && *stored) << "the answer is in the outbox";
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-6", "true")));
  ASSERT_EQ(executor_.requests().size(), 1u);
  EXPECT_EQ(executor_.requests()[0].command_id, "c-6");
  ASSERT_TRUE(executor_.Finish("c-6", sandbox::InvokeResult{}));
  ASSERT_EQ(host_.results.size(), 2u);
  EXPECT_EQ(host_.results[1].first, "c-6");
}

TEST_F(CommandDispatcherTest, ARequestTheDoorCannotMapNeverReachesTheExecutor) {
  pb::EdgeCommand cmd = testing::Exec("c-4", "true");
  cmd.mutable_invoke_tool()->mutable_seal_envelope()->set_tenant_id("tenant-b");
  ASSERT_TRUE(dispatcher_->Handle(cmd));
  EXPECT_TRUE(executor_.requests().empty());
  ASSERT_EQ(host_.results.size(), 1u);
  EXPECT_EQ(host_.results[0].second.err().code(), "PERMISSION_DENIED");
}

TEST_F(CommandDispatcherTest, CancelDrainAndShutdownAreTheExecutors) {
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-5", "sleep 5")));
  pb::EdgeCommand cancel;
  cancel.mutable_cancel()->set_command_id("c-5");
  cancel.mutable_cancel()->set_reason("operator said so");
  ASSERT_TRUE(dispatcher_->Handle(cancel));
  ASSERT_EQ(executor_.cancels().size(), 1u);
  EXPECT_EQ(executor_.cancels()[0],
            std::make_pair(std::string("c-5"), std::string("operator said so")));

  pb::EdgeCommand drain;
  drain.mutable_drain();
  ASSERT_TRUE(dispatcher_->Handle(drain));
  EXPECT_TRUE(executor_.draining());
  EXPECT_TRUE(dispatcher_->draining());
  EXPECT_EQ(host_.drains, 1);

  // Drained: the executor refuses the next command, and that refusal is the answer.
  ASSERT_TRUE(dispatcher_->Handle(testing::Exec("c-6", "true")));
  ASSERT_EQ(host_.results.size(), 1u);
  EXPECT_EQ(host_.results[0].second.err().code(), "DRAINING");

  pb::EdgeCommand shutdown;
  shutdown.mutable_shutdown();
  ASSERT_TRUE(dispatcher_->Handle(shutdown));
  EXPECT_EQ(executor_.pending(), 0u);
  EXPECT_EQ(host_.shutdowns, 1);
  ASSERT_EQ(host_.results.size(), 2u);
  EXPECT_EQ(host_.results[1].first, "c-5");
  ASSERT_TRUE(host_.results[1].second.has_cancelled());
  EXPECT_EQ(host_.results[1].second.cancelled().reason(), "agent shutdown");
}

// Issue 16 (review of the group commit): what the previous agent process left unfinished is
// put in the outbox, and only then confirmed to the executor, which then drops its journal
// row; a result the outbox could not keep is not confirmed, so the next start delivers it.
TEST_F(CommandDispatcherTest, AnInterruptedResultIsConfirmedOnlyOnceTheOutboxHasIt) {
  FakeExecutor executor;
  sandbox::InvokeResult died;
  died.command_id = "c-died";
  died.outcome = sandbox::Outcome::kError;
  died.error = {ErrorCode::kAgentRestarted, "command c-died was running when the agent stopped"};
  executor.AddInterrupted("edge", died);
  sandbox::InvokeResult unkept = died;
  unkept.command_id = "";  // the outbox refuses it (INVALID_ARGUMENT: no command_id)
  executor.AddInterrupted("edge", unkept);
  sandbox::InvokeResult other = died;
  other.command_id = "c-worker";
  executor.AddInterrupted("worker", other);

  auto d = CommandDispatcher::Create(
      executor, *outbox_, config_, [](const config::AgentConfig&) { return OkStatus(); }, clock_);
  auto stored = outbox_->Get("c-died");
  ASSERT_TRUE(stored && stored->has_value()) << "in the outbox before it is confirmed";
  EXPECT_EQ((*stored)->err().code(), "AGENT_RESTARTED");
  EXPECT_EQ(executor.confirmed(), (std::vector<std::string>{"c-died"}))
      << "not the one the outbox refused, nor another door's";
}

}  // namespace
}  // namespace edge::agentedge
