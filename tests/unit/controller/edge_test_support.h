// Test support for the controller's edge stream: a real Controller in-process (TLS gRPC on
// 127.0.0.1:0, admin socket in a temp dir, ManualClock starting two hours before the real time so
// the certificates it issues are valid for TLS) and TestNode, a node driven by hand with the
// identity helpers — it enrolls through ExchangeJoinToken (a real keystore), holds an Ed25519
// NodeKey, attests, and opens ConnectEdge with a synchronous client whose reads are
// collected by a thread (tests wait on them with a deadline, never sleep for timing).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "admin.grpc.pb.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/envelope_codec.h"
#include "agent/identity/jwt.h"
#include "agent/identity/node_key.h"
#include "agent/identity/pkcs12.h"
#include "bootstrap.grpc.pb.h"
#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/random.h"
#include "controller/admin_server.h"
#include "controller/controller.h"
#include "node_cluster.grpc.pb.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace edge::controller::testing {

namespace pb = aegis::cluster::v1;
namespace apb = edge::admin::v1;
using namespace std::chrono_literals;

inline std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds d = 10s) {
  return std::chrono::system_clock::now() + d;
}

// A ConnectEdge stream from the node's side.
class TestStream {
 public:
  TestStream(pb::NodeClusterService::Stub& stub, const std::string& bearer) {
    if (!bearer.empty()) ctx_.AddMetadata("authorization", "Bearer " + bearer);
    ctx_.set_deadline(Deadline(60s));
    stream_ = stub.ConnectEdge(&ctx_);
    reader_ = std::thread([this] {
      pb::EdgeCommand cmd;
      while (stream_->Read(&cmd)) {
        std::lock_guard lock(mu_);
        commands_.push_back(cmd);
        cv_.notify_all();
      }
      std::lock_guard lock(mu_);
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~TestStream() {
    ctx_.TryCancel();
    if (reader_.joinable()) reader_.join();
    if (!finished_) stream_->Finish();
  }
  bool Write(const pb::EdgeEvent& e) { return stream_->Write(e); }
  // The next command from the controller, or nullopt when none came within `wait`.
  std::optional<pb::EdgeCommand> Next(std::chrono::milliseconds wait = 10s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !commands_.empty() || ended_; });
    if (commands_.empty()) return std::nullopt;
    auto c = commands_.front();
    commands_.pop_front();
    return c;
  }
  // Waits for the controller to end the stream and returns its status.
  grpc::Status Finish(std::chrono::milliseconds wait = 10s) {
    {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, wait, [&] { return ended_; })) {
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the stream did not end");
      }
    }
    reader_.join();
    finished_ = true;
    return stream_->Finish();
  }
  bool Ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::EdgeEvent, pb::EdgeCommand>> stream_;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<pb::EdgeCommand> commands_;
  bool ended_ = false;
  bool finished_ = false;
};

// An enrolled node: keystore (mTLS), Ed25519 key, its current token.
struct TestNode {
  std::string id;
  std::string join_token;
  identity::TlsIdentity tls;
  std::optional<identity::NodeKey> key;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::NodeClusterService::Stub> stub;
  std::string token;
  Clock* clock = nullptr;

  grpc::Status Attest(pb::AttestNodeResponse* resp, const std::string& public_key,
                      pb::NodeRole role = pb::NODE_ROLE_EDGE, const std::string& as = "") {
    pb::AttestNodeRequest req;
    req.set_node_id(as.empty() ? id : as);
    req.set_role(role);
    req.set_public_key(public_key);
    req.mutable_capabilities();
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return stub->AttestNode(&ctx, req, resp);
  }
  grpc::Status Challenge(const pb::AttestNodeResponse& ch, const std::string& signature,
                         const std::optional<std::string>& proof, pb::ChallengeNodeResponse* resp) {
    pb::ChallengeNodeRequest req;
    req.set_challenge_id(ch.challenge_id());
    req.set_node_id(id);
    req.set_challenge_signature(signature);
    if (proof) req.set_enrollment_token(*proof);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return stub->ChallengeNode(&ctx, req, resp);
  }
  // AttestNode + ChallengeNode with this node's key; stores the token on success.
  grpc::Status Handshake(const std::optional<std::string>& proof) {
    pb::AttestNodeResponse ch;
    auto st = Attest(&ch, key->public_key());
    if (!st.ok()) return st;
    pb::ChallengeNodeResponse resp;
    st = Challenge(ch, *key->Sign(ch.challenge_nonce()), proof, &resp);
    if (st.ok()) token = resp.node_security_token();
    return st;
  }

  std::unique_ptr<TestStream> Open(const std::string& bearer) {
    return std::make_unique<TestStream>(*stub, bearer);
  }
  // Seals `e` for `stream_id` with this node's key (or `signer`) and token (or `tok`), at
  // the controller's clock plus `skew`.
  pb::EdgeEvent Sealed(pb::EdgeEvent e, const std::string& stream_id,
                       const identity::NodeKey* signer = nullptr, const std::string& tok = "",
                       std::chrono::milliseconds skew = 0ms) {
    auto st = identity::EnvelopeCodec::SealEvent(
        e, signer ? *signer : *key, tok.empty() ? token : tok, clock->Now() + skew, id, stream_id);
    EXPECT_TRUE(st) << st.error().ToString();
    return e;
  }
  pb::EdgeEvent Hello(const std::string& stream_id, const identity::NodeKey* signer = nullptr,
                      const std::string& tok = "", std::chrono::milliseconds skew = 0ms) {
    pb::EdgeEvent e;
    e.mutable_hello()->set_stream_id(stream_id);
    auto* caps = e.mutable_hello()->mutable_capabilities();
    caps->set_os("linux");
    caps->set_arch("x86_64");
    caps->add_local_tools("exec");
    caps->add_local_tools("sysinfo");
    caps->add_mount_points("/srv");
    (*caps->mutable_custom_labels())["zone"] = "a";
    return Sealed(e, stream_id, signer, tok, skew);
  }
  pb::EdgeEvent Heartbeat(const std::string& stream_id, const identity::NodeKey* signer = nullptr,
                          const std::string& tok = "", std::chrono::milliseconds skew = 0ms) {
    pb::EdgeEvent e;
    e.mutable_heartbeat()->mutable_sent_at()->set_seconds(
        std::chrono::duration_cast<std::chrono::seconds>(clock->Now().time_since_epoch()).count());
    return Sealed(e, stream_id, signer, tok, skew);
  }
  pb::EdgeEvent Progress(const std::string& stream_id, const std::string& command_id,
                         const std::string& out) {
    pb::EdgeEvent e;
    e.mutable_command_progress()->set_command_id(command_id);
    e.mutable_command_progress()->mutable_chunk()->set_stdout(out);
    return Sealed(e, stream_id);
  }
  pb::EdgeEvent Result(const std::string& stream_id, const std::string& command_id, int exit_code) {
    pb::EdgeEvent e;
    e.mutable_command_result()->set_command_id(command_id);
    auto* ok = e.mutable_command_result()->mutable_result()->mutable_ok();
    ok->set_exit_code(exit_code);
    ok->mutable_duration()->set_seconds(2);
    google::protobuf::Struct payload;
    (*payload.mutable_fields())["stdout"].set_string_value("hi\n");
    ok->mutable_payload()->PackFrom(payload);
    return Sealed(e, stream_id);
  }
};

class ControllerHarness : public ::testing::Test {
 protected:
  void SetUp() override { StartController(); }
  void TearDown() override { controller_.reset(); }

  config::ControllerConfig Config() {
    config::ControllerConfig c;
    c.data_dir = dir_ + "/data";
    c.grpc.listen = "127.0.0.1:" + std::to_string(port_);
    c.grpc.advertise = c.grpc.listen;
    c.admin.socket = dir_ + "/admin.sock";
    if (max_message_bytes_ != 0) c.grpc.max_message_bytes = max_message_bytes_;
    c.grpc.reflection = reflection_;
    return c;
  }
  void StartController() {
    controller_ = std::make_unique<Controller>(Config(), "test", clock_);
    auto st = controller_->Start();
    ASSERT_TRUE(st) << st.error().ToString();
    port_ = controller_->grpc_port();
    target_ = "127.0.0.1:" + std::to_string(port_);
    admin_ = apb::AdminService::NewStub(AdminChannel(dir_ + "/admin.sock"));
  }
  // Stops and starts the controller on the same data dir and port (a restart).
  void RestartController() {
    controller_.reset();
    StartController();
  }

  std::string CreateJoinToken(const std::string& node, const std::string& tenant = "t1",
                              bool replace = false) {
    apb::CreateJoinTokenRequest req;
    req.set_node_id(node);
    req.set_tenant_id(tenant);
    req.set_replace(replace);
    apb::CreateJoinTokenResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    auto st = admin_->CreateJoinToken(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.join_token();
  }

  // ExchangeJoinToken over TLS without a client certificate.
  grpc::Status Exchange(const std::string& token, const std::string& id,
                        me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse* resp) {
    auto boot = me::prexorjustin::prexorcloud::protocol::BootstrapService::NewStub(
        identity::ChannelFactory::TlsNoClientCert(target_, controller_->ca_pem()));
    me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenRequest req;
    req.set_join_token(token);
    req.set_node_id(id);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return boot->ExchangeJoinToken(&ctx, req, resp);
  }

  // ExchangeJoinToken (a real keystore) + a fresh NodeKey; no attestation yet. `token`
  // empty = a fresh token bound to `id`.
  std::unique_ptr<TestNode> NewNode(const std::string& id, const std::string& tenant = "t1",
                                    const std::string& token = "") {
    auto node = std::make_unique<TestNode>();
    node->id = id;
    node->clock = &clock_;
    node->join_token = token.empty() ? CreateJoinToken(id, tenant) : token;
    me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse resp;
    auto st = Exchange(node->join_token, id, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    auto ks = identity::ParsePkcs12(resp.pkcs12(), resp.pkcs12_password());
    EXPECT_TRUE(ks) << ks.error().ToString();
    node->tls =
        identity::TlsIdentity{ks->key_pem, ks->cert_pem + ks->chain_pem, resp.ca_certificate_pem()};
    node->channel = identity::ChannelFactory(node->tls).Mtls(target_);
    node->stub = pb::NodeClusterService::NewStub(node->channel);
    node->key.emplace(*identity::NodeKey::Generate());
    return node;
  }
  // NewNode + the first attestation with the join token as proof.
  std::unique_ptr<TestNode> EnrolledNode(const std::string& id, const std::string& tenant = "t1") {
    auto node = NewNode(id, tenant);
    auto st = node->Handshake(node->join_token);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return node;
  }

  // The controller's token-signing key (to forge tokens that differ in one claim only).
  identity::EcSigningKey TokenKey() {
    auto pem = ReadFile(dir_ + "/data/ca/token.key", 1 << 20);
    return *identity::EcSigningKey::FromPem(*pem);
  }

  std::optional<apb::NodeInfo> NodeInfo(const std::string& id) {
    apb::ListNodesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    auto st = admin_->ListNodes(&ctx, {}, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    for (const auto& n : resp.nodes())
      if (n.node_id() == id) return n;
    return std::nullopt;
  }
  // Waits (bounded) until `pred` holds; the controller works on its own threads.
  template <typename Pred>
  bool WaitFor(Pred pred, std::chrono::milliseconds wait = 10s) {
    return edge::testing::WaitUntil(pred, wait);
  }
  bool WaitConnected(const std::string& id, bool connected = true) {
    return WaitFor([&] { return controller_->dispatcher().IsConnected(id) == connected; });
  }

  edge::testing::TempDir tmp_{"ctl-edge"};
  std::string dir_ = tmp_.path();
  // Two hours behind the real time: certificates it issues are valid for TLS (which checks
  // the real time) however far a test advances it, up to two hours.
  ManualClock clock_{std::chrono::system_clock::now() - std::chrono::hours(2)};
  int port_ = 0;
  uint64_t max_message_bytes_ = 0;  // grpc.max_message_bytes for the next start; 0 = default
  bool reflection_ = true;          // grpc.reflection for the next start
  std::string target_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<apb::AdminService::Stub> admin_;
};

}  // namespace edge::controller::testing
