// Marks edge nodes Unhealthy when no heartbeat arrived for cluster.stale_threshold_secs
// (wire.md §2.3 step 5), and prunes expired tokens and rotation nonces. Sweep() does one pass
// on the injected clock (tests call it directly); Start() runs it on a background thread
// every `period` until Stop() (which returns at once: the wait is interruptible).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "controller/store.h"

namespace edge::controller {

struct NodeMonitorSettings {
  std::chrono::seconds stale_threshold{90};
  // Tokens and nonces are forgotten this long after they expired / were seen (longer than
  // any token lifetime, so a replayed rotation still fails on its nonce or its token).
  std::chrono::hours retention{48};
  std::chrono::milliseconds period{std::chrono::seconds(5)};
};

class NodeMonitor {
 public:
  NodeMonitor(Store& store, Clock& clock, NodeMonitorSettings settings)
      : store_(store), clock_(clock), settings_(settings) {}
  ~NodeMonitor() { Stop(); }
  NodeMonitor(const NodeMonitor&) = delete;
  NodeMonitor& operator=(const NodeMonitor&) = delete;

  // One pass; returns the nodes that became unhealthy.
  Result<std::vector<std::string>> Sweep();

  void Start();
  void Stop();

 private:
  Store& store_;
  Clock& clock_;
  NodeMonitorSettings settings_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace edge::controller
