#include "agent/daemon/executor_host.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <future>

#include "agent/daemon/executor_config.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace edge::daemon {

ExecutorHost::ExecutorHost(config::AgentConfig config, std::string version, Clock& clock,
                           Options options)
    : config_(std::move(config)), version_(std::move(version)), clock_(clock), options_(options) {}

ExecutorHost::~ExecutorHost() {
  Stop();
}

Status ExecutorHost::Start() {
  std::lock_guard lock(mu_);
  if (executor_) return MakeError(ErrorCode::kAlreadyExists, "executor already running");
  auto io = std::make_unique<boost::asio::io_context>();
  auto ex = sandbox::Executor::Open(*io, clock_, ExecutorOptionsFromConfig(config_, version_));
  if (!ex) return std::unexpected(ex.error());
  io_ = std::move(io);
  executor_ = std::move(*ex);
  stopping_ = false;
  work_.emplace(io_->get_executor());
  for (size_t i = 0; i < std::max<size_t>(options_.threads, 1); ++i)
    pool_.emplace_back([io = io_.get()] {
      NameThisThread("edge-io");
      // A handler that throws must not take the I/O thread (and with it every running
      // command's output and result) down: log it and keep running the io_context.
      while (true) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          log::Get("daemon")->error("an I/O handler failed and was dropped: {}",
                                    log::Escape(e.what()));
        } catch (...) {
          log::Get("daemon")->error("an I/O handler failed and was dropped (unknown exception)");
        }
      }
    });
  {
    std::lock_guard post(post_mu_);
    post_io_ = io_.get();
  }
  executor_->SetTickListener([this] { TickSoon(); });
  ScheduleTickLocked();
  log::Get("daemon")->info("executor ready: {} tool(s), provider {}, {} I/O threads",
                           executor_->Tools().size(), executor_->options().provider, pool_.size());
  const std::string isolation = executor_->isolation();
  if (isolation.rfind("none", 0) == 0) {
    log::Get("daemon")->warn("process isolation: {}", isolation);
  } else {
    log::Get("daemon")->info("process isolation: {}", isolation);
  }
  return OkStatus();
}

std::chrono::milliseconds ExecutorHost::NextTickDelayLocked() const {
  const sandbox::Executor::TickPlan plan = executor_->NextTick();
  if (plan.leased_work) return options_.tick_interval;
  auto delay = options_.idle_tick_interval;
  if (plan.sandbox_expiry) {
    auto until = std::chrono::ceil<std::chrono::milliseconds>(*plan.sandbox_expiry - clock_.Now());
    // Not sooner than tick_interval: a sandbox that could not be destroyed is retried at that
    // pace, not in a tight loop.
    delay = std::max(options_.tick_interval, std::min(until, delay));
  }
  return delay;
}

void ExecutorHost::ScheduleTickLocked() {
  TimerQueue& timers = executor_->timers();
  if (tick_timer_ != 0) timers.Cancel(tick_timer_);
  boost::asio::io_context* io = io_.get();
  tick_timer_ = timers.After(NextTickDelayLocked(),
                             [this, io] { boost::asio::post(*io, [this] { RunTick(); }); });
}

void ExecutorHost::TickSoon() {
  // Called by the executor (no executor lock held) on a door's thread: the tick itself runs
  // on the I/O pool like every other, and it schedules the next from the new plan. Only
  // post_mu_ is taken, never mu_, which a running tick holds while it destroys expired
  // sandboxes: a door's thread must not wait for that.
  std::lock_guard post(post_mu_);
  if (post_io_ != nullptr) boost::asio::post(*post_io_, [this] { RunTick(); });
}

void ExecutorHost::RunTick() {
  std::lock_guard lock(mu_);
  if (stopping_ || !executor_) return;
  const size_t cancelled = executor_->Tick(clock_.Now());
  ++ticks_;
  if (cancelled > 0) {
    log::Get("daemon")->warn("{} command(s) stopped: their lease expired unrenewed", cancelled);
  }
  ScheduleTickLocked();
}

size_t ExecutorHost::ReleaseMemory() {
  // Not while a tick or a config push holds the executor: the daemon's thread does not wait.
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || stopping_ || !executor_) return 0;
  return executor_->ReleaseMemory();
}

void ExecutorHost::Stop() {
  sandbox::Executor* ex = nullptr;
  std::chrono::milliseconds grace{0};
  {
    std::lock_guard lock(mu_);
    if (!executor_ || stopping_) return;
    stopping_ = true;
    std::lock_guard post(post_mu_);
    post_io_ = nullptr;  // TickSoon posts nothing more; io_ goes at the end of Stop
    ex = executor_.get();
    grace = executor_->options().kill_grace;
  }
  // No tick after this: a pending one is cancelled (the executor's timers stop with it), one
  // already posted sees stopping_.
  {
    std::lock_guard lock(mu_);
    if (tick_timer_ != 0) ex->timers().Cancel(tick_timer_);
    tick_timer_ = 0;
  }
  // Cancel at once; a child gets SIGTERM, then SIGKILL after kill_grace.
  auto idle = std::make_shared<std::promise<void>>();
  auto done = idle->get_future();
  ex->Shutdown(std::chrono::milliseconds(0), [idle] { idle->set_value(); });
  if (done.wait_for(grace + std::chrono::seconds(5)) != std::future_status::ready) {
    log::Get("daemon")->warn("executor: work still running after shutdown; killing it");
  }
  // The I/O threads stop first: none may still be running a completion inside the
  // executor while it is destroyed.
  work_.reset();
  io_->stop();
  for (auto& t : pool_)
    if (t.joinable()) t.join();
  pool_.clear();
  std::unique_ptr<sandbox::Executor> owned;
  {
    std::lock_guard lock(mu_);
    owned = std::move(executor_);
  }
  owned.reset();  // kills and reaps whatever is left (without the io_context)
  io_.reset();    // drops handlers still queued for the old executor
}

std::map<std::string, std::string> ExecutorHost::Details() const {
  std::lock_guard lock(mu_);
  if (!executor_) return {};
  return {{"running", std::to_string(executor_->running())},
          {"draining", executor_->draining() ? "true" : "false"},
          {"tools", std::to_string(executor_->Tools().size())},
          {"isolation", executor_->isolation()},
          {"result_store_failures", std::to_string(executor_->result_store_failures())},
          {"ticks", std::to_string(ticks_)}};
}

sandbox::Executor* ExecutorHost::executor() const {
  std::lock_guard lock(mu_);
  return executor_.get();
}

boost::asio::io_context* ExecutorHost::io_context() const {
  std::lock_guard lock(mu_);
  return executor_ ? io_.get() : nullptr;
}

Status ExecutorHost::ApplyConfig(const config::AgentConfig& config) {
  std::lock_guard lock(mu_);
  if (!executor_) return MakeError(ErrorCode::kFailedPrecondition, "the executor is not running");
  return ApplyToolConfig(*executor_, config);
}

}  // namespace edge::daemon
