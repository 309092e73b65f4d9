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
  // `max_message_bytes`: the largest request it receives (0 = gRPC's default, 4 MiB).
  Status Start(const std::string& socket_path, const std::vector<grpc::Service*>& services,
               size_t max_message_bytes = 0);
  void Stop();
  const std::string& socket_path() const { return socket_path_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;
};

// A channel to the admin socket, for the CLI subcommands (no limit on what it receives: the
// controller bounds results by grpc.max_message_bytes).
std::shared_ptr<grpc::Channel> AdminChannel(const std::string& socket_path);

}  // namespace edge::controller
