#include "common/grpc_call_queue.h"

#include <algorithm>

#include "common/thread_name.h"

namespace edge {

ClientCallQueue::ClientCallQueue(std::string_view thread_name, int threads) {
  const std::string name(thread_name);
  for (int i = 0; i < std::max(threads, 1); ++i)
    threads_.emplace_back([this, name] { Run(name); });
}

ClientCallQueue::~ClientCallQueue() {
  cq_.Shutdown();  // Next() returns false once every event has been handed out
  for (auto& t : threads_)
    t.join();
}

void ClientCallQueue::Run(const std::string& name) {
  NameThisThread(name);
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok))
    static_cast<Tag*>(tag)->Done(ok);
}

}  // namespace edge
