// FleetCommands (controller/fleet_commands.h) over a real SQLite store and a Dispatcher whose
// node streams are recording fakes: who takes part (live matching nodes of the tenant), the
// stored record and the ordinary commands it makes (ids minted before sending), part states
// and durations from the results, refusals at dispatch, cancel, tenant scoping, bad input.
#include "controller/fleet_commands.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "tests/unit/controller/edge_fleet_fixture.h"

namespace edge::controller {
namespace {

namespace pb = aegis::cluster::v1;
using namespace std::chrono_literals;

class FleetCommandsTest : public EdgeFleetFixture {
 protected:
  void SetUp() override {
    EdgeFleetFixture::SetUp();
    commands_ = std::make_unique<FleetCommands>(*store_, *fleet_, *dispatcher_, clock_);
  }

  // An edge-enrolled node of `tenant` reporting `os`, with a stream when `connected`.
  void AddNode(const std::string& node, const std::string& tenant, const std::string& os,
               bool connected = true) {
    pb::EdgeCapabilities caps;
    caps.set_os(os);
    caps.add_local_tools("exec");
    streams_[node] = std::make_shared<RecordingStream>();
    EnrollNode(node, tenant, caps, connected ? streams_[node] : nullptr);
  }
  void Tag(const std::string& node, const std::string& k, const std::string& v) {
    ASSERT_TRUE(fleet_->UpdateNodeTags(node, {{k, v}}, {}));
  }
  // The node answers its part: ok with `exit_code`.
  void Answer(const std::string& node, const std::string& command_id, int exit_code) {
    pb::EdgeResult r;
    r.mutable_ok()->set_exit_code(exit_code);
    dispatcher_->OnResult(node, command_id, r);
    dispatcher_->FlushResults();  // stored and told, as the assertions expect
  }
  static const FleetPartView& PartOf(const FleetCommandView& v, const std::string& node) {
    for (const auto& p : v.parts)
      if (p.node_id == node) return p;
    ADD_FAILURE() << "no part for " << node;
    static FleetPartView none;
    return none;
  }

  std::unique_ptr<FleetCommands> commands_;
  std::map<std::string, std::shared_ptr<RecordingStream>> streams_;
};

TEST_F(FleetCommandsTest, OneOrdinaryCommandPerLiveMatchingNode) {
  AddNode("web-1", "t1", "linux");
  AddNode("web-2", "t1", "linux");
  AddNode("web-3", "t1", "darwin");
  AddNode("web-off", "t1", "linux", /*connected=*/false);
  AddNode("db-1", "t1", "linux");
  for (const char* n : {"web-1", "web-2", "web-3", "web-off"})
    Tag(n, "role", "web");

  std::vector<std::string> planned;
  FleetHooks hooks;
  hooks.planned = [&](const FleetCommandRecord& rec) {
    for (const auto& p : rec.parts) {
      planned.push_back(p.node_id);
      // Stored with its command ids before anything was sent.
      EXPECT_TRUE(streams_[p.node_id]->sent.empty());
    }
    EXPECT_TRUE(store_->GetFleetCommand(rec.fleet_id)->has_value());
  };
  auto v = commands_->Invoke({.selector = "tag:role=web, os:linux",
                              .tool = "exec",
                              .args_json = R"({"command":"true"})",
                              .deadline = 30s,
                              .created_by = "operator"},
                             hooks);
  ASSERT_TRUE(v) << v.error().ToString();
  EXPECT_EQ(planned, (std::vector<std::string>{"web-1", "web-2"}))
      << "web-3 is darwin, web-off is offline, db-1 is not tagged";
  EXPECT_EQ(v->record.selector, "tag:role=web,os:linux");
  ASSERT_EQ(v->parts.size(), 2u);
  for (const auto& p : v->parts) {
    EXPECT_EQ(p.state, kPartRunning);
    ASSERT_EQ(streams_[p.node_id]->sent.size(), 1u);
    const auto& inv = streams_[p.node_id]->sent[0].invoke_tool();
    EXPECT_EQ(inv.command_id(), p.command_id) << "the minted id is the command's";
    EXPECT_EQ(inv.tool_name(), "exec");
    EXPECT_EQ(inv.deadline().seconds(), 30);
    auto c = store_->GetCommand(p.command_id);
    ASSERT_TRUE(c && *c) << "each part is an ordinary command";
    EXPECT_EQ((*c)->node_id, p.node_id);
  }
  EXPECT_TRUE(streams_["web-3"]->sent.empty());
  EXPECT_TRUE(streams_["db-1"]->sent.empty());
  EXPECT_FALSE(v->finished());

  // Results come in: exit 0 on web-1 after 2 s, exit 3 on web-2 after 5 s.
  clock_.Advance(2s);
  Answer("web-1", PartOf(*v, "web-1").command_id, 0);
  clock_.Advance(3s);
  auto got = commands_->Get(v->record.fleet_id, "");
  ASSERT_TRUE(got);
  EXPECT_EQ(PartOf(*got, "web-1").state, "ok");
  EXPECT_EQ(PartOf(*got, "web-1").exit_code, 0);
  EXPECT_EQ(PartOf(*got, "web-1").duration_ms, 2000);
  EXPECT_EQ(PartOf(*got, "web-2").state, kPartRunning);
  EXPECT_FALSE(PartOf(*got, "web-2").duration_ms.has_value());
  Answer("web-2", PartOf(*v, "web-2").command_id, 3);
  got = commands_->Get(v->record.fleet_id, "");
  EXPECT_TRUE(got->finished());
  EXPECT_FALSE(got->all_succeeded()) << "web-2 exited 3";
  EXPECT_EQ(PartOf(*got, "web-2").exit_code, 3);
  EXPECT_EQ(PartOf(*got, "web-2").duration_ms, 5000);
  // A duplicate result (an outbox resend) changes nothing.
  Answer("web-2", PartOf(*v, "web-2").command_id, 0);
  EXPECT_EQ(PartOf(*commands_->Get(v->record.fleet_id, ""), "web-2").exit_code, 3);
  EXPECT_EQ(commands_->List(0)->size(), 1u);
}

TEST_F(FleetCommandsTest, NoLiveMatchStoresNothingAndSaysWhy) {
  AddNode("web-off", "t1", "linux", /*connected=*/false);
  auto none = commands_->Invoke({.selector = "os:linux", .tool = "sysinfo"});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(none.error().message,
            "no live node matches selector \"os:linux\" (1 node(s) match but are not connected "
            "or are revoked; only live nodes take part)");
  auto nothing = commands_->Invoke({.selector = "node:ghost", .tool = "sysinfo"});
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().message, "no live node matches selector \"node:ghost\"");
  EXPECT_TRUE(commands_->List(0)->empty());
  EXPECT_TRUE(store_->ListCommands("", 0)->empty());
}

TEST_F(FleetCommandsTest, BadInputIsRefusedBeforeAnythingIsStored) {
  AddNode("web-1", "t1", "linux");
  struct Case {
    FleetInvokeSpec spec;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{.selector = "", .tool = "exec"}, "selector is empty"},
      {{.selector = "os:linux,,", .tool = "exec"}, "term 2 is empty"},
      {{.selector = "colour:red", .tool = "exec"}, "unknown kind \"colour\""},
      {{.selector = "os:linux", .tool = ""}, "tool is required"},
      {{.selector = "os:linux", .tool = "exec", .args_json = "[1]"}, "args"},
      {{.selector = "os:linux", .tool = "exec", .deadline = -1ms}, "deadline -1 ms is negative"},
  };
  for (const auto& c : cases) {
    auto r = commands_->Invoke(c.spec);
    ASSERT_FALSE(r) << c.message;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << r.error().message;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(commands_->List(0)->empty());
  EXPECT_TRUE(streams_["web-1"]->sent.empty());
}

TEST_F(FleetCommandsTest, APartRefusedAtDispatchIsAnErrorPart) {
  AddNode("web-1", "t1", "linux");
  AddNode("web-2", "t1", "linux");
  streams_["web-2"]->refuse = true;  // its stream ends as the command is sent
  auto v = commands_->Invoke({.selector = "os:linux", .tool = "sysinfo"});
  ASSERT_TRUE(v) << v.error().ToString();
  const auto& refused = PartOf(*v, "web-2");
  EXPECT_EQ(refused.state, "error");
  EXPECT_EQ(refused.error_code, "UNAVAILABLE");
  EXPECT_NE(refused.error_message.find("disconnected before the command was sent"),
            std::string::npos)
      << refused.error_message;
  EXPECT_EQ(PartOf(*v, "web-1").state, kPartRunning);
  // What GET shows is the same (the stored command has the refusal as its one result).
  EXPECT_EQ(PartOf(*commands_->Get(v->record.fleet_id, ""), "web-2").error_code, "UNAVAILABLE");
}

TEST_F(FleetCommandsTest, APartRefusedBeforeItWasStoredKeepsTheRefusal) {
  FleetCommandRecord rec{.fleet_id = "f1",
                         .selector = "os:linux",
                         .tool = "sysinfo",
                         .args_json = "{}",
                         .parts = {{.node_id = "gone", .command_id = "never-stored"},
                                   {.node_id = "later", .command_id = "not-sent-yet"}}};
  ASSERT_TRUE(store_->InsertFleetCommand(rec));
  ASSERT_TRUE(store_->SetFleetPartError("f1", "gone", "UNAVAILABLE", "node gone is not connected"));
  auto v = commands_->Get("f1", "");
  ASSERT_TRUE(v);
  const auto& gone = PartOf(*v, "gone");
  EXPECT_EQ(gone.state, "error");
  EXPECT_EQ(gone.command_id, "") << "no such command exists";
  EXPECT_EQ(gone.error_message, "node gone is not connected");
  EXPECT_EQ(PartOf(*v, "later").state, kPartPending);
  EXPECT_FALSE(v->finished());
}

TEST_F(FleetCommandsTest, CancelReachesOnlyTheRunningParts) {
  AddNode("web-1", "t1", "linux");
  AddNode("web-2", "t1", "linux");
  AddNode("web-3", "t1", "linux");
  auto v = commands_->Invoke({.selector = "os:linux", .tool = "exec"});
  ASSERT_TRUE(v) << v.error().ToString();
  Answer("web-1", PartOf(*v, "web-1").command_id, 0);
  dispatcher_->Detach("web-3", streams_["web-3"].get());  // web-3's stream is gone

  auto cancel = commands_->Cancel(v->record.fleet_id, "", "");
  ASSERT_TRUE(cancel) << cancel.error().ToString();
  ASSERT_EQ(cancel->size(), 3u);
  std::map<std::string, FleetPartCancel> by_node;
  for (const auto& c : *cancel)
    by_node[c.node_id] = c;
  EXPECT_EQ(by_node["web-1"].outcome, "ended");
  EXPECT_EQ(by_node["web-2"].outcome, "sent");
  EXPECT_EQ(by_node["web-3"].outcome, "not_delivered");
  EXPECT_NE(by_node["web-3"].message.find("not connected"), std::string::npos);
  ASSERT_EQ(streams_["web-2"]->sent.size(), 2u);
  const auto& sent = streams_["web-2"]->sent[1];
  ASSERT_TRUE(sent.has_cancel());
  EXPECT_EQ(sent.cancel().command_id(), PartOf(*v, "web-2").command_id);
  EXPECT_EQ(sent.cancel().reason(),
            "fleet command " + v->record.fleet_id + " cancelled by the operator");
  EXPECT_EQ(streams_["web-1"]->sent.size(), 1u) << "an ended part gets no cancel";
  EXPECT_NE(commands_->Get(v->record.fleet_id, "")->record.cancelled_at_ms, 0);
  EXPECT_EQ(commands_->Cancel("nope", "", "").error().code, ErrorCode::kNotFound);
}

TEST_F(FleetCommandsTest, ATenantSeesOnlyItsNodesAndItsFleetCommands) {
  AddNode("a-1", "acme", "linux");
  AddNode("b-1", "other", "linux");
  auto v = commands_->Invoke(
      {.selector = "os:linux", .tool = "sysinfo", .tenant_id = "acme", .created_by = "alice"});
  ASSERT_TRUE(v) << v.error().ToString();
  ASSERT_EQ(v->parts.size(), 1u);
  EXPECT_EQ(v->parts[0].node_id, "a-1");
  EXPECT_TRUE(streams_["b-1"]->sent.empty());
  EXPECT_EQ(v->record.tenant_id, "acme");
  EXPECT_EQ(v->record.created_by, "alice");

  EXPECT_TRUE(commands_->Get(v->record.fleet_id, "acme"));
  for (const std::string tenant : {"other"}) {
    auto foreign = commands_->Get(v->record.fleet_id, tenant);
    ASSERT_FALSE(foreign);
    EXPECT_EQ(foreign.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(foreign.error().message, "fleet command " + v->record.fleet_id + " not found");
    EXPECT_EQ(commands_->Cancel(v->record.fleet_id, tenant, "").error().code, ErrorCode::kNotFound);
  }
  EXPECT_TRUE(commands_->Get(v->record.fleet_id, "")) << "the admin socket sees every tenant";
  // An admin-socket fleet command is no tenant's.
  auto admin = commands_->Invoke({.selector = "node:b-1", .tool = "sysinfo"});
  ASSERT_TRUE(admin);
  EXPECT_FALSE(commands_->Get(admin->record.fleet_id, "other"));
  // The other tenant's node never matches, even by id.
  auto by_id = commands_->Invoke({.selector = "node:b-1", .tool = "sysinfo", .tenant_id = "acme"});
  ASSERT_FALSE(by_id);
  EXPECT_EQ(by_id.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(by_id.error().message, "no live node matches selector \"node:b-1\"");
}

// Dispatcher::InvokeMany, the fleet command's path: what passes Invoke's checks is stored
// together and sent; what does not is refused as Invoke would refuse it, spec by spec.
class RecordingObserver : public CommandObserver {
 public:
  void OnAccepted(const std::string& id) override { accepted.push_back(id); }
  void OnProgress(pb::Chunk) override {}
  void OnResult(const CommandRecord& c) override { results.push_back(c.command_id); }
  void OnNodeDisconnected(const std::string&) override {}
  void OnNodeReconnected(const std::string&) override {}
  std::vector<std::string> accepted;
  std::vector<std::string> results;
};

TEST_F(FleetCommandsTest, InvokeManyStoresAndSendsTheAcceptedAndRefusesTheRestOneByOne) {
  AddNode("web-1", "t1", "linux");
  AddNode("web-2", "t1", "linux");
  AddNode("web-off", "t1", "linux", /*connected=*/false);
  streams_["web-2"]->refuse = true;  // its stream ends as the command is sent
  auto watch = std::make_shared<RecordingObserver>();
  const std::vector<InvokeSpec> specs = {
      {.node_id = "web-1", .tool = "sysinfo", .command_id = "c-1"},
      {.node_id = "ghost", .tool = "sysinfo", .command_id = "c-ghost"},
      {.node_id = "web-off", .tool = "sysinfo", .command_id = "c-off"},
      {.node_id = "web-1", .tool = "exec", .args_json = "[1]", .command_id = "c-bad"},
      {.node_id = "web-2", .tool = "sysinfo", .command_id = "c-2"},
      {.node_id = "web-1", .tool = "exec", .command_id = "c-3"},
  };
  auto ids = dispatcher_->InvokeMany(specs, {watch, nullptr, nullptr, nullptr, nullptr});
  ASSERT_EQ(ids.size(), specs.size());
  ASSERT_TRUE(ids[0]) << ids[0].error().ToString();
  EXPECT_EQ(*ids[0], "c-1");
  EXPECT_EQ(ids[1].error().code, ErrorCode::kNotFound);
  EXPECT_EQ(ids[1].error().message, "node ghost not found");
  EXPECT_EQ(ids[2].error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(ids[2].error().message, "node web-off is not connected");
  EXPECT_EQ(ids[3].error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(ids[4].error().code, ErrorCode::kUnavailable) << "stored, then its send failed";
  ASSERT_TRUE(ids[5]) << "fewer observers than specs: the rest have none";
  EXPECT_EQ(*ids[5], "c-3");

  EXPECT_EQ(watch->accepted, (std::vector<std::string>{"c-1"}));
  ASSERT_EQ(streams_["web-1"]->sent.size(), 2u);
  EXPECT_EQ(streams_["web-1"]->sent[0].invoke_tool().command_id(), "c-1");
  EXPECT_EQ(streams_["web-1"]->sent[1].invoke_tool().command_id(), "c-3");
  EXPECT_TRUE(streams_["web-off"]->sent.empty());
  // Stored: the sent ones as dispatched, the one whose send failed with that as its result;
  // nothing for the refusals.
  for (const char* id : {"c-1", "c-3"}) {
    auto c = store_->GetCommand(id);
    ASSERT_TRUE(c && *c) << id;
    EXPECT_EQ((*c)->state, kCommandDispatched);
  }
  auto failed = store_->GetCommand("c-2");
  ASSERT_TRUE(failed && *failed);
  EXPECT_EQ((*failed)->result.error_code, "UNAVAILABLE");
  for (const char* id : {"c-ghost", "c-off", "c-bad"})
    EXPECT_FALSE(*store_->GetCommand(id)) << id;
  // The observer hears the result of its command.
  Answer("web-1", "c-1", 0);
  EXPECT_EQ(watch->results, (std::vector<std::string>{"c-1"}));
}

TEST_F(FleetCommandsTest, InvokeManyStoresNoneWhenOneOfThemCannotBeStored) {
  AddNode("web-1", "t1", "linux");
  AddNode("web-2", "t1", "linux");
  ASSERT_TRUE(store_->InsertCommand({.command_id = "taken",
                                     .node_id = "web-2",
                                     .tool = "sysinfo",
                                     .args_json = "{}",
                                     .state = kCommandDispatched}));
  auto ids =
      dispatcher_->InvokeMany({{.node_id = "web-1", .tool = "sysinfo", .command_id = "new"},
                               {.node_id = "web-2", .tool = "sysinfo", .command_id = "taken"}},
                              {});
  ASSERT_EQ(ids.size(), 2u);
  for (const auto& id : ids) {
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, ErrorCode::kAlreadyExists);
    EXPECT_EQ(id.error().message,
              "none of the 2 commands was stored: command taken already exists");
  }
  EXPECT_FALSE(*store_->GetCommand("new")) << "all or nothing";
  EXPECT_TRUE(streams_["web-1"]->sent.empty());
  EXPECT_TRUE(streams_["web-2"]->sent.empty());
}

// Review finding: a node that attaches a new stream while a stored command is being sent on
// its old one gets the command on the new stream (Attach resends what has no result); the send
// that failed on the old stream must not end the command as "never sent".
class ReplacedOnSend : public RecordingStream {
 public:
  std::function<void()> on_send;
  bool Send(const pb::EdgeCommand&) override {
    if (on_send) std::exchange(on_send, nullptr)();
    return false;  // this stream is gone
  }
};

TEST_F(FleetCommandsTest, ACommandWhoseNodeReattachesAsItIsSentGoesOnTheNewStream) {
  AddNode("web-1", "t1", "linux");
  auto old_stream = std::make_shared<ReplacedOnSend>();
  auto new_stream = std::make_shared<RecordingStream>();
  dispatcher_->Attach("web-1", old_stream);
  old_stream->on_send = [&] { dispatcher_->Attach("web-1", new_stream); };
  auto watch = std::make_shared<RecordingObserver>();
  auto ids = dispatcher_->InvokeMany({{.node_id = "web-1", .tool = "sysinfo", .command_id = "c-1"}},
                                     {watch});
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(ids[0]) << ids[0].error().ToString();
  ASSERT_EQ(new_stream->sent.size(), 1u) << "resent by Attach";
  EXPECT_EQ(new_stream->sent[0].invoke_tool().command_id(), "c-1");
  auto c = store_->GetCommand("c-1");
  ASSERT_TRUE(c && *c);
  EXPECT_EQ((*c)->state, kCommandDispatched) << "not ended as never sent";
  Answer("web-1", "c-1", 0);
  EXPECT_EQ(watch->results, (std::vector<std::string>{"c-1"})) << "its observer gets the result";
}

// An ok part whose node's output cap dropped output carries the cap's note (fleet get, the
// REST part); an ok part without the flag, and a failed one, carry none.
TEST(FleetPartViewTest, AnOkPartWhoseOutputWasCappedCarriesTheCapsNote) {
  CommandRecord c{.command_id = "cmd-1", .node_id = "edge-01", .state = kCommandCompleted};
  c.result.outcome = "ok";
  c.result.payload_json = R"({"stdout":"","output_capped":true,"output_cap_bytes":1048576,)"
                          R"("output_cap_key":"sandbox.max_output_bytes"})";
  const FleetPartRecord part{.node_id = "edge-01", .command_id = "cmd-1"};
  EXPECT_EQ(FleetCommands::PartView(part, c).output_cap_note,
            "node edge-01 reached its output cap of 1MiB (sandbox.max_output_bytes) and dropped "
            "the rest of command cmd-1's output");
  c.result.payload_json = R"({"stdout":"","output_capped":false})";
  EXPECT_EQ(FleetCommands::PartView(part, c).output_cap_note, "");
  c.result.payload_json = R"({"output_capped":true})";
  c.result.outcome = "error";
  EXPECT_EQ(FleetCommands::PartView(part, c).output_cap_note, "") << "only ok parts";
}

}  // namespace
}  // namespace edge::controller
