// ClientCallQueue: one gRPC completion queue and the thread(s) that drive it, for client calls
// made with gRPC's asynchronous API (ClientStream, common/grpc_client_stream.h). Each thread
// blocks in CompletionQueue::Next() without a deadline, so a call with nothing to do wakes
// nothing. (gRPC 1.51's callback API runs its reactions, on Linux, on two `nexting_thread`s
// that poll with a 100 ms deadline and sleep 100 ms between polls: about 340 wake-ups a minute
// for an idle agent, two thirds of all it had; issue 14 target 3.)
//
// Every event's tag must be a ClientCallQueue::Tag; its Done(ok) runs on a queue thread. With
// more than one thread, tags of different calls run concurrently (a call's own tags may too:
// a read and a write). The destructor shuts the queue down, lets it drain and joins the
// threads: every call on it must be over (its last tag returned) before then, which
// ClientStream's on_done says. Owners: the agent's EdgeSession and ComputeMember, one queue
// each; the fleet bench, one for all its simulated nodes.
#pragma once

#include <grpcpp/completion_queue.h>

#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace edge {

class ClientCallQueue {
 public:
  // What a queue thread calls for each event (`ok` as Next() gives it).
  class Tag {
   public:
    virtual void Done(bool ok) = 0;

   protected:
    ~Tag() = default;
  };

  // Starts `threads` (at least 1) threads named `thread_name` (15 bytes are kept).
  explicit ClientCallQueue(std::string_view thread_name, int threads = 1);
  ~ClientCallQueue();
  ClientCallQueue(const ClientCallQueue&) = delete;
  ClientCallQueue& operator=(const ClientCallQueue&) = delete;

  grpc::CompletionQueue* cq() { return &cq_; }

 private:
  void Run(const std::string& name);

  grpc::CompletionQueue cq_;
  std::vector<std::thread> threads_;
};

}  // namespace edge
