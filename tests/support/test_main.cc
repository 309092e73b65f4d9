// The main of every gtest binary (edge_add_test links it instead of gtest_main): the tests
// run as under the binaries' GrpcShutdownAtExit (common/grpc_lifetime.h), so a test process
// does not run its exit handlers while gRPC is still shutting down on its own threads. A
// stress run (issue 16) saw AddressSanitizer report a double free in grpc_cq_internal_unref
// on a gRPC thread after EdgeSessionTest had passed, during exit. A process with no thread
// but main left (most unit tests never start gRPC) skips the wait: grpc_init + shutdown
// would cost it ~50 ms under ASan for nothing.
//
// Every test also runs under a CallbackQueuePin (common/grpc_lifetime.h): gRPC 1.51 deletes its
// callback completion queue on its own thread when a callback drops the last channel or
// server, which ASan reported as a double free in a stress run (EdgeSessionTest.Deadline…,
// 4c9f924). The pin costs a test process ~8 ms under ASan; it is released after the last
// test, on this thread.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <memory>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "common/grpc_lifetime.h"

namespace {

bool OtherThreadsAlive() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/task", ec);
  return !ec && std::distance(it, std::filesystem::directory_iterator()) > 1;
}

}  // namespace

int main(int argc, char** argv) {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);  // as GrpcShutdownAtExit does
  ::testing::InitGoogleTest(&argc, argv);
  auto pin = std::make_unique<edge::CallbackQueuePin>();
  const int rc = RUN_ALL_TESTS();
  pin.reset();
  if (OtherThreadsAlive()) {
    grpc_init();
    grpc_shutdown_blocking();
    if (OtherThreadsAlive()) {
      // gRPC 1.51's callback-queue threads can outlive grpc_shutdown_blocking, and exit
      // handlers running beside them double-freed a completion queue once more (stop 23,
      // ComputeMemberTest.BackoffResets…, after the test passed). Leave without running exit
      // handlers; the leak check they would have run is run here.
#if defined(__SANITIZE_ADDRESS__)
      __lsan_do_leak_check();
#endif
      std::fflush(nullptr);
      std::_Exit(rc);
    }
  }
  return rc;
}
