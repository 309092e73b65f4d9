#include "tests/controller/bootstrap_service.h"

#include "agent/identity/pkcs12.h"
#include "common/log.h"
#include "config/validate.h"
#include "tests/controller/grpc_status.h"
#include "tests/controller/join_token_issuer.h"

namespace edge::controller {

namespace pb = me::prexorjustin::prexorcloud::protocol;

Status BootstrapServiceImpl::Redeem(const pb::ExchangeJoinTokenRequest& req,
                                    pb::ExchangeJoinTokenResponse* resp) {
  if (req.join_token().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "join_token is required");
  }
  if (req.node_id().empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  if (!config::IsValidNodeId(req.node_id())) {
    return MakeError(ErrorCode::kInvalidArgument, "node_id \"" + req.node_id().substr(0, 80) +
                                                      "\" must match [A-Za-z0-9._-]{1,64}");
  }
  const std::string hash = JoinTokenIssuer::HashToken(req.join_token());
  const auto now = clock_.Now();
  auto token = store_.ConsumeJoinToken(hash, req.node_id(), ToEpochMillis(now));
  if (!token) return std::unexpected(token.error());

  // The token is spent from here on; if minting fails, give it back.
  auto fail = [&](const Error& e) -> Status {
    (void)store_.UnconsumeJoinToken(hash);
    return MakeError(ErrorCode::kInternal, "minting the node identity failed: " + e.message);
  };
  auto leaf = ca_.IssueNodeCert(req.node_id(), now);
  if (!leaf) return fail(leaf.error());
  const std::string password = identity::GeneratePkcs12Password();
  auto p12 = identity::CreatePkcs12(leaf->key_pem, leaf->cert_pem, ca_.cert_pem(), password);
  if (!p12) return fail(p12.error());
  NodeRecord node{.node_id = req.node_id(),
                  .tenant_id = token->tenant_id,
                  .state = "enrolled",
                  .cert_serial_hex = leaf->serial_hex,
                  .enrolled_at_ms = ToEpochMillis(now),
                  .last_seen_ms = ToEpochMillis(now)};
  if (auto st = store_.UpsertNode(node); !st) return fail(st.error());
  resp->set_pkcs12(*p12);
  resp->set_pkcs12_password(password);
  resp->set_ca_certificate_pem(ca_.cert_pem());
  log::Get("bootstrap")
      ->info("node {} enrolled with join token {} (tenant {}, cert serial {})", req.node_id(),
             token->token_id, token->tenant_id, leaf->serial_hex);
  return OkStatus();
}

grpc::ServerUnaryReactor* BootstrapServiceImpl::ExchangeJoinToken(
    grpc::CallbackServerContext* ctx, const pb::ExchangeJoinTokenRequest* req,
    pb::ExchangeJoinTokenResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto st = Redeem(*req, resp);
  if (!st) {
    log::Get("bootstrap")
        ->warn("join token redemption for node \"{}\" from {} refused: {}",
               req->node_id().substr(0, 80), ctx->peer(), st.error().ToString());
    reactor->Finish(ToGrpcStatus(st.error()));
  } else {
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

}  // namespace edge::controller
