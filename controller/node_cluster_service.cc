#include "controller/node_cluster_service.h"

#include "common/grpc_status.h"
#include "common/log.h"
#include "controller/edge_stream.h"
#include "controller/peer_identity.h"

namespace edge::controller {

namespace pb = aegis::cluster::v1;

namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(st);
  return reactor;
}

void SetTimestamp(google::protobuf::Timestamp* t, int64_t ms) {
  t->set_seconds(ms / 1000);
  t->set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
}

}  // namespace

std::string NodeClusterServiceImpl::PeerAddress(const std::string& peer) {
  // "ipv4:1.2.3.4:port", "ipv6:[::1]:port", "unix:/path"
  if (peer.starts_with("unix:")) return peer;
  size_t colon = peer.rfind(':');
  if (colon == std::string::npos || colon < peer.find(':') + 1) return peer;
  return peer.substr(0, colon);
}

grpc::ServerUnaryReactor* NodeClusterServiceImpl::AttestNode(grpc::CallbackServerContext* ctx,
                                                             const pb::AttestNodeRequest* req,
                                                             pb::AttestNodeResponse* resp) {
  if (auto st = RequireNodeIdentity(*ctx, req->node_id()); !st.ok()) return Done(ctx, st);
  auto ch =
      attestation_.Attest(PeerAddress(ctx->peer()), req->node_id(), req->role(), req->public_key());
  if (!ch) {
    log::Get("edge")->warn("AttestNode of {} from {} refused: {}", log::Escape(req->node_id()),
                           log::Escape(ctx->peer()), log::Escape(ch.error().ToString(), 512));
    return Done(ctx, ToGrpcStatus(ch.error()));
  }
  resp->set_challenge_nonce(ch->nonce);
  resp->set_challenge_id(ch->challenge_id);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* NodeClusterServiceImpl::ChallengeNode(grpc::CallbackServerContext* ctx,
                                                                const pb::ChallengeNodeRequest* req,
                                                                pb::ChallengeNodeResponse* resp) {
  if (auto st = RequireNodeIdentity(*ctx, req->node_id()); !st.ok()) return Done(ctx, st);
  std::optional<std::string> proof;
  if (req->bootstrap_proof_case() == pb::ChallengeNodeRequest::kEnrollmentToken) {
    proof = req->enrollment_token();
  }
  auto grant = attestation_.Challenge(req->node_id(), req->challenge_id(),
                                      req->challenge_signature(), proof);
  if (!grant) {
    log::Get("edge")->warn("ChallengeNode of {} refused: {}", log::Escape(req->node_id()),
                           log::Escape(grant.error().ToString(), 512));
    return Done(ctx, ToGrpcStatus(grant.error()));
  }
  resp->set_node_security_token(grant->token);
  SetTimestamp(resp->mutable_expires_at(), grant->expires_at_ms);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerBidiReactor<pb::EdgeEvent, pb::EdgeCommand>* NodeClusterServiceImpl::ConnectEdge(
    grpc::CallbackServerContext* ctx) {
  return EdgeStream::Start(ctx, EdgeStreamDeps{.store = store_,
                                               .tokens = tokens_,
                                               .dispatcher = dispatcher_,
                                               .clock = clock_,
                                               .refusals = refusals_,
                                               .timers = stream_timers_,
                                               .output_stall_limit = output_stall_limit_});
}

grpc::ServerUnaryReactor* NodeClusterServiceImpl::RotateEdgeKey(grpc::CallbackServerContext* ctx,
                                                                const pb::RotateEdgeKeyRequest* req,
                                                                pb::RotateEdgeKeyResponse* resp) {
  auto cn = PeerCommonName(*ctx);
  if (!cn) {
    return Done(ctx, grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                  "a client certificate issued by this controller is required"));
  }
  auto grant = attestation_.Rotate(*cn, *req);
  if (!grant) {
    log::Get("edge")->warn("RotateEdgeKey of {} refused: {}", log::Escape(*cn),
                           log::Escape(grant.error().ToString(), 512));
    return Done(ctx, ToGrpcStatus(grant.error()));
  }
  resp->set_node_security_token(grant->token.token);
  SetTimestamp(resp->mutable_issued_at(), grant->token.issued_at_ms);
  SetTimestamp(resp->mutable_expires_at(), grant->token.expires_at_ms);
  resp->mutable_overlap_window()->set_seconds(grant->overlap_window.count());
  return Done(ctx, grpc::Status::OK);
}

}  // namespace edge::controller
