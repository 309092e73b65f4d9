#include "tests/controller/admin_service.h"

#include "common/log.h"
#include "tests/controller/grpc_status.h"

namespace edge::controller {

namespace pb = edge::admin::v1;

namespace {
grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(st);
  return reactor;
}
}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::Status(grpc::CallbackServerContext* ctx,
                                                   const pb::StatusRequest*,
                                                   pb::StatusResponse* resp) {
  resp->set_version(info_.version);
  resp->set_started_at_epoch_ms(ToEpochMillis(info_.started_at));
  resp->set_grpc_listen(info_.grpc_listen);
  resp->set_advertise(info_.advertise);
  resp->set_ca_pin(info_.ca_pin);
  resp->set_data_dir(info_.data_dir);
  if (auto nodes = store_.ListNodes()) resp->set_nodes(static_cast<uint32_t>(nodes->size()));
  if (auto toks = store_.ListJoinTokens(false, ToEpochMillis(clock_.Now()))) {
    resp->set_active_join_tokens(static_cast<uint32_t>(toks->size()));
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateJoinToken(grpc::CallbackServerContext* ctx,
                                                            const pb::CreateJoinTokenRequest* req,
                                                            pb::CreateJoinTokenResponse* resp) {
  auto minted =
      tokens_.Create(req->node_id(), req->tenant_id(), std::chrono::seconds(req->ttl_seconds()));
  if (!minted) return Done(ctx, ToGrpcStatus(minted.error()));
  resp->set_token_id(minted->token_id);
  resp->set_join_token(minted->token);
  resp->set_expires_at_epoch_ms(minted->expires_at_ms);
  log::Get("admin")->info("join token {} created (node \"{}\", tenant \"{}\")", minted->token_id,
                          req->node_id(), req->tenant_id());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RevokeJoinToken(grpc::CallbackServerContext* ctx,
                                                            const pb::RevokeJoinTokenRequest* req,
                                                            pb::RevokeJoinTokenResponse*) {
  if (req->token_id().empty()) {
    return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "token_id is required"));
  }
  if (auto st = store_.RevokeJoinToken(req->token_id(), ToEpochMillis(clock_.Now())); !st) {
    return Done(ctx, ToGrpcStatus(st.error()));
  }
  log::Get("admin")->info("join token {} revoked", req->token_id());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListJoinTokens(grpc::CallbackServerContext* ctx,
                                                           const pb::ListJoinTokensRequest* req,
                                                           pb::ListJoinTokensResponse* resp) {
  auto toks = store_.ListJoinTokens(req->include_inactive(), ToEpochMillis(clock_.Now()));
  if (!toks) return Done(ctx, ToGrpcStatus(toks.error()));
  for (const auto& t : *toks) {
    auto* out = resp->add_tokens();
    out->set_token_id(t.token_id);
    out->set_node_id(t.node_id);
    out->set_tenant_id(t.tenant_id);
    out->set_created_at_epoch_ms(t.created_at_ms);
    out->set_expires_at_epoch_ms(t.expires_at_ms);
    out->set_consumed_at_epoch_ms(t.consumed_at_ms);
    out->set_revoked_at_epoch_ms(t.revoked_at_ms);
    out->set_consumed_by_node_id(t.consumed_by);
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListNodes(grpc::CallbackServerContext* ctx,
                                                      const pb::ListNodesRequest*,
                                                      pb::ListNodesResponse* resp) {
  auto nodes = store_.ListNodes();
  if (!nodes) return Done(ctx, ToGrpcStatus(nodes.error()));
  for (const auto& n : *nodes) {
    auto* out = resp->add_nodes();
    out->set_node_id(n.node_id);
    out->set_tenant_id(n.tenant_id);
    out->set_state(n.state);
    out->set_cert_serial_hex(n.cert_serial_hex);
    out->set_enrolled_at_epoch_ms(n.enrolled_at_ms);
    out->set_last_seen_epoch_ms(n.last_seen_ms);
  }
  return Done(ctx, grpc::Status::OK);
}

}  // namespace edge::controller
