// EdgeFleetFixture: the controller's edge parts for unit tests — a real SQLite store in a temp
// dir, node and join token issuers, a Dispatcher whose node stream is a RecordingStream (what
// was sent to the node), an EdgeFleet, a ManualClock. EnrollEdge01() enrolls and attaches a
// node. Owns everything it creates.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/identity/jwt.h"
#include "controller/edge_codec.h"
#include "controller/edge_fleet.h"
#include "controller/node_tokens.h"
#include "controller/sqlite_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::controller {

class RecordingStream : public CommandSink {
 public:
  bool Send(const aegis::cluster::v1::EdgeCommand& command) override {
    if (refuse) return false;
    sent.push_back(command);
    return true;
  }
  void Close(const grpc::Status& status) override { closed = status; }
  std::vector<aegis::cluster::v1::EdgeCommand> sent;
  std::optional<grpc::Status> closed;
  bool refuse = false;  // true: as a stream that ended (Send fails)
};

class EdgeFleetFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::Open(dir_ / "c.db");
    ASSERT_TRUE(store) << store.error().ToString();
    store_ = std::move(*store);
    key_.emplace(*identity::EcSigningKey::Generate());
    node_tokens_ =
        std::make_unique<NodeTokenAuthority>(*store_, *key_, clock_, NodeTokenSettings{});
    join_tokens_ = std::make_unique<JoinTokenIssuer>(*store_, *key_, clock_, JoinTokenSettings{});
    dispatcher_ = std::make_unique<Dispatcher>(*store_, *node_tokens_, clock_);
    fleet_ = std::make_unique<EdgeFleet>(*store_, *join_tokens_, *dispatcher_, clock_);
  }
  // `node` of `tenant`: enrolled on the edge stream and reporting `caps` in a Hello now;
  // `stream` (when set) attached as its stream.
  void EnrollNode(const std::string& node, const std::string& tenant,
                  const aegis::cluster::v1::EdgeCapabilities& caps,
                  std::shared_ptr<RecordingStream> stream) {
    const int64_t now = ToEpochMillis(clock_.Now());
    ASSERT_TRUE(store_->InsertJoinToken({.token_id = "jt-" + node,
                                         .token_hash = "h-" + node,
                                         .tenant_id = tenant,
                                         .created_at_ms = now,
                                         .expires_at_ms = now + 3'600'000}));
    auto token = node_tokens_->Mint(node, tenant);
    ASSERT_TRUE(token);
    auto enrolled = store_->EnrollEdgeNode({.jti = "jt-" + node,
                                            .join_token_hash = "h-" + node,
                                            .node_id = node,
                                            .tenant_id = tenant,
                                            .public_key = std::string(32, 'k'),
                                            .now_ms = now,
                                            .token = token->record});
    ASSERT_TRUE(enrolled) << enrolled.error().ToString();
    ASSERT_TRUE(store_->RecordHello(node, CapabilitiesToJson(caps), false, now));
    if (stream) dispatcher_->Attach(node, std::move(stream));
  }
  // edge-01 of tenant t1 on linux with `tools` and `labels`, its stream `stream_`.
  void EnrollEdge01(const std::vector<std::string>& tools = {"exec"},
                    const std::map<std::string, std::string>& labels = {{"site", "lab"}}) {
    aegis::cluster::v1::EdgeCapabilities caps;
    caps.set_os("linux");
    for (const auto& t : tools)
      caps.add_local_tools(t);
    caps.mutable_custom_labels()->insert(labels.begin(), labels.end());
    EnrollNode("edge-01", "t1", caps, stream_);
  }

  edge::testing::TempDir dir_{"fleet"};
  ManualClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::optional<identity::EcSigningKey> key_;
  std::unique_ptr<NodeTokenAuthority> node_tokens_;
  std::unique_ptr<JoinTokenIssuer> join_tokens_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<EdgeFleet> fleet_;
  std::shared_ptr<RecordingStream> stream_ = std::make_shared<RecordingStream>();
};

}  // namespace edge::controller
