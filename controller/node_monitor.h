// Marks edge nodes Unhealthy when no heartbeat arrived for cluster.stale_threshold_secs
// (wire.md §2.3 step 5), and prunes expired tokens and rotation nonces. Sweep() does one pass
// on the injected clock; Start() runs it at once and then every `period` of that clock on a
// TimerQueue (so a test moves a ManualClock instead of waiting) until Stop(), which returns
// at once.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "common/timer_queue.h"
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
  // A sweep, then the next one `period` later (on the timer queue's thread).
  void SweepAndReschedule();

  Store& store_;
  Clock& clock_;
  NodeMonitorSettings settings_;
  std::mutex mu_;
  std::unique_ptr<TimerQueue> timers_;  // from Start to Stop
};

}  // namespace edge::controller
