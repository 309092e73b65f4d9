#include "tests/controller/node_cluster_service.h"

#include "common/random.h"
#include "tests/controller/peer_identity.h"

namespace edge::controller {

namespace pb = aegis::cluster::v1;

grpc::ServerUnaryReactor* NodeClusterServiceImpl::AttestNode(grpc::CallbackServerContext* ctx,
                                                             const pb::AttestNodeRequest* req,
                                                             pb::AttestNodeResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (auto st = RequireNodeIdentity(*ctx, req->node_id()); !st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  if (req->role() != pb::NODE_ROLE_EDGE) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "role must be NODE_ROLE_EDGE"));
    return reactor;
  }
  if (req->public_key().size() != 32) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "public_key must be a raw 32-byte Ed25519 key, got " +
                                     std::to_string(req->public_key().size()) + " bytes"));
    return reactor;
  }
  Challenge ch{req->node_id(), SecureRandomBytes(32), req->public_key(),
               clock_.Now() + std::chrono::seconds(300)};
  const std::string id = NewUuidV4();
  resp->set_challenge_nonce(ch.nonce);
  resp->set_challenge_id(id);
  {
    std::lock_guard lock(mu_);
    const auto now = clock_.Now();
    std::erase_if(challenges_, [&](const auto& kv) { return kv.second.expires_at <= now; });
    challenges_[id] = std::move(ch);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace edge::controller
