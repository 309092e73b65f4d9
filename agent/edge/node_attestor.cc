#include "agent/edge/node_attestor.h"

#include <google/protobuf/util/time_util.h>

#include "agent/edge/enrollment_files.h"
#include "agent/identity/rotation_proof.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace edge::agentedge {

namespace pb = aegis::cluster::v1;

class NodeAttestor::Call {
 public:
  Call(NodeAttestor& owner, std::chrono::milliseconds timeout) : owner_(owner) {
    ctx_.set_deadline(std::chrono::system_clock::now() + timeout);
    std::lock_guard lock(owner_.mu_);
    cancelled_ = owner_.cancelled_;
    owner_.in_flight_.insert(&ctx_);
  }
  ~Call() {
    std::lock_guard lock(owner_.mu_);
    owner_.in_flight_.erase(&ctx_);
  }
  grpc::ClientContext* ctx() { return &ctx_; }
  bool cancelled() const { return cancelled_; }

 private:
  NodeAttestor& owner_;
  grpc::ClientContext ctx_;
  bool cancelled_ = false;
};

NodeAttestor::NodeAttestor(std::shared_ptr<grpc::Channel> channel, std::string node_id,
                           std::string data_dir, Clock& clock, Options options)
    : stub_(pb::NodeClusterService::NewStub(std::move(channel))),
      node_id_(std::move(node_id)),
      data_dir_(std::move(data_dir)),
      clock_(clock),
      options_(options) {}

void NodeAttestor::CancelInFlight() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  for (auto* ctx : in_flight_)
    ctx->TryCancel();
}

void NodeAttestor::Reset() {
  std::lock_guard lock(mu_);
  cancelled_ = false;
}

Result<NodeToken> NodeAttestor::AttestOnce(const identity::NodeKey& key, const std::string& proof) {
  pb::AttestNodeRequest areq;
  areq.set_node_id(node_id_);
  areq.set_role(pb::NODE_ROLE_EDGE);
  areq.set_public_key(key.public_key());
  areq.mutable_capabilities();  // present, may be empty (wire.md §2.3)
  pb::AttestNodeResponse aresp;
  {
    Call call(*this, options_.rpc_timeout);
    if (call.cancelled()) return MakeError(ErrorCode::kCancelled, "AttestNode: stopping");
    auto st = stub_->AttestNode(call.ctx(), areq, &aresp);
    if (!st.ok()) return std::unexpected(FromGrpcStatus(st, "AttestNode"));
  }
  if (aresp.challenge_nonce().empty() || aresp.challenge_id().empty()) {
    return MakeError(ErrorCode::kInternal,
                     std::string("AttestNode: the controller's answer has an empty ") +
                         (aresp.challenge_nonce().empty() ? "challenge_nonce" : "challenge_id") +
                         " (both are required)");
  }
  auto sig = key.Sign(aresp.challenge_nonce());
  if (!sig) return std::unexpected(sig.error());
  pb::ChallengeNodeRequest creq;
  creq.set_challenge_id(aresp.challenge_id());
  creq.set_node_id(node_id_);
  creq.set_challenge_signature(*sig);
  if (!proof.empty()) creq.set_enrollment_token(proof);
  pb::ChallengeNodeResponse cresp;
  {
    Call call(*this, options_.rpc_timeout);
    if (call.cancelled()) return MakeError(ErrorCode::kCancelled, "ChallengeNode: stopping");
    auto st = stub_->ChallengeNode(call.ctx(), creq, &cresp);
    if (!st.ok()) return std::unexpected(FromGrpcStatus(st, "ChallengeNode"));
  }
  auto token = NodeToken::Parse(cresp.node_security_token(), node_id_, clock_.Now());
  if (!token) {
    return MakeError(ErrorCode::kInternal,
                     "ChallengeNode returned an unusable token: " + token.error().message);
  }
  return token;
}

Result<NodeToken> NodeAttestor::Attest(const identity::NodeKey& key,
                                       const std::string& enrollment_token) {
  auto log = log::Get("edge");
  std::string proof = enrollment_token;
  bool from_file = false;
  if (proof.empty()) {
    auto pending = EnrollmentFiles::ReadPendingToken(data_dir_);
    if (!pending) return std::unexpected(pending.error());
    if (pending->has_value()) {
      proof = **pending;
      from_file = true;
    }
  }
  auto token = AttestOnce(key, proof);
  if (!token && !proof.empty() && token.error().code == ErrorCode::kFailedPrecondition) {
    // The token may already have been redeemed for this node (an answer lost on the way):
    // an enrolled node attests without proof.
    log->warn("edge enrollment proof refused ({}); attesting without it", token.error().message);
    token = AttestOnce(key, "");
  }
  if (!token) return token;
  if (!proof.empty()) {
    log->info("edge enrollment of node {} completed (tenant {})", node_id_, token->tenant_id);
    if (from_file) {
      if (auto st = EnrollmentFiles::RemovePendingToken(data_dir_); !st) {
        log->warn("could not delete the pending join token: {}", st.error().message);
      }
    }
  }
  return token;
}

Result<NodeAttestor::Rotation> NodeAttestor::Rotate(const identity::NodeKey& old_key,
                                                    const identity::NodeKey& new_key,
                                                    const NodeToken& current) {
  auto req = identity::RotationProof::Build(old_key, new_key, node_id_, current.token);
  if (!req) return std::unexpected(req.error());
  pb::RotateEdgeKeyResponse resp;
  {
    Call call(*this, options_.rpc_timeout);
    if (call.cancelled()) return MakeError(ErrorCode::kCancelled, "RotateEdgeKey: stopping");
    auto st = stub_->RotateEdgeKey(call.ctx(), *req, &resp);
    if (!st.ok()) return std::unexpected(FromGrpcStatus(st, "RotateEdgeKey"));
  }
  auto token = NodeToken::Parse(resp.node_security_token(), node_id_, clock_.Now());
  if (!token) {
    return MakeError(ErrorCode::kInternal,
                     "RotateEdgeKey returned an unusable token: " + token.error().message);
  }
  Rotation r{std::move(*token), std::chrono::milliseconds(0)};
  if (resp.has_overlap_window()) {
    r.overlap_window = std::chrono::milliseconds(
        google::protobuf::util::TimeUtil::DurationToMilliseconds(resp.overlap_window()));
  }
  return r;
}

Result<NodeToken> NodeAttestor::Renew(const identity::NodeKey& key, const NodeToken& current) {
  auto rotated = Rotate(key, key, current);
  if (rotated) return std::move(rotated->token);
  if (rotated.error().code == ErrorCode::kCancelled) return std::unexpected(rotated.error());
  log::Get("edge")->warn("token refresh failed ({}); attesting again", rotated.error().message);
  return Attest(key);
}

}  // namespace edge::agentedge
