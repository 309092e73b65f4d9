// HeartbeatLoop: the worker's heartbeat to its control plane (wire.md §4):
//   POST {control_plane_url}/api/v1/worker/{id}/heartbeat
//   {hostname, status: "online"|"draining", providers, capabilities,
//    capacity: {max_sandboxes, max_sandboxes_per_owner, preview_domain, rpc_url}}
// every `interval`; after a failure the next attempt waits the backoff's delay instead (full
// jitter, reset by the next success). Every wait is on the injected Sleeper, so a stop ends
// it at once and tests run it with a ManualSleeper, without sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/backoff.h"
#include "common/error.h"
#include "common/stop.h"

namespace edge::workerrpc {

struct HeartbeatFacts {
  std::string hostname;
  bool draining = false;
  std::vector<std::string> providers;
  std::vector<std::string> capabilities;
  int64_t max_sandboxes = 0;
  int64_t max_sandboxes_per_owner = 0;
  std::string preview_domain;
  std::string rpc_url;
};

nlohmann::json HeartbeatBody(const HeartbeatFacts& facts);

// "http(s)://<host>:<port>" for a listen address; an unspecified host (empty, 0.0.0.0, ::)
// becomes `hostname`.
std::string RpcUrl(const std::string& listen_addr, uint16_t port, bool tls,
                   const std::string& hostname);

class HeartbeatLoop {
 public:
  using Send = std::function<Result<nlohmann::json>(const nlohmann::json& body)>;
  HeartbeatLoop(Send send, std::function<HeartbeatFacts()> facts, Sleeper& sleeper,
                Backoff& backoff, std::chrono::milliseconds interval);

  // Sends at once, then every interval (or after the backoff's delay following a failure),
  // until the sleeper is stopped. Blocking: run it on a thread of its own.
  void Run();

  uint64_t sent() const { return sent_; }
  uint64_t failed() const { return failed_; }
  std::string last_error() const;

 private:
  Send send_;
  std::function<HeartbeatFacts()> facts_;
  Sleeper& sleeper_;
  Backoff& backoff_;
  std::chrono::milliseconds interval_;
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> failed_{0};
  mutable std::mutex mu_;
  std::string last_error_;
};

}  // namespace edge::workerrpc
