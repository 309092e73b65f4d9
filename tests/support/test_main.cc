// The main of every gtest binary (edge_add_test links it instead of gtest_main): the tests
// run as under the binaries' GrpcShutdownAtExit (common/grpc_lifetime.h), so a test process
// does not run its exit handlers while gRPC is still shutting down on its own threads. A
// stress run (issue 16) saw AddressSanitizer report a double free in grpc_cq_internal_unref
// on a gRPC thread after EdgeSessionTest had passed, during exit.
//
// Every test also runs under a CallbackQueuePin (common/grpc_lifetime.h): gRPC 1.51 deletes its
// callback completion queue on its own thread when a callback drops the last channel or
// server, which ASan reported as a double free in a stress run (EdgeSessionTest.Deadline…,
// 4c9f924). The pin, and the wait for gRPC's shutdown it makes every test process do, cost a
// test process ~8 ms under ASan; it is released after the last test, on this thread.
//
// Built a second time with EDGE_TEST_MAIN_WITHOUT_GRPC for a binary whose code never uses
// gRPC (edge_add_test's WITHOUT_GRPC: sandbox_test): no pin, so no gRPC thread runs beside its
// tests. Those tests fork a stand-in agent (ForkedAgent), and a gRPC thread that was inside
// the allocator at the fork left the child its lock, held for good under ASan: the child's
// admission thread hung and its command never started (CI after stop 47,
// ExecutorTest.ACommandTheAgentDiedIn…). ForkedAgent refuses to fork beside other threads.
#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <memory>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#if !defined(EDGE_TEST_MAIN_WITHOUT_GRPC)
#include "common/grpc_lifetime.h"
#include "common/signals.h"

namespace {

bool OtherThreadsAlive() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/task", ec);
  return !ec && std::distance(it, std::filesystem::directory_iterator()) > 1;
}

}  // namespace
#endif

int main(int argc, char** argv) {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);  // as GrpcShutdownAtExit does
  ::testing::InitGoogleTest(&argc, argv);
#if defined(EDGE_TEST_MAIN_WITHOUT_GRPC)
  return RUN_ALL_TESTS();
#else
  // The pin starts gRPC's threads; they start with the termination signals blocked, as the
  // daemons' threads do (BlockTerminationSignals before their pin). A test that blocks those
  // signals and waits for one (signals_test, stop_test) needs every other thread to block
  // them too, or the kernel hands a SIGTERM to a gRPC thread and the process dies (stress
  // run 1 at 3163e21: TerminationSignalStop). This thread's mask is restored afterwards.
  const sigset_t termination = edge::TerminationSignalSet();
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &termination, &old_mask);
  auto pin = std::make_unique<edge::CallbackQueuePin>();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
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
#endif
}
