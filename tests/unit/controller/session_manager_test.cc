// SessionManager (wire.md §5.5) over the real store, EdgeFleet and Dispatcher, with a
// recording stream in place of the node and a ManualClock: a node the node list shows offline
// (a stale heartbeat) is refused as offline; sessions pin the limits they were created with;
// a session ended while its node is offline has its session.start cancelled when the node
// next says Hello.
#include "controller/session_manager.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "common/timer_queue.h"
#include "tests/unit/controller/edge_fleet_fixture.h"

namespace edge::controller {
namespace {

using namespace std::chrono_literals;

class SessionManagerTest : public EdgeFleetFixture {
 protected:
  void SetUp() override {
    EdgeFleetFixture::SetUp();
    timers_ = std::make_unique<TimerQueue>(clock_);
    sessions_ =
        std::make_unique<SessionManager>(*store_, *fleet_, clock_, *timers_, SessionSettings{});
    sessions_->Start(*dispatcher_);
    fleet_->SetLimitsListener(
        [this](const std::string& node, int64_t v) { sessions_->OnLimitsChanged(node, v); });
  }
  void TearDown() override {
    sessions_->Stop();
    timers_->Stop();
  }
  void EnrollChatNode() { EnrollEdge01({"exec", "chat"}, {{"agent.interactive_tools", "chat"}}); }
  static TenantTokenClaims Alice() { return {.subject = "alice", .tenant_id = "t1"}; }

  using Outcome = std::shared_ptr<std::optional<Result<SessionManager::Created>>>;
  // Create's outcome, filled when `done` is called (a refusal at once; a start later).
  Outcome Create() {
    auto got = std::make_shared<std::optional<Result<SessionManager::Created>>>();
    sessions_->Create(Alice(), "edge-01", "chat", "",
                      [got](Result<SessionManager::Created> r) { *got = std::move(r); });
    return got;
  }
  // Creates a session and returns its id and the command id of its session.start.
  std::pair<std::string, std::string> Started() {
    const size_t before = stream_->sent.size();
    Create();
    EXPECT_EQ(stream_->sent.size(), before + 1) << "session.start was sent";
    if (stream_->sent.size() != before + 1) return {};
    const auto& start = stream_->sent.back().invoke_tool();
    EXPECT_EQ(start.tool_name(), "session.start");
    std::string sid = start.args().fields().at("session_id").string_value();
    return {sid, start.command_id()};
  }

  std::unique_ptr<TimerQueue> timers_;
  std::unique_ptr<SessionManager> sessions_;
};

TEST_F(SessionManagerTest, ANodeWithAStaleHeartbeatIsRefusedAsOffline) {
  EnrollChatNode();
  clock_.Advance(91s);  // past cluster.stale_threshold_secs (90 s), the stream still attached
  auto refused = Create();
  ASSERT_TRUE(refused->has_value()) << "refused at once";
  ASSERT_FALSE(**refused);
  EXPECT_EQ((**refused).error().code, ErrorCode::kUnavailable);
  EXPECT_NE((**refused).error().message.find("is offline (its last heartbeat is older than 90 s)"),
            std::string::npos)
      << (**refused).error().message;
  EXPECT_TRUE(stream_->sent.empty()) << "nothing reached the node";

  ASSERT_TRUE(store_->RecordHeartbeat("edge-01", ToEpochMillis(clock_.Now())));
  auto [sid, cmd] = Started();
  EXPECT_EQ(sid.size(), 36u);
}

TEST_F(SessionManagerTest, SessionsKeepTheLimitsTheyWereCreatedWith) {
  EnrollChatNode();
  auto [first, first_cmd] = Started();
  ASSERT_FALSE(first.empty());
  auto pushed = fleet_->PushConfig("edge-01", "edge_api: {limits: {reattach_window: 60}}", "");
  ASSERT_TRUE(pushed) << pushed.error().ToString();
  auto [second, second_cmd] = Started();
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(sessions_->SessionLimits(first)->reattach_window, 300);
  EXPECT_EQ(sessions_->SessionLimits(second)->reattach_window, 60);
  EXPECT_EQ(sessions_->Get(Alice(), first)->limits_version, 0);
  EXPECT_EQ(sessions_->Get(Alice(), second)->limits_version, 1);
  EXPECT_EQ(sessions_->SessionLimits("no-such").error().code, ErrorCode::kNotFound);
}

TEST_F(SessionManagerTest, ASessionEndedWhileItsNodeIsOfflineIsCancelledWhenTheNodeReturns) {
  EnrollChatNode();
  auto [sid, start_cmd] = Started();
  ASSERT_FALSE(sid.empty());
  dispatcher_->Detach("edge-01", stream_.get());
  ASSERT_TRUE(sessions_->End(Alice(), sid));
  EXPECT_EQ(sessions_->Get(Alice(), sid)->status, kSessionTerminated);

  // The node comes back and says Hello: the cancel it could not be sent goes now, once
  // (after the dispatcher's resend of the session.start it has no result for).
  auto back = std::make_shared<RecordingStream>();
  dispatcher_->Attach("edge-01", back);
  sessions_->OnCapabilitiesReported("edge-01");
  auto cancels = [&] {
    std::vector<std::string> ids;
    for (const auto& c : back->sent)
      if (c.has_cancel()) ids.push_back(c.cancel().command_id());
    return ids;
  };
  EXPECT_EQ(cancels(), std::vector<std::string>{start_cmd});
  ASSERT_FALSE(back->sent.empty());
  EXPECT_TRUE(back->sent.back().has_cancel()) << "the cancel follows any resend";
  sessions_->OnCapabilitiesReported("edge-01");
  EXPECT_EQ(cancels().size(), 1u) << "not again at the next report";
}

}  // namespace
}  // namespace edge::controller
