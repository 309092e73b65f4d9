#include "controller/bootstrap_service.h"

#include "agent/identity/pkcs12.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "config/validate.h"
#include "controller/join_token_issuer.h"
#include "controller/node_cluster_service.h"

namespace edge::controller {

namespace pb = me::prexorjustin::prexorcloud::protocol;

Status BootstrapServiceImpl::Redeem(const pb::ExchangeJoinTokenRequest& req,
                                    pb::ExchangeJoinTokenResponse* resp) {
  if (req.join_token().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "join_token is required");
  }
  if (req.node_id().empty()) return MakeError(ErrorCode::kInvalidArgument, "node_id is required");
  if (!config::IsValidNodeId(req.node_id())) {
    return MakeError(ErrorCode::kInvalidArgument, "node_id \"" + log::Escape(req.node_id(), 80) +
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
  if (token->replaced_node_state.empty()) {
    log::Get("audit")->info(
        "ExchangeJoinToken: new node {} enrolled with join token {} (tenant {}, cert serial {})",
        req.node_id(), token->token_id, token->tenant_id, leaf->serial_hex);
  } else {
    log::Get("audit")->warn(
        "ExchangeJoinToken: node {} (was {}) re-enrolled with join token {} created with "
        "--replace: new certificate serial {} (tenant {})",
        req.node_id(), token->replaced_node_state, token->token_id, leaf->serial_hex,
        token->tenant_id);
  }
  return OkStatus();
}

Status BootstrapServiceImpl::Admit(const std::string& peer_address) {
  if (limiter_.Allow(peer_address)) return OkStatus();
  return MakeError(ErrorCode::kResourceExhausted,
                   "ExchangeJoinToken rate limit: at most " +
                       std::to_string(static_cast<int64_t>(limits_.burst)) + " at once and " +
                       std::to_string(static_cast<int64_t>(limits_.per_minute)) +
                       " per minute from " + peer_address + "; retry later");
}

grpc::ServerUnaryReactor* BootstrapServiceImpl::ExchangeJoinToken(
    grpc::CallbackServerContext* ctx, const pb::ExchangeJoinTokenRequest* req,
    pb::ExchangeJoinTokenResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  const std::string peer = NodeClusterServiceImpl::PeerAddress(ctx->peer());
  auto st = Admit(peer);
  if (st) st = Redeem(*req, resp);
  if (!st) {
    // A refusal of a token that exists (bound elsewhere, spent, or for a known node) is an
    // enrollment decision: audit. Unknown tokens and malformed requests are noise. Either
    // way at most limits.refusal_log_lines_per_minute lines per peer address.
    const bool decision = st.error().code == ErrorCode::kPermissionDenied ||
                          st.error().code == ErrorCode::kFailedPrecondition;
    refusals_.Warn(log::Get(decision ? "audit" : "bootstrap"), peer,
                   "ExchangeJoinToken for node \"" + log::Escape(req->node_id(), 80) + "\" from " +
                       log::Escape(ctx->peer()) +
                       " refused: " + log::Escape(st.error().ToString(), 512));
    reactor->Finish(ToGrpcStatus(st.error()));
  } else {
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

}  // namespace edge::controller
