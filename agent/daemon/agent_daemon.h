// The edge-agent process: wires the services (design.md §2) from the config, runs them
// until SIGTERM/SIGINT, reloads on SIGHUP, reports health (status file, sd_notify
// READY/WATCHDOG/STOPPING) and stops every service in reverse order. Owns the
// ServiceRegistry.
//
// An idle agent costs nothing (issue 14): the main thread sleeps until there is work — a
// signal, a service's status change (Service::NotifyStatusChanged), a failed service's next
// retry, the watchdog's half interval or the status file's liveness interval — never on a
// short poll. The status file is rewritten when something changed and otherwise once per
// liveness interval (its update_interval_ms), which is what `edge-agent status` measures
// freshness against.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "agent/daemon/memory_trim.h"
#include "agent/daemon/service_registry.h"
#include "common/clock.h"
#include "common/signals.h"
#include "config/agent_config.h"

namespace edge::daemon {

struct DaemonOptions {
  std::string version;
  // The liveness interval: the longest the status file goes unrewritten while nothing
  // changes (written as its update_interval_ms; `edge-agent status` calls the agent stale
  // after 3 of them). With systemd's watchdog, min(this, watchdog / 2), so one wake-up both
  // feeds the watchdog and proves liveness.
  std::chrono::milliseconds status_interval{std::chrono::seconds(60)};
  // systemd's WatchdogSec (default: read from the environment, SdWatchdogInterval) and how a
  // notify message is sent (default: SdNotify); tests replace both.
  std::optional<std::chrono::microseconds> watchdog;
  bool watchdog_from_environment = true;
  std::function<void(std::string_view)> notify;
  // SIGHUP re-reads the config through this (the same file and environment as at start);
  // unset = SIGHUP reloads certificates only.
  std::function<Result<config::AgentConfig>()> load_config;
  // Applies a reloaded log level and format (unset = unchanged).
  std::function<Status(const config::LogConfig&)> apply_log;
  // Idle memory (memory_trim.h). Each liveness turn trims what malloc holds free. The pages of
  // code and read-only data of the executable and its libraries are dropped at the first such
  // turn after which the process used less than this share of one core since the previous one
  // (an idle agent uses about 0.0003), and then again only after a busier interval: an idle
  // agent releases once, not every minute. 0 = never. Tests replace how the process's CPU time is
  // read and what a release does (default: ReleaseLoadedCodePages()).
  double idle_cpu_fraction = 0.01;
  std::function<std::chrono::nanoseconds()> process_cpu_time;
  std::function<Result<PageRelease>()> release_code_pages;
};

class AgentDaemon {
 public:
  // While a stuck service withholds the watchdog's feed, how often the services are looked at
  // again (at most a quarter of the feed interval).
  static constexpr std::chrono::milliseconds kStuckRecheck{5000};

  AgentDaemon(config::AgentConfig config, DaemonOptions options, Clock& clock);
  ~AgentDaemon();

  ServiceRegistry& services() { return services_; }
  // Starts the services and blocks until a termination signal arrives or RequestExit is
  // called (the caller must have called BlockTerminationSignals() before starting any
  // thread). Stops every service, then returns the exit code (0).
  int Run();

  // Asks Run to stop the services and return (e.g. after the controller's Shutdown command).
  // Non-blocking, callable from any thread: it raises SIGTERM for the process, which Run's
  // signal wait receives, and remembers `reason` for the log.
  void RequestExit(const std::string& reason);

  // Something in the status changed: Run rewrites the status file at once (the registry
  // passes this to every service as its status listener). Any thread; never blocks.
  void StatusChanged();

  // One turn of Run's loop after any wake-up: starts again the failed services that are due,
  // rewrites the status file when it changed or the liveness interval has passed since the
  // last write, feeds the watchdog when its half interval has passed and no service is stuck.
  // Returns how long Run may then sleep (until the earliest of those). Run calls it; tests
  // call it directly with a ManualClock after Start.
  std::chrono::milliseconds Turn();
  // What Run does before its loop: the services started, the status written, READY=1.
  void Start();

 private:
  void WriteStatus(const std::string& state);
  // SIGHUP: the config file again (tools, security contexts, log level and format apply at
  // once; other changes are named as needing a restart), then the certificates.
  void Reload();
  // Turn's memory step, once per liveness interval (see DaemonOptions::idle_cpu_fraction).
  void TrimMemory(Clock::MonoTime now);

  config::AgentConfig config_;
  DaemonOptions options_;
  Clock& clock_;
  // Before services_: a service may call StatusChanged until the registry has stopped it.
  SignalWaiter waiter_;  // Run's sleep; StatusChanged wakes it
  std::atomic<bool> status_changed_{false};
  ServiceRegistry services_{clock_};
  int64_t started_at_ms_ = 0;
  std::mutex exit_mu_;
  std::string exit_reason_;  // set by RequestExit
  // Turn's schedule (monotonic): the last status write, malloc trim and watchdog check.
  std::chrono::milliseconds liveness_interval_{0};
  std::optional<std::chrono::milliseconds> feed_interval_;  // watchdog / 2, when there is one
  Clock::MonoTime last_write_{};
  Clock::MonoTime last_trim_{};
  std::chrono::nanoseconds cpu_at_last_trim_{0};
  bool busy_since_page_release_ = true;  // start-up counts as busy
  // When the watchdog is next looked at: half its interval after a feed; while a stuck
  // service withholds the feed, every kStuckRecheck (or at the next change a service reports),
  // so a stall that ends is fed again well inside WatchdogSec.
  Clock::MonoTime next_feed_check_{};
  bool withholding_watchdog_ = false;
};

}  // namespace edge::daemon
