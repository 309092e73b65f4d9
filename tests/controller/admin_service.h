// The controller's AdminService (proto/admin.proto) on the gRPC callback API: translates
// operator calls into the controller's parts. Owns nothing; references outlive it.
#pragma once

#include <string>

#include "admin.grpc.pb.h"
#include "common/clock.h"
#include "tests/controller/join_token_issuer.h"
#include "tests/controller/store.h"

namespace edge::controller {

struct ControllerInfo {
  std::string version;
  std::string grpc_listen;
  std::string advertise;
  std::string ca_pin;
  std::string data_dir;
  Clock::WallTime started_at;
};

class AdminServiceImpl final : public edge::admin::v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(const ControllerInfo& info, Store& store, JoinTokenIssuer& tokens, Clock& clock)
      : info_(info), store_(store), tokens_(tokens), clock_(clock) {}

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx,
                                   const edge::admin::v1::StatusRequest* req,
                                   edge::admin::v1::StatusResponse* resp) override;
  grpc::ServerUnaryReactor* CreateJoinToken(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::CreateJoinTokenRequest* req,
      edge::admin::v1::CreateJoinTokenResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeJoinToken(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::RevokeJoinTokenRequest* req,
      edge::admin::v1::RevokeJoinTokenResponse* resp) override;
  grpc::ServerUnaryReactor* ListJoinTokens(grpc::CallbackServerContext* ctx,
                                           const edge::admin::v1::ListJoinTokensRequest* req,
                                           edge::admin::v1::ListJoinTokensResponse* resp) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const edge::admin::v1::ListNodesRequest* req,
                                      edge::admin::v1::ListNodesResponse* resp) override;

 private:
  const ControllerInfo& info_;
  Store& store_;
  JoinTokenIssuer& tokens_;
  Clock& clock_;
};

}  // namespace edge::controller
