// GrpcShutdownAtExit: put first in main so it is destroyed last. gRPC shuts its library down
// on a background thread once the last channel or server is gone; a process that returns
// from main meanwhile exits with that thread still freeing (and OpenSSL's per-thread state of
// gRPC's threads still held), which LeakSanitizer reported as a leak and turned into an
// abort of a command that had already printed its answer. This waits for that shutdown to
// finish (grpc_init + grpc_shutdown_blocking: synchronous when nothing else holds gRPC, a
// no-op decrement otherwise, so it never blocks on objects still alive).
#pragma once

#include <grpc/grpc.h>

namespace edge {

class GrpcShutdownAtExit {
 public:
  GrpcShutdownAtExit() = default;
  ~GrpcShutdownAtExit() {
    grpc_init();
    grpc_shutdown_blocking();
  }
  GrpcShutdownAtExit(const GrpcShutdownAtExit&) = delete;
  GrpcShutdownAtExit& operator=(const GrpcShutdownAtExit&) = delete;
};

}  // namespace edge
