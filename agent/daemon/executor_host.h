// ExecutorHost: the daemon's Service that owns the process's boost::asio::io_context, the
// small thread pool that runs it (design.md §4: 2 threads) and the sandbox::Executor built
// from the config (ExecutorOptionsFromConfig). It drives the executor's Tick(now) — lease
// expiry, sandbox TTLs, idempotency window — on the executor's TimerQueue (no thread of its
// own; the tick itself runs on the I/O pool) and only when there is work (issue 14): every
// tick_interval while a running command holds a lease, at the earliest sandbox expiry, and
// otherwise once per idle_tick_interval (the idempotency window's age prune, and a bound on
// anything missed). Work the tick watches (a leased command, a sandbox with a TTL) brings the
// next tick forward at once (Executor::SetTickListener). It applies pushed configs
// (ApplyConfig). Registered first, so the doors that use the executor stop before it.
// Stop cancels what still runs (SIGTERM to each group, SIGKILL after sandbox.kill_grace),
// waits for it to end (bounded), then joins the pool. Thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/daemon/service.h"
#include "common/clock.h"
#include "common/timer_queue.h"
#include "config/agent_config.h"
#include "sandbox/executor.h"

namespace edge::daemon {

class ExecutorHost final : public Service {
 public:
  struct Options {
    // The I/O threads (config sandbox.io_threads).
    size_t threads = 1;
    // While a running command holds a lease: its expiry is judged this often.
    std::chrono::milliseconds tick_interval{std::chrono::seconds(1)};
    // With nothing to watch (the idle agent): one tick this often.
    std::chrono::milliseconds idle_tick_interval{std::chrono::minutes(10)};
  };

  ExecutorHost(config::AgentConfig config, std::string version, Clock& clock, Options options);
  ExecutorHost(config::AgentConfig config, std::string version, Clock& clock)
      : ExecutorHost(std::move(config), std::move(version), clock, Options{}) {}
  ~ExecutorHost() override;

  std::string Name() const override { return "executor"; }
  // Opens the executor (INVALID_ARGUMENT naming a bad option) and starts the pool and Tick.
  Status Start() override;
  void Stop() override;
  std::map<std::string, std::string> Details() const override;

  // The executor while the service runs; nullptr before Start and after Stop.
  sandbox::Executor* executor() const;
  // The io_context its pool runs (for the doors' servers); nullptr before Start and after Stop.
  boost::asio::io_context* io_context() const;
  // Applies a pushed config's tools and security contexts (the edge door's PushConfig).
  Status ApplyConfig(const config::AgentConfig& config);
  // SIGHUP: the reloaded file's tools and security contexts (ApplyConfig).
  Status Reconfigure(const config::AgentConfig& config) override { return ApplyConfig(config); }
  // The executor's database caches (Executor::ReleaseMemory), while it runs; 0 without waiting
  // while a tick or a config push holds it.
  size_t ReleaseMemory() override;

 private:
  // Schedules the next tick when the executor's plan says (mu_ held), replacing a pending one.
  void ScheduleTickLocked();
  // How long until the next tick, from the executor's plan (mu_ held).
  std::chrono::milliseconds NextTickDelayLocked() const;
  // One tick, on the I/O pool; then the next one is scheduled.
  void RunTick();
  // Executor::SetTickListener: a tick at once, which schedules the next one from the new plan.
  void TickSoon();

  config::AgentConfig config_;
  std::string version_;
  Clock& clock_;
  Options options_;
  mutable std::mutex mu_;
  // Made fresh by each Start: handlers a stopped executor left queued never run later.
  std::unique_ptr<boost::asio::io_context> io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> pool_;
  std::unique_ptr<sandbox::Executor> executor_;
  TimerQueue::TimerId tick_timer_ = 0;  // the pending tick on executor_->timers()
  uint64_t ticks_ = 0;                  // periodic checks run so far (status: executor.ticks)
  bool stopping_ = false;
  // Where TickSoon posts a tick: io_ between Start and Stop, else nullptr. Its own lock, so a
  // door's thread never waits for mu_ (held by a running tick); never held while taking mu_.
  std::mutex post_mu_;
  boost::asio::io_context* post_io_ = nullptr;
};

}  // namespace edge::daemon
