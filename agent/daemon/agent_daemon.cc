#include "agent/daemon/agent_daemon.h"

#include <signal.h>
#include <unistd.h>

#include "agent/daemon/sd_notify.h"
#include "agent/daemon/status_file.h"
#include "common/log.h"
#include "common/signals.h"

#include <map>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace edge::daemon {

AgentDaemon::AgentDaemon(config::AgentConfig config, DaemonOptions options, Clock& clock)
    : config_(std::move(config)), options_(std::move(options)), clock_(clock) {}

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
  s.update_interval_ms = options_.status_interval.count();
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

int AgentDaemon::Run() {
  auto log = log::Get("daemon");
  started_at_ms_ = ToEpochMillis(clock_.Now());
  log->info("edge-agent {} starting: node {}, data_dir {}", options_.version, config_.node_id,
            config_.data_dir);
  WriteStatus("starting");
  size_t failed = services_.StartAll();
  if (failed > 0) log->warn("{} service(s) failed to start; running without them", failed);
  WriteStatus("running");
  SdNotify("READY=1");
  log->info("edge-agent running (pid {})", ::getpid());

  auto interval = options_.status_interval;
  if (auto wd = SdWatchdogInterval(); wd) {
    interval = std::min(interval, std::chrono::duration_cast<std::chrono::milliseconds>(*wd / 2));
  }
  bool withholding_watchdog = false;
  while (true) {
    auto sig = WaitForTerminationSignal(interval);
    if (sig && *sig == SIGHUP) {
      log->info("SIGHUP received: reloading");
      Reload();
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
    services_.RetryFailed();
    WriteStatus("running");
    // The watchdog is fed only while every service works or legitimately waits: a wedged
    // stream stops feeding it and systemd restarts the agent (WatchdogSec=).
    if (auto stuck = services_.FirstStuck(ToEpochMillis(clock_.Now()))) {
      if (!withholding_watchdog) log->error("not feeding the watchdog: {}", *stuck);
      withholding_watchdog = true;
    } else {
      if (withholding_watchdog) log->info("service healthy again: feeding the watchdog");
      withholding_watchdog = false;
      SdNotify("WATCHDOG=1");
    }
  }
  SdNotify("STOPPING=1");
  WriteStatus("stopping");
  services_.StopAll();
  ::unlink(StatusFilePath(config_.data_dir).c_str());
  log->info("edge-agent stopped");
  return 0;
}

}  // namespace edge::daemon
