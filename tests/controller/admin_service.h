// The controller's AdminService (proto/admin.proto), on the gRPC callback API. Translates
// admin calls into the controller's parts; owns nothing but references to them.
#pragma once

#include <string>

#include "admin.grpc.pb.h"
#include "common/clock.h"

namespace edge::controller {

struct ControllerInfo {
  std::string version;
  std::string grpc_listen;
  std::string data_dir;
  Clock::WallTime started_at;
};

class AdminServiceImpl final : public edge::admin::v1::AdminService::CallbackService {
 public:
  explicit AdminServiceImpl(const ControllerInfo& info) : info_(info) {}

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx,
                                   const edge::admin::v1::StatusRequest* req,
                                   edge::admin::v1::StatusResponse* resp) override;

 private:
  const ControllerInfo& info_;
};

}  // namespace edge::controller
