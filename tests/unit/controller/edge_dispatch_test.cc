// Dispatch through the admin API to a hand-driven node over real mTLS: InvokeTool is
// persisted before it is sent and carries the inner envelope; progress and the result reach
// the admin Invoke stream; the first result wins (also after a controller restart);
// Cancel / Drain / Shutdown / PushConfig reach the node; refusals are NOT_FOUND / UNAVAILABLE /
// INVALID_ARGUMENT / FAILED_PRECONDITION as documented.
#include <nlohmann/json.hpp>

#include <atomic>

#include "controller/edge_stream.h"
#include "tests/unit/controller/edge_test_support.h"

namespace edge::controller::testing {
namespace {

const std::string kSid = "6f1c1c1e-0000-4000-8000-0000000000d1";

// An admin Invoke call whose events are collected by a thread.
class AdminInvoke {
 public:
  AdminInvoke(apb::AdminService::Stub& stub, const apb::InvokeRequest& req) {
    ctx_.set_deadline(Deadline(60s));
    reader_ = stub.Invoke(&ctx_, req);
    thread_ = std::thread([this] {
      apb::InvokeEvent e;
      while (reader_->Read(&e)) {
        std::lock_guard lock(mu_);
        events_.push_back(e);
        cv_.notify_all();
      }
      auto st = reader_->Finish();
      std::lock_guard lock(mu_);
      status_ = st;
      cv_.notify_all();
    });
  }
  ~AdminInvoke() {
    ctx_.TryCancel();
    thread_.join();
  }
  // Waits until `n` events arrived (or the call ended); returns what arrived.
  std::vector<apb::InvokeEvent> Events(size_t n, std::chrono::milliseconds wait = 10s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return events_.size() >= n || status_.has_value(); });
    return events_;
  }
  std::optional<grpc::Status> Status(std::chrono::milliseconds wait = 10s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return status_.has_value(); });
    return status_;
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<apb::InvokeEvent>> reader_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<apb::InvokeEvent> events_;
  std::optional<grpc::Status> status_;
};

class EdgeDispatchTest : public ControllerHarness {
 protected:
  // An enrolled node with an open stream that said Hello.
  void Connect() {
    if (!node_) node_ = EnrolledNode("edge-01");
    stream_ = node_->Open(node_->token);
    ASSERT_TRUE(stream_->Write(node_->Hello(kSid)));
    ASSERT_TRUE(WaitConnected("edge-01"));
  }
  apb::InvokeRequest Request(const std::string& node = "edge-01") {
    apb::InvokeRequest req;
    req.set_node_id(node);
    req.set_tool("exec");
    req.set_args_json(R"({"command":"echo","args":["hi"],"n":3,"flag":true})");
    req.set_security_context("ops");
    req.set_deadline_ms(30'000);
    return req;
  }
  std::optional<apb::CommandInfo> Command(const std::string& id) {
    apb::GetCommandRequest req;
    req.set_command_id(id);
    apb::CommandInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    if (!admin_->GetCommand(&ctx, req, &info).ok()) return std::nullopt;
    return info;
  }
  template <typename Req, typename Resp, typename Call>
  grpc::Status Unary(Call call, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return ((*admin_).*call)(&ctx, req, resp);
  }

  std::unique_ptr<TestNode> node_;
  std::unique_ptr<TestStream> stream_;
};

TEST_F(EdgeDispatchTest, InvokeSendsAPersistedInvokeToolAndStreamsProgressAndResult) {
  Connect();
  AdminInvoke call(*admin_, Request());
  auto cmd = stream_->Next();
  ASSERT_TRUE(cmd && cmd->has_invoke_tool());
  const auto& inv = cmd->invoke_tool();
  EXPECT_EQ(inv.command_id().size(), 36u);
  EXPECT_EQ(inv.command_id()[14], '4') << "UUIDv4";
  EXPECT_EQ(inv.tool_name(), "exec");
  EXPECT_EQ(inv.security_context_name(), "ops");
  EXPECT_EQ(inv.deadline().seconds(), 30);
  EXPECT_EQ(inv.args().fields().at("command").string_value(), "echo");
  EXPECT_EQ(inv.args().fields().at("n").number_value(), 3);
  EXPECT_TRUE(inv.args().fields().at("flag").bool_value());
  EXPECT_EQ(inv.args().fields().at("args").list_value().values(0).string_value(), "hi");
  // The inner envelope: tenant, context, and a user token signed by the controller.
  const auto& seal = inv.seal_envelope();
  EXPECT_EQ(seal.tenant_id(), "t1");
  EXPECT_EQ(seal.security_context_name(), "ops");
  auto key = TokenKey();
  auto user = identity::VerifyJwtEs256(seal.user_security_token(), key.get(), clock_.Now(),
                                       {.audience = "edge-invoke", .issuer = "edge-controller"});
  ASSERT_TRUE(user) << user.error().ToString();
  EXPECT_EQ(user->claims["sub"], "operator");
  EXPECT_EQ(user->claims["tid"], "t1");
  EXPECT_EQ(user->claims["cid"], inv.command_id());

  // Persisted before it was sent.
  auto stored = Command(inv.command_id());
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->state(), "dispatched");
  EXPECT_EQ(stored->node_id(), "edge-01");
  EXPECT_EQ(stored->security_context(), "ops");
  EXPECT_FALSE(stored->has_result());

  ASSERT_TRUE(stream_->Write(node_->Progress(kSid, inv.command_id(), "hel")));
  ASSERT_TRUE(stream_->Write(node_->Progress(kSid, inv.command_id(), "lo")));
  ASSERT_TRUE(stream_->Write(node_->Result(kSid, inv.command_id(), 3)));
  auto events = call.Events(4);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].accepted().command_id(), inv.command_id());
  EXPECT_EQ(events[1].stdout(), "hel");
  EXPECT_EQ(events[2].stdout(), "lo");
  ASSERT_TRUE(events[3].has_result());
  EXPECT_EQ(events[3].result().outcome(), "ok");
  EXPECT_EQ(events[3].result().exit_code(), 3);
  EXPECT_EQ(events[3].result().duration_ms(), 2000);
  EXPECT_EQ(nlohmann::json::parse(events[3].result().payload_json()),
            nlohmann::json({{"stdout", "hi\n"}}));
  auto st = call.Status();
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->ok()) << st->error_message();

  stored = Command(inv.command_id());
  EXPECT_EQ(stored->state(), "completed");
  EXPECT_EQ(stored->result().exit_code(), 3);
}

TEST_F(EdgeDispatchTest, FirstResultWinsAlsoAcrossAControllerRestart) {
  Connect();
  auto req = Request();
  req.set_detach(true);
  AdminInvoke call(*admin_, req);
  auto events = call.Events(1);
  ASSERT_EQ(events.size(), 1u);
  const std::string id = events[0].accepted().command_id();
  ASSERT_TRUE(call.Status()->ok()) << "detach: accepted, then the call ends";
  ASSERT_TRUE(stream_->Next());

  ASSERT_TRUE(stream_->Write(node_->Result(kSid, id, 0)));
  ASSERT_TRUE(WaitFor([&] { return Command(id)->state() == "completed"; }));
  ASSERT_TRUE(stream_->Write(node_->Result(kSid, id, 7)));  // a duplicate delivery
  ASSERT_TRUE(stream_->Write(node_->Heartbeat(kSid)));
  clock_.Advance(1s);
  ASSERT_TRUE(stream_->Write(node_->Heartbeat(kSid)));
  ASSERT_TRUE(WaitFor([&] {
    return NodeInfo("edge-01")->last_heartbeat_epoch_ms() == ToEpochMillis(clock_.Now());
  })) << "the stream processed past the duplicate";
  EXPECT_EQ(Command(id)->result().exit_code(), 0) << "the duplicate was ignored";
  EXPECT_FALSE(stream_->Ended()) << "a duplicate is not an error";

  // The controller restarts; the node's outbox resends the result on its new stream.
  stream_.reset();
  RestartController();
  Connect();
  ASSERT_TRUE(stream_->Write(node_->Result(kSid, id, 9)));
  clock_.Advance(1s);
  ASSERT_TRUE(stream_->Write(node_->Heartbeat(kSid)));
  ASSERT_TRUE(WaitFor([&] {
    return NodeInfo("edge-01")->last_heartbeat_epoch_ms() == ToEpochMillis(clock_.Now());
  }));
  auto c = Command(id);
  EXPECT_EQ(c->result().exit_code(), 0) << "de-duplication survives the restart";
  apb::ListCommandsRequest lreq;
  lreq.set_node_id("edge-01");
  apb::ListCommandsResponse list;
  ASSERT_TRUE(Unary(&apb::AdminService::Stub::ListCommands, lreq, &list).ok());
  EXPECT_EQ(list.commands_size(), 1);
}

TEST_F(EdgeDispatchTest, RefusalsPersistNothing) {
  node_ = EnrolledNode("edge-01");
  struct Case {
    apb::InvokeRequest req;
    grpc::StatusCode code;
    std::string words;
  };
  std::vector<Case> cases;
  cases.push_back({Request("nope"), grpc::StatusCode::NOT_FOUND, "node nope not found"});
  cases.push_back({Request(), grpc::StatusCode::UNAVAILABLE, "node edge-01 is not connected"});
  auto bad_args = Request();
  bad_args.set_args_json("[1,2]");
  cases.push_back({bad_args, grpc::StatusCode::INVALID_ARGUMENT, "args must be a JSON object"});
  auto no_tool = Request();
  no_tool.set_tool("");
  cases.push_back({no_tool, grpc::StatusCode::INVALID_ARGUMENT, "tool is required"});
  for (const auto& c : cases) {
    AdminInvoke call(*admin_, c.req);
    auto st = call.Status();
    ASSERT_TRUE(st);
    EXPECT_EQ(st->error_code(), c.code) << c.words << ": " << st->error_message();
    EXPECT_NE(st->error_message().find(c.words), std::string::npos) << st->error_message();
    EXPECT_TRUE(call.Events(1, 0ms).empty()) << "nothing accepted";
  }
  apb::ListCommandsResponse list;
  ASSERT_TRUE(
      Unary(&apb::AdminService::Stub::ListCommands, apb::ListCommandsRequest(), &list).ok());
  EXPECT_EQ(list.commands_size(), 0);
}

// Issue 15 #2 (controller half): a result over gRPC's default 4 MiB ended the node's stream
// with RESOURCE_EXHAUSTED; grpc.max_message_bytes (default 16 MiB) now bounds it.
TEST_F(EdgeDispatchTest, AResultAboveFourMiBIsReceivedWithinMaxMessageBytes) {
  Connect();
  AdminInvoke call(*admin_, Request());
  auto cmd = stream_->Next();
  ASSERT_TRUE(cmd && cmd->has_invoke_tool());
  const std::string id = cmd->invoke_tool().command_id();
  pb::EdgeEvent e;
  e.mutable_command_result()->set_command_id(id);
  auto* ok = e.mutable_command_result()->mutable_result()->mutable_ok();
  google::protobuf::Struct payload;
  (*payload.mutable_fields())["stdout"].set_string_value(std::string(5 << 20, 'x'));
  ok->mutable_payload()->PackFrom(payload);
  ASSERT_TRUE(stream_->Write(node_->Sealed(e, kSid)));
  auto st = call.Status(30s);
  ASSERT_TRUE(st && st->ok()) << (st ? st->error_message() : "no end");
  auto events = call.Events(2);
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(events.back().has_result());
  EXPECT_GT(events.back().result().payload_json().size(), size_t{5} << 20);
  EXPECT_FALSE(stream_->Ended()) << "the stream survives a large result";
}

TEST_F(EdgeDispatchTest, AnInvokeToolAboveMaxMessageBytesIsRefusedBeforeItIsStored) {
  max_message_bytes_ = 1 << 20;
  RestartController();
  Connect();
  auto req = Request();
  req.set_args_json(R"({"content":")" + std::string(1'500'000, 'a') + R"("})");
  AdminInvoke call(*admin_, req);
  auto st = call.Status();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st->error_message();
  EXPECT_NE(st->error_message().find("above grpc.max_message_bytes (1048576 bytes)"),
            std::string::npos)
      << st->error_message();
  EXPECT_NE(st->error_message().find("would be 15"), std::string::npos) << st->error_message();
  EXPECT_FALSE(stream_->Next(200ms)) << "nothing was sent";
  apb::ListCommandsResponse list;
  ASSERT_TRUE(
      Unary(&apb::AdminService::Stub::ListCommands, apb::ListCommandsRequest(), &list).ok());
  EXPECT_EQ(list.commands_size(), 0) << "nothing was stored";
  // Just under the limit still goes out.
  req.set_args_json(R"({"content":")" + std::string(900'000, 'a') + R"("})");
  AdminInvoke fits(*admin_, req);
  auto sent = stream_->Next();
  ASSERT_TRUE(sent && sent->has_invoke_tool());
}

// Issue 15 #2 (the agent's half): an InvokeTool above what the node's end of the stream takes
// would end its stream at every resend. The node states its limit in the
// agent.max_message_bytes label; a larger command is refused naming it, nothing is stored.
TEST_F(EdgeDispatchTest, AnInvokeToolAboveTheNodesStatedLimitIsRefusedBeforeItIsStored) {
  node_ = EnrolledNode("edge-01");
  stream_ = node_->Open(node_->token);
  pb::EdgeEvent hello = node_->Hello(kSid);
  (*hello.mutable_hello()
        ->mutable_capabilities()
        ->mutable_custom_labels())["agent.max_message_bytes"] = "200000";
  hello.mutable_hello()->clear_envelope();
  ASSERT_TRUE(stream_->Write(node_->Sealed(hello, kSid)));
  ASSERT_TRUE(WaitConnected("edge-01"));
  auto req = Request();
  req.set_args_json(R"({"content":")" + std::string(250'000, 'a') + R"("})");
  AdminInvoke call(*admin_, req);
  auto st = call.Status();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st->error_message();
  EXPECT_NE(st->error_message().find("above the node's edge.max_message_bytes (200000 bytes)"),
            std::string::npos)
      << st->error_message();
  EXPECT_FALSE(stream_->Next(200ms)) << "nothing was sent";
  apb::ListCommandsResponse list;
  ASSERT_TRUE(
      Unary(&apb::AdminService::Stub::ListCommands, apb::ListCommandsRequest(), &list).ok());
  EXPECT_EQ(list.commands_size(), 0) << "nothing was stored";
  req.set_args_json(R"({"content":")" + std::string(150'000, 'a') + R"("})");
  AdminInvoke fits(*admin_, req);
  auto sent = stream_->Next();
  ASSERT_TRUE(sent && sent->has_invoke_tool()) << "below the node's limit it goes out";
}

// Issue 15 #9: 100 000 levels of args_json through the admin socket overflowed the stack in a
// recursive JSON dump and killed the controller. Now a clean INVALID_ARGUMENT, nothing stored.
TEST_F(EdgeDispatchTest, DeeplyNestedArgsAndDeltasAreRefusedCleanly) {
  Connect();
  for (const std::string& deep :
       {R"({"a":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}",
        std::string(100'000, '{'),
        R"({"a":)" + std::string(32, '[') + std::string(32, ']') + "}"}) {
    auto req = Request();
    req.set_args_json(deep);
    AdminInvoke call(*admin_, req);
    auto st = call.Status();
    ASSERT_TRUE(st);
    EXPECT_EQ(st->error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st->error_message();
    EXPECT_NE(st->error_message().find("args is nested 33 levels deep"), std::string::npos)
        << st->error_message();
    EXPECT_NE(st->error_message().find("limit of 32"), std::string::npos);
  }
  // 32 levels is the most a node can parse (protobuf's 100 nested messages): it goes out, and
  // the node parses it.
  auto ok = Request();
  std::string objects;  // the costliest shape: 32 nested objects
  for (int i = 0; i < 32; ++i)
    objects += R"({"a":)";
  objects += "1" + std::string(32, '}');
  ok.set_args_json(objects);
  AdminInvoke fits(*admin_, ok);
  auto sent = stream_->Next();
  ASSERT_TRUE(sent && sent->has_invoke_tool());
  pb::EdgeCommand reparsed;
  EXPECT_TRUE(reparsed.ParseFromString(sent->SerializeAsString()))
      << "the node's default recursion limit accepts it";

  apb::PushConfigRequest push;
  push.set_node_id("edge-01");
  push.set_delta("tools: " + std::string(100'000, '['));
  apb::PushConfigResponse pr;
  auto pst = Unary(&apb::AdminService::Stub::PushConfig, push, &pr);
  EXPECT_EQ(pst.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << pst.error_message();
  EXPECT_NE(pst.error_message().find("config delta is nested 65 levels deep"), std::string::npos)
      << pst.error_message();
  EXPECT_TRUE(NodeInfo("edge-01").has_value()) << "the controller is alive";
}

TEST_F(EdgeDispatchTest, CancelDrainShutdownAndPushConfigReachTheNode) {
  Connect();
  auto req = Request();
  req.set_detach(true);
  AdminInvoke call(*admin_, req);
  const std::string id = call.Events(1).at(0).accepted().command_id();
  ASSERT_TRUE(stream_->Next());

  apb::CancelCommandRequest cancel;
  cancel.set_command_id(id);
  cancel.set_reason("operator said so");
  apb::CancelCommandResponse cresp;
  ASSERT_TRUE(Unary(&apb::AdminService::Stub::CancelCommand, cancel, &cresp).ok());
  auto c = stream_->Next();
  ASSERT_TRUE(c && c->has_cancel());
  EXPECT_EQ(c->cancel().command_id(), id);
  EXPECT_EQ(c->cancel().reason(), "operator said so");

  // The node reports it cancelled; cancelling again is refused.
  pb::EdgeEvent done;
  done.mutable_command_result()->set_command_id(id);
  done.mutable_command_result()->mutable_result()->mutable_cancelled()->set_reason(
      "operator said so");
  ASSERT_TRUE(stream_->Write(node_->Sealed(done, kSid)));
  ASSERT_TRUE(WaitFor([&] { return Command(id)->state() == "completed"; }));
  EXPECT_EQ(Command(id)->result().outcome(), "cancelled");
  EXPECT_EQ(Command(id)->result().message(), "operator said so");
  auto again = Unary(&apb::AdminService::Stub::CancelCommand, cancel, &cresp);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(again.error_message().find("already completed (cancelled)"), std::string::npos);
  cancel.set_command_id("no-such-command");
  EXPECT_EQ(Unary(&apb::AdminService::Stub::CancelCommand, cancel, &cresp).error_code(),
            grpc::StatusCode::NOT_FOUND);

  apb::DrainNodeRequest drain;
  drain.set_node_id("edge-01");
  apb::DrainNodeResponse dresp;
  ASSERT_TRUE(Unary(&apb::AdminService::Stub::DrainNode, drain, &dresp).ok());
  c = stream_->Next();
  ASSERT_TRUE(c && c->has_drain());

  apb::PushConfigRequest push;
  push.set_node_id("edge-01");
  push.set_delta("cluster:\n  heartbeat_interval_secs: 5\n");
  push.set_version("v2");
  apb::PushConfigResponse presp;
  ASSERT_TRUE(Unary(&apb::AdminService::Stub::PushConfig, push, &presp).ok());
  EXPECT_EQ(presp.version(), "v2");
  c = stream_->Next();
  ASSERT_TRUE(c && c->has_push_config());
  EXPECT_EQ(c->push_config().config_delta(), "cluster:\n  heartbeat_interval_secs: 5\n");
  EXPECT_EQ(c->push_config().version(), "v2");
  EXPECT_EQ(NodeInfo("edge-01")->config_version(), "v2");
  // JSON deltas too; a default version.
  push.set_delta(R"({"labels":{"zone":"b"}})");
  push.set_version("");
  ASSERT_TRUE(Unary(&apb::AdminService::Stub::PushConfig, push, &presp).ok());
  EXPECT_EQ(presp.version(), "v" + std::to_string(ToEpochMillis(clock_.Now())));
  ASSERT_TRUE(stream_->Next());
  // A delta the agent would refuse is refused here, naming the problem, and not sent.
  push.set_delta("cluster:\n  heartbeat_interval_secs: -1\n");
  auto bad = Unary(&apb::AdminService::Stub::PushConfig, push, &presp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("cluster.heartbeat_interval_secs"), std::string::npos)
      << bad.error_message();
  push.set_delta("no_such_section: 1\n");
  EXPECT_EQ(Unary(&apb::AdminService::Stub::PushConfig, push, &presp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  push.set_delta("- a list\n");
  EXPECT_EQ(Unary(&apb::AdminService::Stub::PushConfig, push, &presp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  apb::ShutdownNodeRequest shut;
  shut.set_node_id("edge-01");
  shut.set_grace_ms(1500);
  apb::ShutdownNodeResponse sresp;
  ASSERT_TRUE(Unary(&apb::AdminService::Stub::ShutdownNode, shut, &sresp).ok());
  c = stream_->Next();
  ASSERT_TRUE(c && c->has_shutdown()) << (c ? c->DebugString() : "nothing");
  EXPECT_EQ(c->shutdown().grace().seconds(), 1);
  EXPECT_EQ(c->shutdown().grace().nanos(), 500'000'000);

  // Not connected / unknown.
  stream_.reset();
  ASSERT_TRUE(WaitConnected("edge-01", false));
  auto st = Unary(&apb::AdminService::Stub::DrainNode, drain, &dresp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("not connected"), std::string::npos);
  drain.set_node_id("nope");
  EXPECT_EQ(Unary(&apb::AdminService::Stub::DrainNode, drain, &dresp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(EdgeDispatchTest, WaitersHearOfADisconnectAndGetTheResultAfterTheReconnect) {
  Connect();
  AdminInvoke call(*admin_, Request());
  auto cmd = stream_->Next();
  ASSERT_TRUE(cmd);
  const std::string id = cmd->invoke_tool().command_id();
  stream_.reset();
  auto events = call.Events(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].status().state(), "node_disconnected");

  Connect();
  auto again = stream_->Next();
  ASSERT_TRUE(again && again->has_invoke_tool()) << "the command is sent again";
  EXPECT_EQ(again->invoke_tool().command_id(), id);
  events = call.Events(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].status().state(), "node_reconnected");
  ASSERT_TRUE(stream_->Write(node_->Result(kSid, id, 0)));
  events = call.Events(4);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].result().outcome(), "ok");
  EXPECT_TRUE(call.Status()->ok());
}

// A command whose delivery cannot be confirmed (the stream broke, the controller restarted)
// is sent again, unchanged but for a fresh user token, each time its node attaches a stream
// while it has no result — and only then; a completed one never, one older than the resend
// window never (a repeat past the agent's idempotency window could run it twice).
TEST_F(EdgeDispatchTest, ACommandWithoutAResultIsSentAgainWhenItsNodeReconnects) {
  Connect();
  auto req = Request();
  req.set_detach(true);
  std::string pending, done;
  for (std::string* id : {&pending, &done}) {
    AdminInvoke call(*admin_, req);
    *id = call.Events(1).at(0).accepted().command_id();
    ASSERT_TRUE(stream_->Next());
  }
  ASSERT_TRUE(stream_->Write(node_->Result(kSid, done, 0)));
  ASSERT_TRUE(WaitFor([&] { return Command(done)->state() == "completed"; }));

  // The controller restarts before the node answered `pending`.
  stream_.reset();
  RestartController();
  Connect();
  auto again = stream_->Next();
  ASSERT_TRUE(again && again->has_invoke_tool());
  const auto& inv = again->invoke_tool();
  EXPECT_EQ(inv.command_id(), pending);
  EXPECT_EQ(inv.tool_name(), "exec");
  EXPECT_EQ(inv.security_context_name(), "ops");
  EXPECT_EQ(inv.deadline().seconds(), 30);
  EXPECT_EQ(inv.args().fields().at("command").string_value(), "echo");
  EXPECT_EQ(inv.args().fields().at("n").number_value(), 3);
  EXPECT_EQ(inv.seal_envelope().tenant_id(), "t1");
  auto key = TokenKey();
  auto user =
      identity::VerifyJwtEs256(inv.seal_envelope().user_security_token(), key.get(), clock_.Now(),
                               {.audience = "edge-invoke", .issuer = "edge-controller"});
  ASSERT_TRUE(user) << user.error().ToString();
  EXPECT_EQ(user->claims["cid"], pending);
  EXPECT_FALSE(stream_->Next(300ms)) << "the completed command is not sent again";

  // The node answers; nothing is sent on the next reconnect.
  ASSERT_TRUE(stream_->Write(node_->Result(kSid, pending, 0)));
  ASSERT_TRUE(WaitFor([&] { return Command(pending)->state() == "completed"; }));
  stream_.reset();
  ASSERT_TRUE(WaitConnected("edge-01", false));
  Connect();
  EXPECT_FALSE(stream_->Next(300ms));

  // A command older than the window stays dispatched and is not sent again.
  std::string old;
  {
    AdminInvoke call(*admin_, req);
    old = call.Events(1).at(0).accepted().command_id();
    ASSERT_TRUE(stream_->Next());
  }
  stream_.reset();
  ASSERT_TRUE(WaitConnected("edge-01", false));
  clock_.Advance(Dispatcher::kResendWindow + 1min);
  ASSERT_TRUE(node_->Handshake(std::nullopt).ok()) << "a fresh node token after the jump";
  Connect();
  EXPECT_FALSE(stream_->Next(300ms));
  EXPECT_EQ(Command(old)->state(), "dispatched");
}

TEST_F(EdgeDispatchTest, AResultFromAnotherNodeIsIgnored) {
  Connect();
  auto other = EnrolledNode("edge-02");
  auto other_stream = other->Open(other->token);
  ASSERT_TRUE(other_stream->Write(other->Hello(kSid)));
  ASSERT_TRUE(WaitConnected("edge-02"));

  auto req = Request();
  req.set_detach(true);
  AdminInvoke call(*admin_, req);
  const std::string id = call.Events(1).at(0).accepted().command_id();
  ASSERT_TRUE(other_stream->Write(other->Result(kSid, id, 5)));
  clock_.Advance(1s);
  ASSERT_TRUE(other_stream->Write(other->Heartbeat(kSid)));
  ASSERT_TRUE(WaitFor([&] {
    return NodeInfo("edge-02")->last_heartbeat_epoch_ms() == ToEpochMillis(clock_.Now());
  }));
  controller_->dispatcher().FlushResults();  // results are stored off the stream's thread
  EXPECT_EQ(Command(id)->state(), "dispatched");
}

// design.md: "a slow peer slows the pipe read, it does not grow memory". An admin Invoke whose
// client does not read: the controller stops reading the node's stream once the client's
// queue is over high water (OutputPacer), so the node's writes stop too; `kChunks` is more than
// that queue and the transports' windows hold together.
class SlowClientTest : public EdgeDispatchTest {
 protected:
  static constexpr int kChunks = 96;  // of 1 MiB each

  // Starts the unread call and a writer of kChunks chunks (the first byte of chunk i is
  // 'A' + i % 26), then the result; returns once the writes stopped advancing for 1 s or all
  // were written.
  void StartUnreadCall() {
    Connect();
    ctx_.set_deadline(Deadline(120s));
    reader_ = admin_->Invoke(&ctx_, Request());
    auto cmd = stream_->Next();
    ASSERT_TRUE(cmd && cmd->has_invoke_tool());
    id_ = cmd->invoke_tool().command_id();
    writer_ = std::thread([this] {
      for (int i = 0; i < kChunks; ++i) {
        std::string chunk(size_t{1} << 20, 'x');
        chunk[0] = static_cast<char>('A' + i % 26);
        if (!stream_->Write(node_->Progress(kSid, id_, chunk))) return;
        ++written_;
      }
      if (stream_->Write(node_->Result(kSid, id_, 0))) result_written_ = true;
    });
    WaitUntilWritesStop();
  }
  void WaitUntilWritesStop() {
    int last = -1;
    for (int i = 0; i < 300 && written_ < kChunks; ++i) {
      std::this_thread::sleep_for(100ms);
      if (i % 10 == 9) {  // once a second
        if (written_ == last) return;
        last = written_;
      }
    }
  }
  // Reads the call to its end: the stdout bytes, the first byte of each chunk, the states of
  // its status notes, whether a result came.
  struct Read {
    size_t bytes = 0;
    std::string firsts;
    std::vector<std::string> notes;
    bool result = false;
  };
  Read ReadAll() {
    Read got;
    apb::InvokeEvent e;
    while (reader_->Read(&e)) {
      if (e.has_stdout()) {
        got.bytes += e.stdout().size();
        got.firsts.push_back(e.stdout()[0]);
      }
      if (e.has_status()) got.notes.push_back(e.status().state());
      if (e.has_result()) got.result = true;
    }
    EXPECT_TRUE(reader_->Finish().ok());
    return got;
  }
  void TearDown() override {
    if (writer_.joinable()) {
      ctx_.TryCancel();
      writer_.join();
    }
    EdgeDispatchTest::TearDown();
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<apb::InvokeEvent>> reader_;
  std::string id_;
  std::thread writer_;
  std::atomic<int> written_{0};
  std::atomic<bool> result_written_{false};
};

TEST_F(SlowClientTest, AClientThatDoesNotReadHoldsTheNodesOutputBackAndThenGetsAllOfIt) {
  StartUnreadCall();
  ASSERT_LT(written_.load(), kChunks)
      << "the node wrote every chunk while the client read none: the controller queued them";
  const int held_at = written_.load();
  auto got = ReadAll();
  writer_.join();
  EXPECT_TRUE(result_written_);
  EXPECT_EQ(got.bytes, size_t{kChunks} << 20) << "the node was held back at " << held_at;
  std::string want;
  for (int i = 0; i < kChunks; ++i)
    want.push_back(static_cast<char>('A' + i % 26));
  EXPECT_EQ(got.firsts, want) << "every chunk, in order";
  EXPECT_TRUE(got.notes.empty()) << got.notes.front();
  EXPECT_TRUE(got.result);
}

TEST_F(SlowClientTest, AfterTheStallLimitTheNodeGoesOnAndTheLaggingClientIsToldOfDrops) {
  StartUnreadCall();
  ASSERT_LT(written_.load(), kChunks);
  // The stall limit passes on the controller's clock: its stream timers run.
  clock_.Advance(EdgeStreamDeps::kOutputStallLimit);
  EXPECT_TRUE(edge::testing::WaitUntil([&] { return written_ == kChunks; }, 60s))
      << "the node's stream no longer waits for this client; written: " << written_.load();
  writer_.join();
  EXPECT_TRUE(result_written_);
  auto got = ReadAll();
  EXPECT_LT(got.bytes, size_t{kChunks} << 20);
  ASSERT_FALSE(got.notes.empty());
  EXPECT_EQ(got.notes.front(), kOutputDropped);
  EXPECT_TRUE(got.result) << "the result still comes";
  // What was queued before the drops came whole and in order.
  for (size_t i = 0; i < got.firsts.size() && got.notes.size() == 1; ++i)
    EXPECT_EQ(got.firsts[i], static_cast<char>('A' + i % 26)) << i;
}

}  // namespace
}  // namespace edge::controller::testing
