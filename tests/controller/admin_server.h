// Serves the controller's operator API (proto/admin.proto) on a Unix socket that only the
// controller's user may use: the socket is created under umask 077 and chmod'ed to 0600,
// and its directory must not be writable by others. Owns the grpc::Server; not the services.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"

namespace edge::controller {

class AdminServer {
 public:
  AdminServer() = default;
  ~AdminServer() { Stop(); }
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds `socket_path` (a stale socket left by a dead controller is replaced; any other
  // file there is an error) and serves `services` on it.
  Status Start(const std::string& socket_path, const std::vector<grpc::Service*>& services);
  void Stop();
  const std::string& socket_path() const { return socket_path_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;
};

// A channel to the admin socket, for the CLI subcommands.
std::shared_ptr<grpc::Channel> AdminChannel(const std::string& socket_path);

}  // namespace edge::controller
