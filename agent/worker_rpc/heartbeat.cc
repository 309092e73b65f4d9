#include "agent/worker_rpc/heartbeat.h"

#include "common/log.h"

namespace edge::workerrpc {

nlohmann::json HeartbeatBody(const HeartbeatFacts& f) {
  return {{"hostname", f.hostname},
          {"status", f.draining ? "draining" : "online"},
          {"providers", f.providers},
          {"capabilities", f.capabilities},
          {"capacity",
           {{"max_sandboxes", f.max_sandboxes},
            {"max_sandboxes_per_owner", f.max_sandboxes_per_owner},
            {"preview_domain", f.preview_domain},
            {"rpc_url", f.rpc_url}}}};
}

std::string RpcUrl(const std::string& listen_addr, uint16_t port, bool tls,
                   const std::string& hostname) {
  std::string host = listen_addr.substr(0, listen_addr.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") host = hostname;
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port);
}

HeartbeatLoop::HeartbeatLoop(Send send, std::function<HeartbeatFacts()> facts, Sleeper& sleeper,
                             Backoff& backoff, std::chrono::milliseconds interval)
    : send_(std::move(send)),
      facts_(std::move(facts)),
      sleeper_(sleeper),
      backoff_(backoff),
      interval_(interval) {}

std::string HeartbeatLoop::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void HeartbeatLoop::Run() {
  auto log = log::Get("worker_rpc");
  while (!sleeper_.Stopped()) {
    auto r = send_(HeartbeatBody(facts_()));
    std::chrono::milliseconds wait = interval_;
    if (r) {
      if (failed_ > 0 && sent_ == 0) log->info("heartbeat to the control plane accepted");
      ++sent_;
      backoff_.Reset();
      std::lock_guard lock(mu_);
      last_error_.clear();
    } else {
      ++failed_;
      wait = backoff_.Next();
      log->warn("heartbeat to the control plane failed: {} (next attempt in {} ms)",
                r.error().message, wait.count());
      std::lock_guard lock(mu_);
      last_error_ = r.error().message;
    }
    if (!sleeper_.SleepFor(wait)) return;
  }
}

}  // namespace edge::workerrpc
