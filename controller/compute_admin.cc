#include "controller/compute_admin.h"

#include "common/json_parse.h"

namespace edge::controller {

namespace apb = edge::admin::v1;

namespace {
grpc::Status Invalid(const std::string& why) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}
}  // namespace

grpc::ServerUnaryReactor* ComputeAdminImpl::CreateComputeToken(
    grpc::CallbackServerContext* ctx, const apb::CreateComputeTokenRequest* req,
    apb::CreateComputeTokenResponse* resp) {
  auto* r = ctx->DefaultReactor();
  std::vector<std::string> roles(req->roles().begin(), req->roles().end());
  ComputeTokenClaims claims;
  auto token = tokens_.Mint(req->tenant_id(), roles, std::chrono::seconds(req->ttl_seconds()),
                            req->subject(), &claims);
  if (!token) {
    r->Finish(token.error().code == ErrorCode::kInvalidArgument
                  ? Invalid(token.error().message)
                  : grpc::Status(grpc::StatusCode::INTERNAL, token.error().message));
    return r;
  }
  resp->set_token(*token);
  resp->set_jti(claims.jti);
  resp->set_expires_at_epoch_ms(claims.expires_at_ms);
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerUnaryReactor* ComputeAdminImpl::ListComputeMembers(
    grpc::CallbackServerContext* ctx, const apb::ListComputeMembersRequest*,
    apb::ListComputeMembersResponse* resp) {
  for (const auto& m : hub_.Members()) {
    auto* out = resp->add_members();
    out->set_member_id(m.id);
    out->set_tenant_id(m.tenant);
    for (const auto& t : m.tags)
      out->add_tags(t);
    out->set_connected_since_epoch_ms(m.connected_since_ms);
    out->set_last_seen_epoch_ms(m.last_seen_ms);
    out->set_calls_in_flight(static_cast<uint32_t>(m.calls_in_flight));
    out->set_subject(m.subject);
    out->set_peer(m.peer);
  }
  auto* r = ctx->DefaultReactor();
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerUnaryReactor* ComputeAdminImpl::DispatchCompute(grpc::CallbackServerContext* ctx,
                                                            const apb::DispatchComputeRequest* req,
                                                            apb::DispatchComputeResponse* resp) {
  auto* r = ctx->DefaultReactor();
  DispatchRequest d;
  d.tenant = req->tenant_id().empty() ? "default" : req->tenant_id();
  d.tags.assign(req->tags().begin(), req->tags().end());
  d.kind = req->criteria() ? compute::CalculationRequest::Kind::kCriteria
                           : compute::CalculationRequest::Kind::kProcessor;
  d.name = req->name();
  d.entity_id = req->entity_id();
  if (d.name.empty()) {
    r->Finish(Invalid("a processor or criteria name is required"));
    return r;
  }
  if (!req->entity_json().empty()) {
    auto entity = ParseJsonBounded(req->entity_json(), "the entity");
    if (!entity) {
      r->Finish(Invalid(entity.error().message));
      return r;
    }
    if (!entity->is_object()) {
      r->Finish(Invalid("the entity must be a JSON object"));
      return r;
    }
    d.data = std::move(*entity);
  }
  if (req->timeout_ms() < 0) {
    r->Finish(Invalid("timeout must not be negative"));
    return r;
  }
  if (req->timeout_ms() > 0) d.timeout = std::chrono::milliseconds(req->timeout_ms());
  if (req->member_wait_ms() >= 0) d.member_wait = std::chrono::milliseconds(req->member_wait_ms());
  d.auth = {{"authtype", "user"}, {"authid", "operator"}, {"authclaims", "ROLE_OPERATOR"}};
  hub_.Dispatch(std::move(d), [r, resp](DispatchResult result) {
    resp->set_error_code(result.error_code);
    resp->set_message(result.message);
    resp->set_request_id(result.request_id);
    resp->set_member_id(result.member_id);
    resp->set_success(result.success);
    if (!result.response.is_null()) {
      resp->set_response_json(
          result.response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    resp->set_duration_ms(result.duration.count());
    r->Finish(grpc::Status::OK);
  });
  return r;
}

}  // namespace edge::controller
