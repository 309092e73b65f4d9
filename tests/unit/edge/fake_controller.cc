#include "tests/unit/edge/fake_controller.h"

#include "agent/identity/envelope_codec.h"
#include "agent/identity/node_key.h"
#include "agent/identity/pkcs12.h"
#include "agent/identity/rotation_proof.h"
#include "common/grpc_write_queue.h"
#include "common/random.h"

namespace edge::agentedge::testing {
namespace {

Clock::WallTime RealNow() {
  return std::chrono::system_clock::now();
}

std::string PeerCn(grpc::CallbackServerContext* ctx) {
  auto cn = ctx->auth_context()->FindPropertyValues("x509_common_name");
  return cn.empty() ? "" : std::string(cn.front().data(), cn.front().size());
}

}  // namespace

class FakeController::Stream final
    : public grpc::ServerBidiReactor<pb::EdgeEvent, pb::EdgeCommand> {
 public:
  Stream(FakeController* owner, grpc::CallbackServerContext* ctx, int index)
      : owner_(owner), ctx_(ctx), index_(index) {}

  void Begin(std::optional<grpc::Status> refuse) {
    if (refuse) {
      End(*refuse);
      return;
    }
    StartRead(&in_);
  }
  void Send(const pb::EdgeCommand& c) { Apply(writes_.Push(c)); }
  void End(grpc::Status st) {
    Apply(writes_.FinishAfter(std::move(st), WriteQueue<pb::EdgeCommand>::Then::kWriteQueued));
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      if (!ctx_->IsCancelled()) owner_->OnHalfClose(index_);
      End(grpc::Status::OK);
      return;
    }
    owner_->OnEvent(index_, in_);
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override { Apply(writes_.WriteDone(ok)); }
  void Apply(WriteQueue<pb::EdgeCommand>::Step step) {
    if (step.write != nullptr) StartWrite(step.write);
    if (step.finish) Finish(*step.finish);
  }
  void OnDone() override {
    owner_->OnStreamDone(index_, this);
    delete this;
  }

 private:
  FakeController* owner_;
  grpc::CallbackServerContext* ctx_;
  int index_;
  pb::EdgeEvent in_;
  WriteQueue<pb::EdgeCommand> writes_;
};

FakeController::FakeController(Clock& clock, Options options)
    : clock_(clock), options_(std::move(options)) {
  ca_.emplace(*identity::CertificateAuthority::Create("fake controller CA", RealNow()));
  token_key_.emplace(*identity::EcSigningKey::Generate());
}

FakeController::~FakeController() {
  Shutdown();
}

std::string FakeController::Start() {
  auto server_cert = ca_->IssueServerCert({"fake.controller"}, RealNow());
  grpc::SslServerCredentialsOptions opts(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = ca_->cert_pem();
  opts.pem_key_cert_pairs.push_back(
      {server_cert->key_pem, server_cert->cert_pem + ca_->cert_pem()});
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(opts), &port);
  b.RegisterService(this);
  server_ = b.BuildAndStart();
  address_ = "127.0.0.1:" + std::to_string(port);
  return address_;
}

void FakeController::Shutdown() {
  if (!server_) return;
  {
    std::lock_guard lock(mu_);
    for (auto& [i, s] : live_)
      s->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake controller shutting down"));
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_.reset();
}

Status FakeController::WriteKeystore(const std::string& data_dir,
                                     const std::string& node_id) const {
  auto leaf = ca_->IssueNodeCert(node_id, RealNow());
  if (!leaf) return std::unexpected(leaf.error());
  const std::string password = identity::GeneratePkcs12Password();
  auto der = identity::CreatePkcs12(leaf->key_pem, leaf->cert_pem, ca_->cert_pem(), password);
  if (!der) return std::unexpected(der.error());
  return identity::KeystoreFiles::Write(data_dir, *der, password, ca_->cert_pem());
}

void FakeController::RegisterNode(const std::string& node_id, const std::string& public_key) {
  std::lock_guard lock(mu_);
  enrolled_.insert(node_id);
  keys_[node_id] = {public_key};
}

void FakeController::FailNext(const std::string& rpc, int n, grpc::Status status) {
  std::lock_guard lock(mu_);
  failures_[rpc].push_back({n, std::move(status)});
}

std::optional<grpc::Status> FakeController::TakeFailure(const std::string& rpc) {
  auto& list = failures_[rpc];
  if (list.empty()) return std::nullopt;
  grpc::Status st = list.front().second;
  if (--list.front().first <= 0) list.erase(list.begin());
  return st;
}

int FakeController::Calls(const std::string& rpc) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find(rpc);
  return it == calls_.end() ? 0 : it->second;
}

std::vector<std::string> FakeController::ProofsSeen() const {
  std::lock_guard lock(mu_);
  return proofs_;
}

std::vector<std::string> FakeController::Keys(const std::string& node_id) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(node_id);
  return it == keys_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> FakeController::IssuedTokens() const {
  std::lock_guard lock(mu_);
  return issued_;
}

std::string FakeController::IssueToken(const std::string& node_id) {
  const int64_t now = ToEpochMillis(clock_.Now()) / 1000;
  nlohmann::json claims = {
      {"iss", "fake-controller"}, {"sub", node_id}, {"role", "edge"},
      {"tid", options_.tenant},   {"iat", now},     {"exp", now + options_.token_ttl.count()},
      {"jti", NewUuidV4()}};
  std::string token = *identity::SignJwtEs256(claims, *token_key_);
  issued_.push_back(token);
  return token;
}

bool FakeController::TokenValid(const std::string& token) const {
  return std::find(issued_.begin(), issued_.end(), token) != issued_.end() &&
         !revoked_.contains(token);
}

grpc::Status FakeController::DoAttest(grpc::CallbackServerContext* ctx,
                                      const pb::AttestNodeRequest& req,
                                      pb::AttestNodeResponse* resp) {
  std::lock_guard lock(mu_);
  ++calls_["AttestNode"];
  if (auto f = TakeFailure("AttestNode")) return *f;
  if (PeerCn(ctx) != req.node_id()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "node_id is not the certificate's");
  }
  if (req.role() != pb::NODE_ROLE_EDGE || !req.has_capabilities()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "role must be EDGE, caps present");
  }
  if (req.public_key().size() != 32) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "public_key must be 32 bytes");
  }
  const std::string id = NewUuidV4();
  Challenge c{req.node_id(), SecureRandomBytes(32), req.public_key()};
  resp->set_challenge_nonce(c.nonce);
  resp->set_challenge_id(id);
  challenges_[id] = std::move(c);
  return grpc::Status::OK;
}

grpc::Status FakeController::DoChallenge(grpc::CallbackServerContext* ctx,
                                         const pb::ChallengeNodeRequest& req,
                                         pb::ChallengeNodeResponse* resp) {
  std::lock_guard lock(mu_);
  ++calls_["ChallengeNode"];
  if (auto f = TakeFailure("ChallengeNode")) return *f;
  auto it = challenges_.find(req.challenge_id());
  if (it == challenges_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown challenge");
  }
  Challenge c = it->second;
  challenges_.erase(it);
  if (c.node_id != req.node_id() || PeerCn(ctx) != req.node_id()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "challenge of another node");
  }
  if (!identity::NodeKey::Verify(c.public_key, c.nonce, req.challenge_signature())) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad challenge signature");
  }
  const bool has_proof = req.bootstrap_proof_case() == pb::ChallengeNodeRequest::kEnrollmentToken;
  proofs_.push_back(has_proof ? req.enrollment_token() : "");
  if (has_proof) {
    if (enrolled_.contains(req.node_id())) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "enrollment token already used");
    }
    if (options_.join_token.empty() || req.enrollment_token() != options_.join_token) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "unknown enrollment token");
    }
    enrolled_.insert(req.node_id());
    keys_[req.node_id()] = {c.public_key};
  } else {
    if (!enrolled_.contains(req.node_id())) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "node is not edge-enrolled");
    }
    const auto& keys = keys_[req.node_id()];
    if (std::find(keys.begin(), keys.end(), c.public_key) == keys.end()) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "not the node's registered key");
    }
  }
  resp->set_node_security_token(IssueToken(req.node_id()));
  resp->mutable_expires_at()->set_seconds(ToEpochMillis(clock_.Now()) / 1000 +
                                          options_.token_ttl.count());
  return grpc::Status::OK;
}

grpc::Status FakeController::DoRotate(grpc::CallbackServerContext* ctx,
                                      const pb::RotateEdgeKeyRequest& req,
                                      pb::RotateEdgeKeyResponse* resp) {
  std::lock_guard lock(mu_);
  ++calls_["RotateEdgeKey"];
  if (auto f = TakeFailure("RotateEdgeKey")) return *f;
  const std::string node = PeerCn(ctx);
  auto& keys = keys_[node];
  auto inner = identity::RotationProof::Verify(req, node, keys);
  if (!inner) {
    return grpc::Status(inner.error().code == ErrorCode::kUnauthenticated
                            ? grpc::StatusCode::UNAUTHENTICATED
                            : grpc::StatusCode::INVALID_ARGUMENT,
                        inner.error().message);
  }
  const std::string& old_token = req.current_envelope().node_security_token();
  if (!TokenValid(old_token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "envelope token is not valid");
  }
  revoked_.insert(old_token);
  if (req.new_public_key() != keys.front()) {
    keys.insert(keys.begin(), req.new_public_key());  // the old key stays for the overlap
  }
  const int64_t now = ToEpochMillis(clock_.Now()) / 1000;
  resp->set_node_security_token(IssueToken(node));
  resp->mutable_issued_at()->set_seconds(now);
  resp->mutable_expires_at()->set_seconds(now + options_.token_ttl.count());
  resp->mutable_overlap_window()->set_seconds(60);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* FakeController::AttestNode(grpc::CallbackServerContext* ctx,
                                                     const pb::AttestNodeRequest* req,
                                                     pb::AttestNodeResponse* resp) {
  auto* r = ctx->DefaultReactor();
  r->Finish(DoAttest(ctx, *req, resp));
  return r;
}

grpc::ServerUnaryReactor* FakeController::ChallengeNode(grpc::CallbackServerContext* ctx,
                                                        const pb::ChallengeNodeRequest* req,
                                                        pb::ChallengeNodeResponse* resp) {
  auto* r = ctx->DefaultReactor();
  r->Finish(DoChallenge(ctx, *req, resp));
  return r;
}

grpc::ServerUnaryReactor* FakeController::RotateEdgeKey(grpc::CallbackServerContext* ctx,
                                                        const pb::RotateEdgeKeyRequest* req,
                                                        pb::RotateEdgeKeyResponse* resp) {
  auto* r = ctx->DefaultReactor();
  r->Finish(DoRotate(ctx, *req, resp));
  return r;
}

grpc::ServerBidiReactor<pb::EdgeEvent, pb::EdgeCommand>* FakeController::ConnectEdge(
    grpc::CallbackServerContext* ctx) {
  std::optional<grpc::Status> refuse;
  Stream* s = nullptr;
  {
    std::lock_guard lock(mu_);
    ++calls_["ConnectEdge"];
    StreamLog log;
    log.index = next_id_++;
    log.peer_cn = PeerCn(ctx);
    for (const auto& [k, v] : ctx->client_metadata()) {
      if (std::string(k.data(), k.size()) == "authorization") {
        std::string value(v.data(), v.size());
        if (value.starts_with("Bearer ")) log.bearer = value.substr(7);
      }
    }
    refuse = TakeFailure("ConnectEdge");
    if (!refuse && !TokenValid(log.bearer)) {
      refuse = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bearer token is not valid");
    }
    s = new Stream(this, ctx, log.index);
    if (!refuse) live_[log.index] = s;
    log.done = refuse.has_value();
    streams_.push_back(std::move(log));
    cv_.notify_all();
  }
  s->Begin(refuse);
  return s;
}

void FakeController::OnEvent(int index, const pb::EdgeEvent& event) {
  std::lock_guard lock(mu_);
  StreamLog& log = streams_[index - 1];
  if (log.events.empty()) {
    if (event.event_case() != pb::EdgeEvent::kHello) {
      log.verify_errors.push_back("the first event is not a Hello");
    } else {
      log.stream_id = event.hello().stream_id();
    }
  }
  const auto& keys = keys_[log.peer_cn];
  auto verified =
      identity::EnvelopeCodec::VerifyEvent(event, log.peer_cn, log.stream_id, keys, clock_.Now());
  if (!verified) log.verify_errors.push_back(verified.error().ToString());
  const pb::SealNodeEnvelope* env = identity::EnvelopeCodec::EnvelopeOf(event);
  const std::string token = env ? env->node_security_token() : "";
  if (!TokenValid(token)) log.verify_errors.push_back("envelope token is not a valid token");
  log.envelope_tokens.push_back(token);
  log.events.push_back(event);
  cv_.notify_all();
}

void FakeController::OnHalfClose(int index) {
  std::lock_guard lock(mu_);
  streams_[index - 1].half_closed = true;
  cv_.notify_all();
}

void FakeController::OnStreamDone(int index, Stream* stream) {
  std::lock_guard lock(mu_);
  auto it = live_.find(index);
  if (it != live_.end() && it->second == stream) live_.erase(it);
  streams_[index - 1].done = true;
  cv_.notify_all();
}

std::vector<FakeController::StreamLog> FakeController::Streams() const {
  std::lock_guard lock(mu_);
  return streams_;
}

bool FakeController::WaitFor(const std::function<bool(const std::vector<StreamLog>&)>& pred,
                             std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pred(streams_); });
}

bool FakeController::Send(const pb::EdgeCommand& command) {
  std::lock_guard lock(mu_);
  if (live_.empty()) return false;
  live_.rbegin()->second->Send(command);
  return true;
}

void FakeController::EndStream(grpc::Status status) {
  std::lock_guard lock(mu_);
  if (!live_.empty()) live_.rbegin()->second->End(std::move(status));
}

}  // namespace edge::agentedge::testing
