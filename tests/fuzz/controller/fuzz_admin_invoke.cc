// Fuzz target: the controller's admin Invoke request as the admin service hands it to the
// Dispatcher (node, tool, args JSON, security context, deadline), against a real SQLite
// store with one enrolled, connected node; then the node's answer (an EdgeResult from the
// same bytes) through OnResult, and the stored capabilities JSON reader.
//
// Invariants: nothing crashes or throws; a refused request stores and sends nothing; an
// accepted one is stored once and sent once, as an InvokeTool for the command id returned;
// a result is recorded for it and reads back as the command's outcome.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "admin.pb.h"
#include "agent/identity/jwt.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/dispatcher.h"
#include "controller/edge_codec.h"
#include "controller/node_tokens.h"
#include "controller/sqlite_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace {

namespace ctl = edge::controller;
namespace pb = aegis::cluster::v1;

class RecordingSink : public ctl::CommandSink {
 public:
  bool Send(const pb::EdgeCommand& command) override {
    sent.push_back(command);
    return true;
  }
  void Close(const grpc::Status&) override {}
  std::vector<pb::EdgeCommand> sent;
};

struct World {
  edge::testing::TempDir dir{"fuzz-admin"};
  edge::ManualClock clock;
  std::unique_ptr<ctl::SqliteStore> store;
  std::unique_ptr<edge::identity::EcSigningKey> key;
  std::unique_ptr<ctl::NodeTokenAuthority> tokens;
  std::unique_ptr<ctl::Dispatcher> dispatcher;
  std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();

  World() {
    edge::log::Init({.level = spdlog::level::off});  // thousands of inputs a second
    store = std::move(*ctl::SqliteStore::Open(dir / "c.db"));
    key = std::make_unique<edge::identity::EcSigningKey>(*edge::identity::EcSigningKey::Generate());
    tokens =
        std::make_unique<ctl::NodeTokenAuthority>(*store, *key, clock, ctl::NodeTokenSettings{});
    const int64_t now = edge::ToEpochMillis(clock.Now());
    if (!store->InsertJoinToken({.token_id = "jt-1",
                                 .token_hash = "h1",
                                 .tenant_id = "t1",
                                 .created_at_ms = now,
                                 .expires_at_ms = now + 3'600'000})) {
      __builtin_trap();
    }
    auto token = tokens->Mint("edge-01", "t1");
    if (!token || !store->EnrollEdgeNode({.jti = "jt-1",
                                          .join_token_hash = "h1",
                                          .node_id = "edge-01",
                                          .tenant_id = "t1",
                                          .public_key = std::string(32, 'k'),
                                          .now_ms = now,
                                          .token = token->record})) {
      __builtin_trap();
    }
    // A small message limit, so the size refusal is reachable.
    dispatcher = std::make_unique<ctl::Dispatcher>(*store, *tokens, clock, size_t{64} << 10);
    dispatcher->Attach("edge-01", sink);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One store for the whole run (as the controller has); destroyed at exit (a static, not a
  // leaked pointer), so its temp dir goes with it.
  static World the_world;
  World* world = &the_world;
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  // The request: the bytes as an admin InvokeRequest, else the bytes as its args JSON.
  edge::admin::v1::InvokeRequest req;
  if (!req.ParseFromString(bytes)) {
    req.Clear();
    req.set_tool("exec");
    req.set_args_json(bytes);
  }
  if (req.node_id().empty()) req.set_node_id("edge-01");
  ctl::InvokeSpec spec{.node_id = req.node_id(),
                       .tool = req.tool(),
                       .args_json = req.args_json(),
                       .security_context = req.security_context(),
                       .deadline = std::chrono::milliseconds(req.deadline_ms())};
  const size_t sent_before = world->sink->sent.size();
  auto id = world->dispatcher->Invoke(spec, nullptr);
  if (!id) {
    if (id.error().message.empty()) __builtin_trap();  // every refusal says why
    if (world->sink->sent.size() != sent_before) __builtin_trap();
  } else {
    if (world->sink->sent.size() != sent_before + 1) __builtin_trap();
    const pb::EdgeCommand& cmd = world->sink->sent.back();
    if (!cmd.has_invoke_tool() || cmd.invoke_tool().command_id() != *id) __builtin_trap();
    if (cmd.invoke_tool().tool_name() != spec.tool) __builtin_trap();
    auto stored = world->store->GetCommand(*id);
    if (!stored || !*stored || (*stored)->tool != spec.tool) __builtin_trap();
    // The node answers with whatever the bytes make of an EdgeResult.
    pb::EdgeResult result;
    if (!result.ParseFromString(bytes)) result.mutable_err()->set_code("INTERNAL");
    world->dispatcher->OnResult("edge-01", *id, result);
    world->dispatcher->FlushResults();
    auto done = world->store->GetCommand(*id);
    if (!done || !*done) __builtin_trap();
    world->sink->sent.clear();
  }
  (void)ctl::CapabilitiesToJson(ctl::CapabilitiesFromJson(bytes));
  return 0;
}
