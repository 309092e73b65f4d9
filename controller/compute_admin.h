// The ComputeAdmin service on the admin socket (proto/compute_admin.proto): compute tokens,
// the member list and one-off dispatches for `edge-controller compute …`. Whoever reaches the
// admin socket is the operator; dispatches carry the auth context authtype "user", authid
// "operator", authclaims "ROLE_OPERATOR". Owns nothing.
#pragma once

#include "compute_admin.grpc.pb.h"
#include "controller/compute_hub.h"
#include "controller/compute_tokens.h"

namespace edge::controller {

class ComputeAdminImpl final : public edge::admin::v1::ComputeAdmin::CallbackService {
 public:
  ComputeAdminImpl(ComputeTokens& tokens, ComputeHub& hub) : tokens_(tokens), hub_(hub) {}

  grpc::ServerUnaryReactor* CreateComputeToken(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::CreateComputeTokenRequest* req,
      edge::admin::v1::CreateComputeTokenResponse* resp) override;
  grpc::ServerUnaryReactor* ListComputeMembers(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::ListComputeMembersRequest* req,
      edge::admin::v1::ListComputeMembersResponse* resp) override;
  grpc::ServerUnaryReactor* DispatchCompute(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::DispatchComputeRequest* req,
      edge::admin::v1::DispatchComputeResponse* resp) override;

 private:
  ComputeTokens& tokens_;
  ComputeHub& hub_;
};

}  // namespace edge::controller
