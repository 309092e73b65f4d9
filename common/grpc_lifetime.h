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
//
// CallbackQueuePin: see below; held by every process that uses gRPC's callback API
// (`edge-controller serve`, every test binary, the fleet bench). The agent daemon does not:
// since its streams moved to ClientCallQueue it makes no callback-API call at all.
#pragma once

#include <grpc/grpc.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <openssl/crypto.h>

#include <chrono>
#include <future>
#include <memory>

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

// CallbackQueuePin holds one reference to gRPC 1.51's process-wide "callback alternative"
// completion queue (the queue and its two `nexting_thread`s behind every callback-API
// channel and server when the poller does not run in the background, as on Linux) from
// construction until destruction.
//
// Why (issue 16, stress run at 4c9f924, EdgeSessionTest.DeadlineEndsTheCommandWithTimedOut):
// each callback channel and server holds a reference to that queue and drops it in its
// destructor. When the last one is dropped inside a callback — a reactor's OnDone that frees
// the last owner of a channel after the server it talked to is gone — the drop runs on a
// nexting thread: it shuts the queue down, "joins" its own thread (which fails), deletes the
// queue, and the same thread then waits on the deleted queue: ASan reported a double free
// in grpc_cq_internal_unref. With one reference held here, no other owner's drop is ever the
// last; this one is released on the thread that destroys the pin (main, after everything
// else), where joining the nexting threads is legitimate.
//
// The reference is taken by one callback call on a private "lame" channel (gRPC's channel
// for null credentials: every call fails at once with INVALID_ARGUMENT, and it never
// resolves, connects or retries, so it adds no wake-up to an idle process); the channel then
// holds the queue until the pin lets it go. Construct it before the first
// gRPC object and after the signal mask and malloc arenas are set: it starts the nexting
// threads, which inherit both. It must be the outermost gRPC owner: a channel or server that
// outlives the pin can again drop the queue's last reference on a gRPC thread.
class CallbackQueuePin {
 public:
  CallbackQueuePin() : channel_(grpc::CreateChannel("edge-callback-queue-pin", nullptr)) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1);  // a default ByteBuffer is no message at all
    grpc::ByteBuffer response;
    std::promise<void> done;
    stub.UnaryCall(&ctx, "/edge.CallbackQueuePin/None", grpc::StubOptions(), &request, &response,
                   [&done](const grpc::Status&) { done.set_value(); });
    done.get_future().wait();
  }
  ~CallbackQueuePin() = default;  // the channel's destructor drops the reference
  CallbackQueuePin(const CallbackQueuePin&) = delete;
  CallbackQueuePin& operator=(const CallbackQueuePin&) = delete;

 private:
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace edge
