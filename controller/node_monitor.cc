#include "controller/node_monitor.h"

#include "common/log.h"

namespace edge::controller {

Result<std::vector<std::string>> NodeMonitor::Sweep() {
  const int64_t now_ms = ToEpochMillis(clock_.Now());
  const int64_t cutoff =
      now_ms -
      std::chrono::duration_cast<std::chrono::milliseconds>(settings_.stale_threshold).count();
  auto stale = store_.MarkStaleNodes(cutoff);
  if (!stale) return stale;
  for (const auto& id : *stale) {
    log::Get("edge")->warn("node {} is unhealthy: no heartbeat for {} s", id,
                           settings_.stale_threshold.count());
  }
  const int64_t prune_before =
      now_ms - std::chrono::duration_cast<std::chrono::milliseconds>(settings_.retention).count();
  if (auto st = store_.PruneExpired(prune_before); !st) return std::unexpected(st.error());
  return stale;
}

void NodeMonitor::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (auto r = Sweep(); !r) {
        log::Get("edge")->warn("node health sweep failed: {}", r.error().ToString());
      }
      lock.lock();
      cv_.wait_for(lock, settings_.period, [this] { return stop_; });
    }
  });
}

void NodeMonitor::Stop() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

}  // namespace edge::controller
