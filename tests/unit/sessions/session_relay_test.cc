// The session relay's rules (wire.md §5.3): one numbered stream for every socket, replay with
// last_seq, de-duplication, echo, rate limit, the security filter and both overflow policies.
// Time is a ManualClock; sockets are fakes whose transport backlog the test sets.
#include "controller/sessions/session_relay.h"

#include <gtest/gtest.h>

#include <numeric>

#include <nlohmann/json.hpp>

#include "tests/support/manual_clock.h"

namespace edge::controller {
namespace {

using nlohmann::json;

constexpr const char* kSession = "5b0c8f0e-1d2a-4c3b-9e4f-0a1b2c3d4e5f";

class FakeSocket : public RelaySocket {
 public:
  void Send(std::string frame) override {
    sent.push_back(json::parse(frame));
    pending += frame.size() * stalled;
  }
  size_t pending_bytes() const override { return pending; }
  void Close(uint16_t code, std::string reason) override {
    closed_code = code;
    closed_reason = std::move(reason);
  }
  // Frames of the numbered stream: their seqs.
  std::vector<uint64_t> Seqs() const {
    std::vector<uint64_t> out;
    for (const auto& f : sent)
      if (f.contains("seq")) out.push_back(f["seq"].get<uint64_t>());
    return out;
  }
  std::vector<json> Errors(const std::string& code) const {
    std::vector<json> out;
    for (const auto& f : sent)
      if (f["type"] == "session.error" && f["payload"]["code"] == code) out.push_back(f);
    return out;
  }

  std::vector<json> sent;
  size_t pending = 0;
  int stalled = 0;  // 1 = everything sent stays pending (a reader that stopped reading)
  int closed_code = 0;
  std::string closed_reason;
};

std::string Control(const std::string& msg_id, const std::string& type = "control.prompt.request",
                    const std::string& payload = R"({"text":"hello"})") {
  return R"({"v":"rawp-dps-1.0","type":")" + type + R"(","message_id":")" + msg_id +
         R"(","timestamp":"2026-11-25T01:02:03Z","session_id":")" + kSession + R"(","payload":)" +
         payload + "}";
}

std::string Id(int n) {
  char buf[37];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012d", n);
  return buf;
}

OutFrame Output(const std::string& data) {
  OutFrame f;
  f.type = "agent.output";
  f.session_id = kSession;
  f.payload = {{"stream", "stdout"}, {"data", data}};
  return f;
}

OutFrame Message(const std::string& text) {
  OutFrame f;
  f.type = "agent.message";
  f.session_id = kSession;
  f.payload = {{"text", text}};
  return f;
}

RelaySettings Settings() {
  RelaySettings s;
  s.pinned_tools = {"file.read", "search", "exec"};
  s.denied_tools = {"exec", "file.write", "file.delete"};
  return s;
}

TEST(SessionRelayTest, EverySocketSeesTheSameNumberedStream) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());
  auto a = std::make_shared<FakeSocket>(), b = std::make_shared<FakeSocket>();
  relay.Attach(a, std::nullopt);
  relay.Attach(b, std::nullopt);
  EXPECT_EQ(relay.Publish(Output("one")), 1u);
  EXPECT_EQ(relay.Publish(Message("two")), 2u);
  EXPECT_EQ(a->Seqs(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(b->Seqs(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(a->sent[1], b->sent[1]);  // byte-identical frames, one message_id
  EXPECT_EQ(a->sent[0]["session_id"], kSession);
  EXPECT_EQ(relay.last_seq(), 2u);
}

TEST(SessionRelayTest, ALateJoinerGetsTheBufferAndAReconnectOnlyWhatItMissed) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());
  for (int i = 0; i < 5; ++i)
    relay.Publish(Output("line " + std::to_string(i)));
  auto late = std::make_shared<FakeSocket>();
  relay.Attach(late, std::nullopt);
  EXPECT_EQ(late->Seqs(), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  auto back = std::make_shared<FakeSocket>();
  relay.Attach(back, 3);
  EXPECT_EQ(back->Seqs(), (std::vector<uint64_t>{4, 5}));
  EXPECT_TRUE(back->Errors("REPLAY_GAP").empty());
  auto current = std::make_shared<FakeSocket>();
  relay.Attach(current, 5);
  EXPECT_TRUE(current->sent.empty());
  auto ahead = std::make_shared<FakeSocket>();
  relay.Attach(ahead, 9);
  ASSERT_EQ(ahead->Errors("INVALID_ARGUMENT").size(), 1u);
  EXPECT_FALSE(ahead->sent[0].contains("seq"));
}

TEST(SessionRelayTest, FramesGoneFromTheBufferAreReportedAsAGap) {
  ManualClock clock;
  auto s = Settings();
  s.max_buffer_size = 1500;  // a few frames of ~250 bytes
  SessionRelay relay(kSession, clock, s);
  for (int i = 0; i < 20; ++i)
    relay.Publish(Output("line " + std::to_string(i)));
  auto back = std::make_shared<FakeSocket>();
  relay.Attach(back, 2);
  auto gap = back->Errors("REPLAY_GAP");
  ASSERT_EQ(gap.size(), 1u);
  EXPECT_EQ(gap[0]["payload"]["requested_from"], 3);
  const uint64_t available = gap[0]["payload"]["available_from"];
  EXPECT_GT(available, 3u);
  auto seqs = back->Seqs();
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(seqs.front(), available);
  EXPECT_EQ(seqs.back(), 20u);
  EXPECT_EQ(back->sent[0]["type"], "session.error");  // the gap is said first
}

TEST(SessionRelayTest, AControlFrameIsActedOnOnceAndEchoedToEverySocket) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());
  auto phone = std::make_shared<FakeSocket>(), laptop = std::make_shared<FakeSocket>();
  auto p = relay.Attach(phone, std::nullopt);
  auto l = relay.Attach(laptop, std::nullopt);
  auto first = relay.OnText(p, Control(Id(1)));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->payload["text"], "hello");
  // The same frame from the other device (and again from the first) is not acted on again.
  EXPECT_FALSE(relay.OnText(l, Control(Id(1))).has_value());
  EXPECT_FALSE(relay.OnText(p, Control(Id(1))).has_value());
  // Upper case is the same id.
  std::string upper = Id(1);
  for (auto& ch : upper)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_FALSE(relay.OnText(l, Control(upper)).has_value());
  ASSERT_EQ(phone->sent.size(), 1u);
  ASSERT_EQ(laptop->sent.size(), 1u);
  EXPECT_EQ(laptop->sent[0]["type"], "control.prompt.request");
  EXPECT_EQ(laptop->sent[0]["message_id"], Id(1));
  EXPECT_EQ(laptop->sent[0]["seq"], 1);
  EXPECT_EQ(phone->sent[0], laptop->sent[0]);
  // The echo is in the replay buffer: a third device mirrors the prompt.
  auto tablet = std::make_shared<FakeSocket>();
  relay.Attach(tablet, std::nullopt);
  ASSERT_EQ(tablet->sent.size(), 1u);
  EXPECT_EQ(tablet->sent[0]["payload"]["text"], "hello");
}

TEST(SessionRelayTest, TheDeduplicationWindowIsBounded) {
  ManualClock clock;
  auto s = Settings();
  s.dedup_capacity = 2;
  s.rate_limit = 100;
  SessionRelay relay(kSession, clock, s);
  auto a = relay.Attach(std::make_shared<FakeSocket>(), std::nullopt);
  EXPECT_TRUE(relay.OnText(a, Control(Id(1))));
  EXPECT_TRUE(relay.OnText(a, Control(Id(2))));
  EXPECT_TRUE(relay.OnText(a, Control(Id(3))));
  EXPECT_FALSE(relay.OnText(a, Control(Id(3))));
  EXPECT_TRUE(relay.OnText(a, Control(Id(1))));  // forgotten: outside the last two
}

TEST(SessionRelayTest, FramesBeyondTheRateLimitAreRefusedUntilASecondHasPassed) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());  // 20 per second
  auto sock = std::make_shared<FakeSocket>();
  auto a = relay.Attach(sock, std::nullopt);
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(relay.OnText(a, Control(Id(i)))) << i;
  EXPECT_FALSE(relay.OnText(a, Control(Id(20))));
  ASSERT_EQ(sock->Errors("RATE_LIMITED").size(), 1u);
  EXPECT_FALSE(sock->Errors("RATE_LIMITED")[0].contains("seq"));
  clock.Advance(std::chrono::milliseconds(999));
  EXPECT_FALSE(relay.OnText(a, Control(Id(21))));
  clock.Advance(std::chrono::milliseconds(1));
  // The refused id was not remembered: it may be sent again.
  EXPECT_TRUE(relay.OnText(a, Control(Id(20))));
}

TEST(SessionRelayTest, AForbiddenToolNeverPassesAndOnlyItsSenderIsTold) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());
  auto sender = std::make_shared<FakeSocket>(), other = std::make_shared<FakeSocket>();
  auto s = relay.Attach(sender, std::nullopt);
  relay.Attach(other, std::nullopt);
  // Denied although pinned; and not pinned at all.
  EXPECT_FALSE(relay.OnText(
      s, Control(Id(1), "control.prompt.request", R"({"text":"x","tools":["search","exec"]})")));
  EXPECT_FALSE(relay.OnText(
      s, Control(Id(2), "control.prompt.request", R"({"text":"x","tools":["shell"]})")));
  auto denied = sender->Errors("PERMISSION_DENIED");
  ASSERT_EQ(denied.size(), 2u);
  EXPECT_EQ(denied[0]["payload"]["ref_message_id"], Id(1));
  EXPECT_NE(denied[0]["payload"]["message"].get<std::string>().find("\"exec\" is denied"),
            std::string::npos);
  EXPECT_NE(denied[1]["payload"]["message"].get<std::string>().find("\"shell\" is not among"),
            std::string::npos);
  EXPECT_TRUE(other->sent.empty());
  EXPECT_EQ(relay.last_seq(), 0u);
  EXPECT_TRUE(relay.OnText(
      s, Control(Id(3), "control.prompt.request", R"({"text":"x","tools":["search"]})")));
}

TEST(SessionRelayTest, ABadFrameIsAnsweredToItsSenderAndTheSocketStaysOpen) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());
  auto sock = std::make_shared<FakeSocket>();
  auto a = relay.Attach(sock, std::nullopt);
  EXPECT_FALSE(relay.OnText(a, "{\"v\":1}"));
  auto bad = sock->Errors("INVALID_ARGUMENT");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0]["payload"]["message"].get<std::string>().find("v must be a string"),
            std::string::npos);
  EXPECT_EQ(sock->closed_code, 0);
  EXPECT_TRUE(relay.OnText(a, Control(Id(1))));
  EXPECT_FALSE(relay.OnText(99, Control(Id(2))));  // a socket that is not attached
}

TEST(SessionRelayTest, DropOldestDropsOutputFirstAndSaysSoOnceTheReaderCatchesUp) {
  ManualClock clock;
  auto s = Settings();
  s.max_buffer_size = 2000;
  s.socket_high_water = 1;  // one frame in the transport at a time
  SessionRelay relay(kSession, clock, s);
  auto slow = std::make_shared<FakeSocket>(), fast = std::make_shared<FakeSocket>();
  slow->stalled = 1;
  auto slow_id = relay.Attach(slow, std::nullopt);
  relay.Attach(fast, std::nullopt);
  relay.Publish(Output("first"));     // seq 1: handed to the stalled transport
  relay.Publish(Message("keep me"));  // seq 2: queued
  for (int i = 0; i < 30; ++i)
    relay.Publish(Output("line " + std::to_string(i)));
  // The fast reader got everything; the slow one is not closed.
  EXPECT_EQ(fast->Seqs().size(), 32u);
  EXPECT_EQ(slow->closed_code, 0);
  EXPECT_EQ(slow->sent.size(), 1u);
  // The reader catches up.
  slow->stalled = 0;
  slow->pending = 0;
  relay.OnWritable(slow_id);
  ASSERT_GE(slow->sent.size(), 3u);
  EXPECT_EQ(slow->sent[1]["payload"]["code"], "FRAMES_DROPPED");
  EXPECT_FALSE(slow->sent[1].contains("seq"));
  const uint64_t dropped = slow->sent[1]["payload"]["dropped"];
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(slow->sent[1]["payload"]["first_seq"], 3);  // agent.output went first
  auto seqs = slow->Seqs();
  EXPECT_EQ(seqs[1], 2u);  // the agent.message was kept
  EXPECT_EQ(seqs.back(), 32u);
  EXPECT_EQ(seqs.size() + dropped, 32u);
  EXPECT_EQ(slow->Errors("FRAMES_DROPPED").size(), 1u);  // said once
}

TEST(SessionRelayTest, DisconnectClosesASlowSocketWith1013AndItRecoversWithLastSeq) {
  ManualClock clock;
  auto s = Settings();
  s.max_buffer_size = 2000;
  s.socket_high_water = 1;
  s.policy = OverflowPolicy::kDisconnect;
  SessionRelay relay(kSession, clock, s);
  auto slow = std::make_shared<FakeSocket>(), fast = std::make_shared<FakeSocket>();
  slow->stalled = 1;
  relay.Attach(slow, std::nullopt);
  relay.Attach(fast, std::nullopt);
  int published = 0;
  while (slow->closed_code == 0 && published < 100)
    relay.Publish(Output("line " + std::to_string(published++)));
  EXPECT_EQ(slow->closed_code, 1013);
  EXPECT_LT(published, 10);
  EXPECT_NE(slow->closed_reason.find("last_seq"), std::string::npos);
  EXPECT_EQ(relay.sockets(), 1u);
  EXPECT_EQ(fast->Seqs().size(), static_cast<size_t>(published));
  // It reconnects with the last seq it received: nothing is missing.
  const uint64_t seen = slow->Seqs().back();
  auto again = std::make_shared<FakeSocket>();
  relay.Attach(again, seen);
  EXPECT_TRUE(again->Errors("REPLAY_GAP").empty());
  relay.Publish(Output("after"));
  auto seqs = again->Seqs();
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(seqs.front(), seen + 1);
  EXPECT_EQ(seqs.back(), static_cast<uint64_t>(published) + 1);
  EXPECT_EQ(seqs.size(), published + 1 - seen);
}

// The reconnect after a 1013 through a real transport (its backlog grows until the peer
// reads): the replay of a whole buffer — more than a socket's queue holds — is read from the
// buffer as the socket drains, so it is not closed again; frames published meanwhile follow
// in order.
TEST(SessionRelayTest, AReplayLargerThanTheQueueIsServedFromTheBufferAsTheSocketReads) {
  ManualClock clock;
  auto s = Settings();
  s.max_buffer_size = 4000;  // each socket's queue: 2000 bytes, ~8 frames
  s.socket_high_water = 600;
  s.policy = OverflowPolicy::kDisconnect;
  SessionRelay relay(kSession, clock, s);
  for (int i = 0; i < 15; ++i)
    relay.Publish(Output("line " + std::to_string(i)));  // ~3700 bytes: all still buffered
  auto back = std::make_shared<FakeSocket>();
  back->stalled = 1;
  const uint64_t id = relay.Attach(back, 0);
  EXPECT_EQ(back->closed_code, 0) << back->closed_reason;
  EXPECT_LT(back->sent.size(), 15u) << "handed over only up to the transport's high water";
  relay.Publish(Output("live 1"));  // joins the buffer; the cursor will reach it
  for (int round = 0; round < 40 && back->Seqs().size() < 16; ++round) {
    back->pending = 0;  // the peer read what the transport held
    relay.OnWritable(id);
  }
  EXPECT_EQ(back->closed_code, 0) << back->closed_reason;
  EXPECT_TRUE(back->Errors("REPLAY_GAP").empty());
  std::vector<uint64_t> want(16);
  for (uint64_t i = 0; i < 16; ++i)
    want[i] = i + 1;
  EXPECT_EQ(back->Seqs(), want) << "every frame once, in order";
  // Caught up: the next frame goes through the socket's queue as for any live socket.
  back->pending = 0;
  relay.Publish(Output("live 2"));
  EXPECT_EQ(back->Seqs().back(), 17u);
}

// A replaying socket that does not read while the session runs on falls behind once the
// buffer drops a frame it has not reached: disconnect → 1013; drop_oldest → FRAMES_DROPPED
// and the cursor moves on.
TEST(SessionRelayTest, AReplayingSocketThatFallsBehindTheBufferIsHandledByThePolicy) {
  for (auto policy : {OverflowPolicy::kDisconnect, OverflowPolicy::kDropOldest}) {
    ManualClock clock;
    auto s = Settings();
    s.max_buffer_size = 2000;
    s.socket_high_water = 300;
    s.policy = policy;
    SessionRelay relay(kSession, clock, s);
    for (int i = 0; i < 6; ++i)
      relay.Publish(Output("line " + std::to_string(i)));
    auto back = std::make_shared<FakeSocket>();
    back->stalled = 1;
    const uint64_t id = relay.Attach(back, 0);
    for (int i = 0; i < 20; ++i)
      relay.Publish(Output("more " + std::to_string(i)));
    if (policy == OverflowPolicy::kDisconnect) {
      EXPECT_EQ(back->closed_code, 1013);
      EXPECT_NE(back->closed_reason.find("replay buffer dropped frame"), std::string::npos)
          << back->closed_reason;
      EXPECT_EQ(relay.sockets(), 0u);
      continue;
    }
    EXPECT_EQ(back->closed_code, 0);
    for (int round = 0; round < 40 && (back->Seqs().empty() || back->Seqs().back() < 26); ++round) {
      back->pending = 0;
      relay.OnWritable(id);
    }
    auto dropped = back->Errors("FRAMES_DROPPED");
    ASSERT_EQ(dropped.size(), 1u);
    const uint64_t n = dropped[0]["payload"]["dropped"];
    auto seqs = back->Seqs();
    ASSERT_FALSE(seqs.empty());
    EXPECT_EQ(seqs.back(), 26u);
    EXPECT_EQ(seqs.size() + n, 26u) << "every frame was either sent or counted as dropped";
    EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  }
}

TEST(SessionRelayTest, CloseAllAndDetachForgetTheSockets) {
  ManualClock clock;
  SessionRelay relay(kSession, clock, Settings());
  auto a = std::make_shared<FakeSocket>(), b = std::make_shared<FakeSocket>();
  auto ida = relay.Attach(a, std::nullopt);
  relay.Attach(b, std::nullopt);
  EXPECT_EQ(relay.Detach(ida), 1u);
  relay.Publish(Output("x"));
  EXPECT_TRUE(a->sent.empty());
  relay.CloseAll(1000, "session ended");
  EXPECT_EQ(b->closed_code, 1000);
  EXPECT_EQ(relay.sockets(), 0u);
}

TEST(SessionRelayTest, AtTheEndAReaderThatWasBehindGetsEverythingBeforeTheClose) {
  ManualClock clock;
  auto s = Settings();
  s.socket_high_water = 1;  // one frame in the transport at a time
  SessionRelay relay(kSession, clock, s);
  auto behind = std::make_shared<FakeSocket>();
  behind->stalled = 1;
  relay.Attach(behind, std::nullopt);
  for (int i = 0; i < 30; ++i)
    relay.Publish(Output("line " + std::to_string(i)));
  // A late joiner mirroring the session: its replay is read from the buffer as it reads.
  auto mirror = std::make_shared<FakeSocket>();
  mirror->stalled = 1;
  relay.Attach(mirror, std::nullopt);
  OutFrame ended;
  ended.type = "session.ended";
  ended.session_id = kSession;
  ended.payload = {{"exit_code", 0}, {"outcome", "ok"}, {"message", ""}};
  relay.Publish(ended);
  ASSERT_EQ(behind->sent.size(), 1u);  // the transport took one frame and stalled
  ASSERT_EQ(mirror->sent.size(), 1u);
  relay.CloseAll(kCloseNormal, "session ended", /*flush_first=*/true);
  std::vector<uint64_t> all(31);
  std::iota(all.begin(), all.end(), 1);
  for (const auto& sock : {behind, mirror}) {
    EXPECT_EQ(sock->Seqs(), all);
    EXPECT_EQ(sock->sent.back()["type"], "session.ended");
    EXPECT_EQ(sock->closed_code, kCloseNormal);
  }
  EXPECT_EQ(relay.sockets(), 0u);
}

TEST(SessionRelayTest, RefusedFramesFromASocketThatDoesNotReadFillOnlyItsBoundedQueue) {
  ManualClock clock;
  auto s = Settings();
  s.max_buffer_size = 20000;  // each socket's queue: 10 000 bytes
  s.socket_high_water = 1;
  SessionRelay relay(kSession, clock, s);
  auto flooder = std::make_shared<FakeSocket>();
  flooder->stalled = 1;
  flooder->pending = 1;  // its transport is full: nothing more is handed over
  auto id = relay.Attach(flooder, std::nullopt);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_FALSE(relay.OnText(id, "x"));  // each refused: INVALID_ARGUMENT or RATE_LIMITED
  }
  flooder->stalled = 0;
  flooder->pending = 0;
  relay.OnWritable(id);
  // What was kept fits the socket's queue (each answer is about 250 bytes), and the socket is
  // told how many answers it missed.
  EXPECT_LT(flooder->sent.size(), 60u);
  ASSERT_FALSE(flooder->Errors("FRAMES_DROPPED").empty());
  EXPECT_GT(flooder->Errors("FRAMES_DROPPED")[0]["payload"]["dropped"].get<uint64_t>(), 9900u);
  EXPECT_EQ(flooder->closed_code, 0);
}

}  // namespace
}  // namespace edge::controller
