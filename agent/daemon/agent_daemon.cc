#include "agent/daemon/agent_daemon.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/memory_trim.h"
#include "agent/daemon/sd_notify.h"
#include "agent/daemon/status_file.h"
#include "common/log.h"
#include "common/signals.h"

#include <map>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace edge::daemon {

AgentDaemon::AgentDaemon(config::AgentConfig config, DaemonOptions options, Clock& clock)
    : config_(std::move(config)), options_(std::move(options)), clock_(clock) {
  if (!options_.notify) options_.notify = [](std::string_view s) { SdNotify(s); };
  if (!options_.process_cpu_time) {
    options_.process_cpu_time = [] {
      timespec ts{};
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    };
  }
  if (!options_.release_code_pages) {
    options_.release_code_pages = [] { return ReleaseLoadedCodePages(); };
  }
  services_.SetStatusListener([this] { StatusChanged(); });
}

AgentDaemon::~AgentDaemon() {
  services_.StopAll();
}

void AgentDaemon::WriteStatus(const std::string& state) {
  AgentStatus s;
  s.pid = ::getpid();
  s.version = options_.version;
  s.node_id = config_.node_id;
  s.started_at_ms = started_at_ms_;
  s.updated_at_ms = ToEpochMillis(clock_.Now());
  s.update_interval_ms =
      (liveness_interval_.count() > 0 ? liveness_interval_ : options_.status_interval).count();
  s.state = state;
  s.services = services_.Snapshot();
  if (auto st = WriteStatusFile(config_.data_dir, s); !st) {
    log::Get("daemon")->warn("cannot write status file: {}", st.error().ToString());
  }
}

void AgentDaemon::RequestExit(const std::string& reason) {
  {
    std::lock_guard lock(exit_mu_);
    exit_reason_ = reason.empty() ? "exit requested" : reason;
  }
  // Every thread blocks SIGTERM; the process-directed signal waits for Run's sigwait.
  ::kill(::getpid(), SIGTERM);
}

void AgentDaemon::StatusChanged() {
  if (!status_changed_.exchange(true)) waiter_.Wake();
}

namespace {

// The top-level sections of two configs that differ, except those applied live.
std::vector<std::string> SectionsNeedingRestart(config::AgentConfig before,
                                                config::AgentConfig after) {
  // The agent removes its redeemed join token from the file itself: not a change.
  before.controller.join_token.clear();
  after.controller.join_token.clear();
  auto sections = [](const config::AgentConfig& c) {
    std::map<std::string, std::string> out;
    YAML::Node root = YAML::Load(config::DumpRedacted(c));
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "tools" || key == "security_contexts" || key == "log") continue;
      YAML::Emitter e;
      e << kv.second;
      out[key] = e.c_str();
    }
    return out;
  };
  auto a = sections(before), b = sections(after);
  std::vector<std::string> changed;
  for (const auto& [k, v] : b) {
    if (a[k] != v) changed.push_back(k);
  }
  return changed;
}

}  // namespace

void AgentDaemon::Reload() {
  auto log = log::Get("daemon");
  if (options_.load_config) {
    auto next = options_.load_config();
    if (!next) {
      log->error("config not reloaded (the running one stays): {}", next.error().message);
    } else {
      if (options_.apply_log) {
        if (auto st = options_.apply_log(next->log); !st) {
          log->error("log settings not reloaded: {}", st.error().message);
        }
      }
      auto errors = services_.ReconfigureAll(*next);
      for (const auto& e : errors)
        log->error("config not applied to {}", e);
      auto restart = SectionsNeedingRestart(config_, *next);
      if (!restart.empty()) {
        std::string list;
        for (const auto& s : restart)
          list += (list.empty() ? "" : ", ") + s;
        log->warn("config reloaded; changes in {} take effect at the next restart", list);
      } else if (errors.empty()) {
        log->info("config reloaded: tools, security contexts and log settings applied");
      }
    }
  }
  services_.ReloadAll();  // certificates (the worker RPC server's TLS)
}

void AgentDaemon::Start() {
  auto log = log::Get("daemon");
  started_at_ms_ = ToEpochMillis(clock_.Now());
  log->info("edge-agent {} starting: node {}, data_dir {}", options_.version, config_.node_id,
            config_.data_dir);
  liveness_interval_ = options_.status_interval;
  if (options_.watchdog_from_environment && !options_.watchdog) {
    options_.watchdog = SdWatchdogInterval();
  }
  if (options_.watchdog) {
    feed_interval_ = std::chrono::duration_cast<std::chrono::milliseconds>(*options_.watchdog / 2);
    liveness_interval_ = std::min(liveness_interval_, *feed_interval_);
  }
  WriteStatus("starting");
  size_t failed = services_.StartAll();
  if (failed > 0) log->warn("{} service(s) failed to start; running without them", failed);
  // What the services notified while starting is in this write.
  status_changed_ = false;
  WriteStatus("running");
  last_write_ = last_trim_ = clock_.Monotonic();
  cpu_at_last_trim_ = options_.process_cpu_time();
  if (feed_interval_) next_feed_check_ = last_write_ + *feed_interval_;
  options_.notify("READY=1");
  log->info("edge-agent running (pid {})", ::getpid());
}

std::chrono::milliseconds AgentDaemon::Turn() {
  auto log = log::Get("daemon");
  bool changed = status_changed_.exchange(false);
  if (auto retry = services_.NextRetry(); retry && *retry <= clock_.Monotonic()) {
    services_.RetryFailed();
    changed = true;  // started, or failed again with a new retry time
  }
  auto now = clock_.Monotonic();
  if (changed || now - last_write_ >= liveness_interval_) {
    WriteStatus("running");
    last_write_ = now;
  }
  // No wake-up of its own: a turn comes at least once per liveness interval.
  if (now - last_trim_ >= liveness_interval_) TrimMemory(now);
  if (feed_interval_ && (now >= next_feed_check_ || (withholding_watchdog_ && changed))) {
    // The watchdog is fed only while every service works or legitimately waits: a wedged
    // stream stops feeding it and systemd restarts the agent (WatchdogSec=). While it is
    // withheld the services are looked at again soon, not half an interval later: a stall
    // that ends in time must not cost a restart.
    if (auto stuck = services_.FirstStuck(ToEpochMillis(clock_.Now()))) {
      if (!withholding_watchdog_) log->error("not feeding the watchdog: {}", *stuck);
      withholding_watchdog_ = true;
      next_feed_check_ =
          now + std::min<std::chrono::milliseconds>(kStuckRecheck, *feed_interval_ / 4);
    } else {
      if (withholding_watchdog_) log->info("service healthy again: feeding the watchdog");
      withholding_watchdog_ = false;
      options_.notify("WATCHDOG=1");
      next_feed_check_ = now + *feed_interval_;
    }
  }
  Clock::MonoTime next = last_write_ + liveness_interval_;
  if (feed_interval_) next = std::min(next, next_feed_check_);
  if (auto retry = services_.NextRetry()) next = std::min(next, *retry);
  // Rounded up: waking a little early would only mean a second, empty turn.
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::ceil<std::chrono::milliseconds>(next - now));
}

void AgentDaemon::TrimMemory(Clock::MonoTime now) {
  // What a burst of commands left free in malloc's arenas goes back to the system within two
  // liveness intervals (a no-op when little is held), however often the status changes.
  TrimFreeMemory();
  const std::chrono::nanoseconds cpu = options_.process_cpu_time();
  const auto used = cpu - cpu_at_last_trim_;
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_trim_);
  cpu_at_last_trim_ = cpu;
  last_trim_ = now;
  // (idle_cpu_fraction 0: every interval is busy, so nothing is ever released.)
  const double share = elapsed.count() > 0 ? double(used.count()) / double(elapsed.count()) : 1;
  if (share >= options_.idle_cpu_fraction) {
    busy_since_page_release_ = true;
    return;
  }
  if (!busy_since_page_release_) return;  // released already; an idle interval maps little
  busy_since_page_release_ = false;
  auto log = log::Get("daemon");
  // The services' caches first (what a burst of commands filled: SQLite's page caches), and
  // what malloc then holds free goes back to the system whatever its size; then the code.
  const size_t caches = services_.ReleaseMemoryAll();
  TrimFreeMemory(0);
  if (caches > 0) {
    log->debug("idle: released {:.2f} MiB of database page caches (SQLite's estimate)",
               double(caches) / (1 << 20));
  }
  auto released = options_.release_code_pages();
  if (!released) {
    if (released.error().code == ErrorCode::kUnavailable) {
      // A library came or went meanwhile: the next quiet interval tries again.
      busy_since_page_release_ = true;
      log->info("the idle agent's code pages are kept for now: {}", released.error().message);
    } else if (released.error().code == ErrorCode::kFailedPrecondition) {
      log->info("the idle agent's code pages are kept this time: {}", released.error().message);
    } else {
      log->warn("cannot release the idle agent's code pages: {}", released.error().message);
    }
    return;
  }
  if (released->mappings == 0) {
    log->info(
        "the idle agent's code pages are kept: no mapping of the executable or its libraries "
        "holds only copies of its file (uprobes, or a file system that maps them differently)");
    return;
  }
  log->debug(
      "idle ({:.3f} % of a core over {} s): dropped {:.1f} MiB of code and read-only data "
      "pages in {} mappings of the executable and its libraries",
      100 * share, std::chrono::duration_cast<std::chrono::seconds>(elapsed).count(),
      double(released->resident_bytes) / (1 << 20), released->mappings);
}

int AgentDaemon::Run() {
  auto log = log::Get("daemon");
  Start();
  while (true) {
    auto sig = waiter_.Wait(Turn());
    if (sig && *sig == SIGHUP) {
      log->info("SIGHUP received: reloading");
      Reload();
      status_changed_ = true;
      continue;
    }
    if (sig) {
      std::string reason;
      {
        std::lock_guard lock(exit_mu_);
        reason = exit_reason_;
      }
      if (!reason.empty() && *sig == SIGTERM) {
        log->info("stopping: {}", reason);
      } else {
        log->info("signal {} received: stopping", *sig);
      }
      break;
    }
  }
  options_.notify("STOPPING=1");
  WriteStatus("stopping");
  services_.StopAll();
  ::unlink(StatusFilePath(config_.data_dir).c_str());
  log->info("edge-agent stopped");
  return 0;
}

}  // namespace edge::daemon
