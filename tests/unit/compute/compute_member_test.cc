// The compute member door against an in-process fake engine (a CloudEventsService on
// loopback, plaintext) with a FakeExecutor and a ManualClock: join first, greet → memberId
// and ack, own keep-alives on the clock, acks of server keep-alives, processor and criteria
// calls through the executor, failures answered, reconnects whose backoff resets only after
// a greet, the token re-read per stream, answers of a dead stream dropped.
#include "agent/compute/compute_member.h"

#include <gtest/gtest.h>

#include <deque>

#include "tests/support/fake_executor.h"
#include "tests/support/manual_clock.h"
#include "tests/support/wait_until.h"

namespace edge::compute {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using edge::testing::FakeExecutor;
using edge::testing::WaitUntil;
namespace cyoda = org::cyoda::cloud::api::grpc;

// ---- the fake engine ----------------------------------------------------------------------

class FakeEngine final : public cyoda::CloudEventsService::CallbackService {
 public:
  struct Log {
    std::string bearer;
    std::vector<DecodedEvent> events;
    bool done = false;
  };

  ~FakeEngine() override { Shutdown(); }

  std::string Start() {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    return "127.0.0.1:" + std::to_string(port);
  }
  void Shutdown() {
    if (!server_) return;
    {
      std::lock_guard lock(mu_);
      for (auto* r : reactors_)
        if (r != nullptr) r->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutdown"));
    }
    server_->Shutdown(std::chrono::system_clock::now() + 2s);
    server_.reset();
  }

  grpc::ServerBidiReactor<ce::CloudEvent, ce::CloudEvent>* startStreaming(
      grpc::CallbackServerContext* ctx) override {
    std::lock_guard lock(mu_);
    const size_t index = logs_.size();
    Log log;
    auto md = ctx->client_metadata().find("authorization");
    if (md != ctx->client_metadata().end()) log.bearer.assign(md->second.data(), md->second.size());
    logs_.push_back(log);
    auto* r = new Reactor(this, index);
    reactors_.push_back(r);
    return r;
  }

  // Writes `body` as an event of `type` on stream `index`; returns the event's id.
  std::string Send(size_t index, std::string_view type, const json& body) {
    ce::CloudEvent ev = MakeCloudEvent(type, body, kServerSource);
    return SendEvent(index, std::move(ev));
  }
  std::string SendEvent(size_t index, ce::CloudEvent ev) {
    std::string id = ev.id();
    std::lock_guard lock(mu_);
    if (index < reactors_.size() && reactors_[index] != nullptr) reactors_[index]->Write(ev);
    return id;
  }
  void End(size_t index, grpc::Status st) {
    std::lock_guard lock(mu_);
    if (index < reactors_.size() && reactors_[index] != nullptr) reactors_[index]->End(st);
  }

  std::vector<Log> Logs() const {
    std::lock_guard lock(mu_);
    return logs_;
  }
  bool WaitFor(const std::function<bool(const std::vector<Log>&)>& pred) {
    return WaitUntil([&] { return pred(Logs()); });
  }
  // Waits for event `n` of stream `index` and returns it.
  DecodedEvent Event(size_t index, size_t n) {
    bool ok =
        WaitFor([&](const auto& l) { return l.size() > index && l[index].events.size() > n; });
    EXPECT_TRUE(ok) << "stream " << index << " has no event " << n;
    if (!ok) return {};
    return Logs()[index].events[n];
  }

 private:
  class Reactor final : public grpc::ServerBidiReactor<ce::CloudEvent, ce::CloudEvent> {
   public:
    Reactor(FakeEngine* engine, size_t index) : engine_(engine), index_(index) { StartRead(&in_); }
    void Write(const ce::CloudEvent& ev) {
      std::lock_guard lock(mu_);
      if (finished_) return;
      queue_.push_back(ev);
      if (!writing_) Next();
    }
    void End(const grpc::Status& st) {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
      Finish(st);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        End(grpc::Status::OK);
        return;
      }
      auto d = DecodeCloudEvent(in_);
      {
        std::lock_guard lock(engine_->mu_);
        if (d) engine_->logs_[index_].events.push_back(*d);
      }
      StartRead(&in_);
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) return;
      queue_.pop_front();
      if (!queue_.empty() && !finished_) Next();
    }
    void OnDone() override {
      {
        std::lock_guard lock(engine_->mu_);
        engine_->logs_[index_].done = true;
        engine_->reactors_[index_] = nullptr;
      }
      delete this;
    }

   private:
    void Next() {
      writing_ = true;
      out_ = queue_.front();
      StartWrite(&out_);
    }
    FakeEngine* engine_;
    size_t index_;
    ce::CloudEvent in_, out_;
    std::recursive_mutex mu_;
    std::deque<ce::CloudEvent> queue_;
    bool writing_ = false;
    bool finished_ = false;
  };

  // Recursive: a reaction gRPC runs inline may come back into the engine.
  mutable std::recursive_mutex mu_;
  std::vector<Log> logs_;
  std::vector<Reactor*> reactors_;
  std::unique_ptr<grpc::Server> server_;
};

// A backoff that counts its calls and always waits 1 s.
class CountingBackoff final : public Backoff {
 public:
  std::chrono::milliseconds Next() override {
    ++nexts;
    return 1000ms;
  }
  void Reset() override { ++resets; }
  std::atomic<int> nexts{0};
  std::atomic<int> resets{0};
};

// ---- the fixture --------------------------------------------------------------------------

class ComputeMemberTest : public ::testing::Test {
 protected:
  void SetUp() override { address_ = engine_.Start(); }
  void TearDown() override {
    if (member_) member_->Stop();
    engine_.Shutdown();
  }

  void StartMember(MemberOptions options = {}) {
    config::ComputeConfig c;
    c.enabled = true;
    c.address = address_;
    c.tags = {"approval", "fast"};
    c.legal_entity_id = "acme-corp";
    c.keepalive_interval = 10s;
    c.max_concurrent_calls = 2;
    c.processors["enrich"] = config::ComputeHandler{"enrich-tool", 5s, ""};
    c.criteria["is-big"] = config::ComputeHandler{"big-tool", 2s, ""};
    MemberDeps deps{
        .clock = clock_,
        .backoff = backoff_,
        .executor = executor_,
        .channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()),
        .address = address_,
        .token = [this]() -> Result<std::string> {
          std::lock_guard lock(token_mu_);
          if (token_.empty()) return MakeError(ErrorCode::kNotFound, "no token file");
          return token_;
        },
    };
    auto m = ComputeMember::Create(c, std::move(deps), options);
    ASSERT_TRUE(m) << m.error().ToString();
    member_ = std::move(*m);
    ASSERT_TRUE(member_->Start());
  }

  void Advance(std::chrono::milliseconds d) {
    clock_.Advance(d);
    member_->timers().Poke();
  }
  void SetToken(const std::string& t) {
    std::lock_guard lock(token_mu_);
    token_ = t;
  }
  // Joins on stream `index` and greets it as `member`.
  void Greet(size_t index, const std::string& member = "member-1") {
    DecodedEvent join = engine_.Event(index, 0);
    ASSERT_EQ(join.type, kJoinEvent);
    engine_.Send(index, kGreetEvent,
                 json{{"id", member},
                      {"memberId", member},
                      {"joinedLegalEntityId", "acme-corp"},
                      {"success", true}});
    ASSERT_TRUE(WaitUntil([&] { return member_->status().member_id == member; }));
  }
  std::string SendProcessor(size_t index, const std::string& rid, const std::string& name) {
    return engine_.Send(index, kProcessorRequest,
                        json{{"id", rid},
                             {"requestId", rid},
                             {"entityId", "ent-" + rid},
                             {"processorId", name},
                             {"processorName", name},
                             {"success", true},
                             {"payload", {{"type", "JSON"}, {"data", {{"n", 1}}}}}});
  }
  // The first event of `type` on stream `index` from position `from`, waiting for it.
  DecodedEvent FindEvent(size_t index, std::string_view type, size_t from = 0) {
    DecodedEvent found;
    EXPECT_TRUE(engine_.WaitFor([&](const auto& logs) {
      if (logs.size() <= index) return false;
      for (size_t i = from; i < logs[index].events.size(); ++i) {
        if (logs[index].events[i].type == type) {
          found = logs[index].events[i];
          return true;
        }
      }
      return false;
    })) << "no "
        << type << " on stream " << index;
    return found;
  }
  static sandbox::InvokeResult Exited(int code, const std::string& out) {
    sandbox::InvokeResult r;
    r.exit_code = code;
    r.payload = json{{"exit_code", code}, {"signal", 0}, {"stdout", out}, {"stderr", ""}};
    return r;
  }

  FakeEngine engine_;
  std::string address_;
  ManualClock clock_;
  CountingBackoff backoff_;
  FakeExecutor executor_;
  std::mutex token_mu_;
  std::string token_ = "tok-1";
  std::unique_ptr<ComputeMember> member_;
};

TEST_F(ComputeMemberTest, JoinsFirstThenAcknowledgesTheGreet) {
  StartMember();
  DecodedEvent join = engine_.Event(0, 0);
  EXPECT_EQ(join.type, "CalculationMemberJoinEvent");
  EXPECT_EQ(join.body["tags"], json::parse(R"(["approval","fast"])"));
  EXPECT_EQ(join.body["joinedLegalEntityId"], "acme-corp");
  EXPECT_EQ(join.body["success"], true);
  EXPECT_EQ(join.body["id"], join.id);
  EXPECT_EQ(engine_.Logs()[0].bearer, "Bearer tok-1");
  EXPECT_EQ(member_->status().state, "connecting");

  const std::string greet_id = engine_.Send(0, kGreetEvent,
                                            json{{"id", "m-42"},
                                                 {"memberId", "m-42"},
                                                 {"joinedLegalEntityId", "acme-corp"},
                                                 {"success", true}});
  DecodedEvent ack = engine_.Event(0, 1);
  EXPECT_EQ(ack.type, "EventAckResponse");
  EXPECT_EQ(ack.body["sourceEventId"], greet_id);
  EXPECT_EQ(ack.body["success"], true);
  ASSERT_TRUE(WaitUntil([&] { return member_->status().state == "joined"; }));
  EXPECT_EQ(member_->status().member_id, "m-42");
  EXPECT_EQ(member_->status().joins, 1u);
  EXPECT_EQ(backoff_.resets, 1);
}

TEST_F(ComputeMemberTest, SendsItsOwnKeepAliveOnTheClockAndAcksTheServers) {
  StartMember();
  Greet(0, "m-1");
  ASSERT_TRUE(engine_.WaitFor([](const auto& l) { return l[0].events.size() == 2; }));
  Advance(9999ms);
  Advance(0ms);
  EXPECT_EQ(engine_.Logs()[0].events.size(), 2u);  // not yet
  Advance(1ms);
  DecodedEvent ka = engine_.Event(0, 2);
  EXPECT_EQ(ka.type, "CalculationMemberKeepAliveEvent");
  EXPECT_EQ(ka.body["memberId"], "m-1");
  EXPECT_EQ(ka.body["success"], true);
  Advance(10s);
  EXPECT_EQ(engine_.Event(0, 3).type, "CalculationMemberKeepAliveEvent");

  const std::string server_ka =
      engine_.Send(0, kKeepAliveEvent, json{{"id", "ska-1"}, {"success", true}});
  DecodedEvent ack = engine_.Event(0, 4);
  EXPECT_EQ(ack.type, "EventAckResponse");
  EXPECT_EQ(ack.body["sourceEventId"], server_ka);
}

TEST_F(ComputeMemberTest, NoKeepAliveBeforeTheGreet) {
  StartMember();
  engine_.Event(0, 0);
  Advance(25s);
  Advance(0ms);
  EXPECT_EQ(engine_.Logs()[0].events.size(), 1u);
}

TEST_F(ComputeMemberTest, ProcessorRequestRunsTheMappedToolAndAnswers) {
  StartMember();
  Greet(0);
  const size_t before = engine_.Logs()[0].events.size();
  SendProcessor(0, "r-1", "enrich");
  ASSERT_TRUE(WaitUntil([&] { return executor_.pending() == 1; }));
  const auto req = executor_.requests().back();
  EXPECT_EQ(req.tool, "enrich-tool");
  EXPECT_EQ(req.command_id, "compute:r-1");
  ASSERT_TRUE(req.stdin_data);
  EXPECT_EQ(json::parse(*req.stdin_data)["requestId"], "r-1");
  ASSERT_TRUE(req.door_limit);
  EXPECT_EQ(req.door_limit->max_concurrent, 2u);

  ASSERT_TRUE(executor_.Finish("compute:r-1", Exited(0, R"({"n": 7})")));
  DecodedEvent resp = FindEvent(0, kProcessorResponse, before);
  EXPECT_EQ(resp.body["requestId"], "r-1");
  EXPECT_EQ(resp.body["entityId"], "ent-r-1");
  EXPECT_EQ(resp.body["success"], true);
  EXPECT_EQ(resp.body["payload"], json::parse(R"({"type":"JSON","data":{"n":7}})"));
  ASSERT_TRUE(WaitUntil([&] { return member_->status().calls_answered == 1; }));
}

TEST_F(ComputeMemberTest, CriteriaRequestAnsweredWithMatches) {
  StartMember();
  Greet(0);
  engine_.Send(0, kCriteriaRequest,
               json{{"id", "c-1"},
                    {"requestId", "c-1"},
                    {"entityId", "e"},
                    {"criteriaName", "is-big"},
                    {"target", "TRANSITION"},
                    {"success", true}});
  ASSERT_TRUE(WaitUntil([&] { return executor_.pending() == 1; }));
  EXPECT_EQ(executor_.requests().back().tool, "big-tool");
  ASSERT_TRUE(executor_.Finish("compute:c-1", Exited(1, "")));
  DecodedEvent resp = FindEvent(0, kCriteriaResponse);
  EXPECT_EQ(resp.body["success"], true);
  EXPECT_EQ(resp.body["matches"], false);
  EXPECT_EQ(resp.body["requestId"], "c-1");
}

TEST_F(ComputeMemberTest, EveryBadRequestIsAnsweredNeverDropped) {
  StartMember();
  Greet(0);
  // An unknown processor: NOT_FOUND, nothing run.
  SendProcessor(0, "r-unknown", "nope");
  DecodedEvent unknown = FindEvent(0, kProcessorResponse);
  EXPECT_EQ(unknown.body["requestId"], "r-unknown");
  EXPECT_EQ(unknown.body["success"], false);
  EXPECT_EQ(unknown.body["error"]["code"], "NOT_FOUND");
  EXPECT_EQ(executor_.requests().size(), 0u);
  // A malformed request with a requestId: INVALID_ARGUMENT.
  engine_.Send(0, kCriteriaRequest,
               json{{"id", "c-bad"}, {"requestId", "c-bad"}, {"criteriaName", 5}});
  DecodedEvent bad = FindEvent(0, kCriteriaResponse);
  EXPECT_EQ(bad.body["requestId"], "c-bad");
  EXPECT_EQ(bad.body["success"], false);
  EXPECT_EQ(bad.body["error"]["code"], "INVALID_ARGUMENT");
  // Over the cap: the executor refuses, the answer is retryable.
  executor_.RefuseNext(Error{ErrorCode::kResourceExhausted, "compute.max_concurrent_calls 2"});
  SendProcessor(0, "r-busy", "enrich");
  ASSERT_TRUE(engine_.WaitFor([](const auto& l) {
    int n = 0;
    for (const auto& e : l[0].events)
      n += e.type == kProcessorResponse ? 1 : 0;
    return n == 2;
  }));
  DecodedEvent busy = engine_.Logs()[0].events.back();
  EXPECT_EQ(busy.body["requestId"], "r-busy");
  EXPECT_EQ(busy.body["success"], false);
  EXPECT_EQ(busy.body["error"]["code"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(busy.body["error"]["retryable"], true);
}

TEST_F(ComputeMemberTest, UnknownTypesAndProtoDataDoNotEndTheStream) {
  StartMember();
  Greet(0);
  engine_.Send(0, "SomethingNew", json{{"id", "x"}});
  ce::CloudEvent proto = MakeCloudEvent(kProcessorRequest, json{{"id", "p"}}, kServerSource);
  proto.mutable_proto_data()->set_type_url("type.googleapis.com/x");
  engine_.SendEvent(0, proto);
  // The stream still works: a keep-alive is acknowledged.
  const std::string ka = engine_.Send(0, kKeepAliveEvent, json{{"id", "ka-after"}});
  DecodedEvent ack = FindEvent(0, kAckEvent, 2);
  EXPECT_EQ(ack.body["sourceEventId"], ka);
  EXPECT_EQ(engine_.Logs().size(), 1u);
  EXPECT_FALSE(engine_.Logs()[0].done);
}

TEST_F(ComputeMemberTest, BackoffResetsOnlyAfterAGreetAndTheTokenIsReadPerStream) {
  StartMember();
  engine_.Event(0, 0);
  SetToken("tok-2");
  engine_.End(0, grpc::Status(grpc::StatusCode::UNAVAILABLE, "drop before greet"));
  ASSERT_TRUE(WaitUntil([&] { return backoff_.nexts == 1; }));
  ASSERT_TRUE(WaitUntil([&] { return member_->status().state == "backoff"; }));
  EXPECT_EQ(backoff_.resets, 0);
  Advance(1000ms);
  DecodedEvent join = engine_.Event(1, 0);
  EXPECT_EQ(join.type, kJoinEvent);
  EXPECT_EQ(engine_.Logs()[1].bearer, "Bearer tok-2");
  EXPECT_EQ(backoff_.resets, 0);
  Greet(1, "m-2");
  EXPECT_EQ(backoff_.resets, 1);
  EXPECT_EQ(member_->status().attempts, 2u);
}

TEST_F(ComputeMemberTest, NoGreetWithinTheTimeoutReconnects) {
  MemberOptions o;
  o.greet_timeout = 5s;
  StartMember(o);
  engine_.Event(0, 0);
  Advance(5s);
  ASSERT_TRUE(engine_.WaitFor([](const auto& l) { return l[0].done; }));
  ASSERT_TRUE(WaitUntil([&] { return backoff_.nexts == 1; }));
  // The delay is drawn before its timer is armed; the state says "backoff" once it is (the
  // clock moved in between left the timer a second in the future, and the test waited for
  // ever: seen once in 60 runs under two CPU hogs).
  ASSERT_TRUE(WaitUntil([&] { return member_->status().state == "backoff"; }));
  Advance(1s);
  EXPECT_EQ(engine_.Event(1, 0).type, kJoinEvent);
}

TEST_F(ComputeMemberTest, NoTokenWaitsAndRetries) {
  SetToken("");
  StartMember();
  ASSERT_TRUE(WaitUntil([&] { return backoff_.nexts == 1; }));
  ASSERT_TRUE(WaitUntil([&] { return member_->status().state == "backoff"; }));  // armed
  EXPECT_TRUE(engine_.Logs().empty());
  EXPECT_NE(member_->status().last_error.find("no bearer token"), std::string::npos);
  SetToken("tok-3");
  Advance(1s);
  engine_.Event(0, 0);
  EXPECT_EQ(engine_.Logs()[0].bearer, "Bearer tok-3");
}

TEST_F(ComputeMemberTest, AnswerOfAnEndedStreamIsDroppedNotSentOnTheNext) {
  StartMember();
  Greet(0);
  SendProcessor(0, "r-old", "enrich");
  ASSERT_TRUE(WaitUntil([&] { return executor_.pending() == 1; }));
  engine_.End(0, grpc::Status(grpc::StatusCode::UNAVAILABLE, "engine restart"));
  ASSERT_TRUE(WaitUntil([&] { return member_->status().state == "backoff"; }));
  Advance(1s);
  Greet(1, "m-new");
  ASSERT_TRUE(executor_.Finish("compute:r-old", Exited(0, "{}")));
  ASSERT_TRUE(WaitUntil([&] { return member_->status().answers_dropped == 1; }));
  const auto logs = engine_.Logs();
  for (const auto& e : logs[1].events)
    EXPECT_NE(e.type, kProcessorResponse);
}

TEST_F(ComputeMemberTest, StopEndsTheStreamAndLaterAnswersFindNobody) {
  StartMember();
  Greet(0);
  SendProcessor(0, "r-late", "enrich");
  ASSERT_TRUE(WaitUntil([&] { return executor_.pending() == 1; }));
  member_->Stop();
  EXPECT_EQ(member_->status().state, "stopped");
  ASSERT_TRUE(engine_.WaitFor([](const auto& l) { return l[0].done; }));
  member_.reset();
  EXPECT_TRUE(executor_.Finish("compute:r-late", Exited(0, "{}")));  // no crash, no answer
}

}  // namespace
}  // namespace edge::compute
