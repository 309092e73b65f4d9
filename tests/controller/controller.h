// The bundled minimal controller: the server side of every contract the agent speaks.
// Owns its parts (admin API on a Unix socket, the public gRPC server with health and
// reflection) and starts/stops them in order. Configured by edge::config::ControllerConfig.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "common/clock.h"
#include "common/error.h"
#include "config/controller_config.h"
#include "tests/controller/admin_server.h"
#include "tests/controller/admin_service.h"

namespace edge::controller {

class Controller {
 public:
  Controller(config::ControllerConfig config, std::string version, Clock& clock);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  Status Start();
  // Stops promptly: in-flight RPCs get a short grace, then are cancelled.
  void Stop();
  // The port the public gRPC server bound (useful when grpc.listen asked for port 0).
  int grpc_port() const { return grpc_port_; }

 private:
  config::ControllerConfig config_;
  Clock& clock_;
  ControllerInfo info_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  AdminServer admin_server_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int grpc_port_ = 0;
};

}  // namespace edge::controller
