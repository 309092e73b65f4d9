#include "tests/controller/controller.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "common/atomic_file.h"
#include "common/log.h"

namespace edge::controller {

Controller::Controller(config::ControllerConfig config, std::string version, Clock& clock)
    : config_(std::move(config)), clock_(clock) {
  info_.version = std::move(version);
  info_.data_dir = config_.data_dir;
  info_.grpc_listen = config_.grpc.listen;
}

Controller::~Controller() { Stop(); }

Status Controller::Start() {
  auto log = log::Get("controller");
  info_.started_at = clock_.Now();
  if (auto st = MakeDirs(config_.data_dir, 0700); !st) {
    return MakeError(st.error().code, "data_dir: " + st.error().message);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.grpc.listen, grpc::InsecureServerCredentials(), &grpc_port_);
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || grpc_port_ == 0) {
    grpc_server_.reset();
    return MakeError(ErrorCode::kUnavailable,
                     "grpc.listen: cannot listen on \"" + config_.grpc.listen + "\"");
  }
  grpc_server_->GetHealthCheckService()->SetServingStatus(true);
  log->info("gRPC listening on {} (port {})", config_.grpc.listen, grpc_port_);

  admin_service_ = std::make_unique<AdminServiceImpl>(info_);
  if (auto st = admin_server_.Start(config_.admin.socket, {admin_service_.get()}); !st) {
    Stop();
    return st;
  }
  return OkStatus();
}

void Controller::Stop() {
  admin_server_.Stop();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc_server_->Wait();
    grpc_server_.reset();
    log::Get("controller")->info("gRPC server stopped");
  }
}

}  // namespace edge::controller
