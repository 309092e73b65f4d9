#include "tests/controller/admin_service.h"

namespace edge::controller {

grpc::ServerUnaryReactor* AdminServiceImpl::Status(grpc::CallbackServerContext* ctx,
                                                   const edge::admin::v1::StatusRequest*,
                                                   edge::admin::v1::StatusResponse* resp) {
  resp->set_version(info_.version);
  resp->set_started_at_epoch_ms(ToEpochMillis(info_.started_at));
  resp->set_grpc_listen(info_.grpc_listen);
  resp->set_data_dir(info_.data_dir);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace edge::controller
