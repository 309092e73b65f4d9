// The controller's AdminService (proto/admin.proto) on the gRPC callback API: a door that
// only translates — each call to an EdgeFleet operation (which holds the rules) and its
// result or error to the proto (errors through ToGrpcStatus). Owns nothing; references
// outlive it. Invoke is a server-streaming reactor that observes its command through the
// Dispatcher (one write in flight, an outbound queue).
#pragma once

#include <string>

#include "admin.grpc.pb.h"
#include "common/clock.h"
#include "controller/dispatcher.h"
#include "controller/edge_fleet.h"
#include "controller/tenant_tokens.h"

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
  // `users` mints the operator API's user tokens (UserTokens).
  AdminServiceImpl(const ControllerInfo& info, EdgeFleet& fleet, Dispatcher& dispatcher,
                   const TenantTokens& users)
      : info_(info), fleet_(fleet), dispatcher_(dispatcher), users_(users) {}

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

  grpc::ServerWriteReactor<edge::admin::v1::InvokeEvent>* Invoke(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::InvokeRequest* req) override;
  grpc::ServerUnaryReactor* GetCommand(grpc::CallbackServerContext* ctx,
                                       const edge::admin::v1::GetCommandRequest* req,
                                       edge::admin::v1::CommandInfo* resp) override;
  grpc::ServerUnaryReactor* ListCommands(grpc::CallbackServerContext* ctx,
                                         const edge::admin::v1::ListCommandsRequest* req,
                                         edge::admin::v1::ListCommandsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelCommand(grpc::CallbackServerContext* ctx,
                                          const edge::admin::v1::CancelCommandRequest* req,
                                          edge::admin::v1::CancelCommandResponse* resp) override;
  grpc::ServerUnaryReactor* DrainNode(grpc::CallbackServerContext* ctx,
                                      const edge::admin::v1::DrainNodeRequest* req,
                                      edge::admin::v1::DrainNodeResponse* resp) override;
  grpc::ServerUnaryReactor* ShutdownNode(grpc::CallbackServerContext* ctx,
                                         const edge::admin::v1::ShutdownNodeRequest* req,
                                         edge::admin::v1::ShutdownNodeResponse* resp) override;
  grpc::ServerUnaryReactor* PushConfig(grpc::CallbackServerContext* ctx,
                                       const edge::admin::v1::PushConfigRequest* req,
                                       edge::admin::v1::PushConfigResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeNode(grpc::CallbackServerContext* ctx,
                                       const edge::admin::v1::RevokeNodeRequest* req,
                                       edge::admin::v1::RevokeNodeResponse* resp) override;
  grpc::ServerUnaryReactor* CreateUserToken(
      grpc::CallbackServerContext* ctx, const edge::admin::v1::CreateUserTokenRequest* req,
      edge::admin::v1::CreateUserTokenResponse* resp) override;

 private:
  const ControllerInfo& info_;
  EdgeFleet& fleet_;
  Dispatcher& dispatcher_;  // the Invoke stream's subscription
  const TenantTokens& users_;
};

}  // namespace edge::controller
