// A background part of the daemon (design.md §9): the edge stream, the compute stream,
// the worker RPC server, the status reporter... Each has a name, starts, and stops
// promptly. The ServiceRegistry owns them; a failing service is reported, never fatal.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/error.h"
#include "config/agent_config.h"

namespace edge::daemon {

class Service {
 public:
  virtual ~Service() = default;
  virtual std::string Name() const = 0;
  // Starts the service's work (non-blocking). An error leaves the service stopped.
  virtual Status Start() = 0;
  // Stops promptly: ends every wait at once and returns when the work has ended.
  virtual void Stop() = 0;
  // A few facts for the status file (no secrets), e.g. {"state": "connected"}.
  virtual std::map<std::string, std::string> Details() const { return {}; }
  // SIGHUP: reload what can change without a restart (certificates). Errors are logged by
  // the service; the old state stays. Default: nothing to reload.
  virtual void Reload() {}
  // SIGHUP with a config file that loaded and validated: apply what can change without a
  // restart (the executor: tools and security contexts). An error is logged by the daemon;
  // the service keeps its old settings. Default: nothing applies live.
  virtual Status Reconfigure(const config::AgentConfig& /*config*/) { return OkStatus(); }
  // Why the service is not doing its job at `now_ms` (wedged: e.g. connected but no
  // heartbeat has left for three intervals), nullopt while it works or legitimately waits
  // (backing off, enrollment pending). The daemon feeds systemd's watchdog only while no
  // service is stuck, so a wedged agent is restarted. Default: never stuck.
  virtual std::optional<std::string> Stuck(int64_t /*now_ms*/) const { return std::nullopt; }
  // The agent is idle: give back what is held only to be faster (caches: a database
  // connection's pages), from the daemon's thread. Returns the bytes given back. Default:
  // nothing held.
  virtual size_t ReleaseMemory() { return 0; }

  // Set by the registry when the service is added (before Start): the daemon rewrites the
  // status file only when something changed (and at its liveness interval), so a service
  // calls NotifyStatusChanged() when what Details() shows changed in a way an operator
  // should see at once — a stream's state, a member id, draining — from any thread, even
  // with its own locks held (it never blocks). Counters (commands, heartbeats) need not: they
  // are refreshed by the next liveness write.
  void SetStatusListener(std::function<void()> listener) { status_listener_ = std::move(listener); }

 protected:
  void NotifyStatusChanged() const {
    if (status_listener_) status_listener_();
  }

 private:
  std::function<void()> status_listener_;
};

}  // namespace edge::daemon
