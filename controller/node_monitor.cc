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
  if (timers_) return;
  timers_ = std::make_unique<TimerQueue>(clock_);
  timers_->After(std::chrono::milliseconds(0), [this] { SweepAndReschedule(); });
}

void NodeMonitor::SweepAndReschedule() {
  if (auto r = Sweep(); !r) {
    log::Get("edge")->warn("node health sweep failed: {}", r.error().ToString());
  }
  std::lock_guard lock(mu_);
  if (timers_) timers_->After(settings_.period, [this] { SweepAndReschedule(); });  // not stopped
}

void NodeMonitor::Stop() {
  std::unique_ptr<TimerQueue> timers;
  {
    std::lock_guard lock(mu_);
    timers = std::move(timers_);
  }
  if (timers) timers->Stop();
}

}  // namespace edge::controller
