// GrpcShutdownAtExit: put first in main so it is destroyed last. gRPC shuts its library down
// on a background thread once the last channel or server is gone; a process that returns
// from main meanwhile exits with that thread still freeing (and OpenSSL's per-thread state of
// gRPC's threads still held), which LeakSanitizer reported as a leak and turned into an
// abort of a command that had already printed its answer. This waits for that shutdown to
// finish (grpc_init + grpc_shutdown_blocking: synchronous when nothing else holds gRPC, a
// no-op decrement otherwise, so it never blocks on objects still alive).
//
// That alone left a race (issue 16's flaky "killed by a signal" after a refused enrollment):
// when a gRPC thread is still alive at exit, OpenSSL's own atexit cleanup frees the key that
// holds each thread's error state, and LeakSanitizer then reports the live thread's state as
// leaked. So the constructor also initialises OpenSSL with OPENSSL_INIT_NO_ATEXIT (it runs
// first in main, before anything else touches OpenSSL): the process exits with OpenSSL's
// state intact, as it would without sanitizers; the kernel reclaims it.
#pragma once

#include <grpc/grpc.h>
#include <openssl/crypto.h>

namespace edge {

class GrpcShutdownAtExit {
 public:
  GrpcShutdownAtExit() { OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr); }
  ~GrpcShutdownAtExit() {
    grpc_init();
    grpc_shutdown_blocking();
  }
  GrpcShutdownAtExit(const GrpcShutdownAtExit&) = delete;
  GrpcShutdownAtExit& operator=(const GrpcShutdownAtExit&) = delete;
};

}  // namespace edge
