// ComputeService: the compute-member door (agent/compute/ComputeMember) as a daemon Service
// (design.md §2, §9). Start() builds the channel to compute.address — plaintext, TLS trusting
// compute.tls.ca_file (the system roots when empty), or mTLS with the node keystore from
// enrollment (compute.tls.ca_file, when set, replaces certs/ca.pem as the trust anchor) — and
// starts the member over the ExecutorHost's executor with the production Clock and a
// FullJitterBackoff (base 1 s, cap 60 s). The bearer token is read from compute.token_file
// whenever a stream opens, so a replaced token is used by the next one; it is never logged.
// Details() puts the member's state in the status file (edge-agent status). Registered when
// compute.enabled. Owns the member; borrows the ExecutorHost.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "agent/compute/compute_member.h"
#include "agent/daemon/executor_host.h"
#include "agent/daemon/service.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/random.h"
#include "config/agent_config.h"

namespace edge::daemon {

class ComputeService final : public Service {
 public:
  ComputeService(config::AgentConfig config, ExecutorHost& host, Clock& clock);
  ~ComputeService() override;

  std::string Name() const override { return "compute"; }
  Status Start() override;
  void Stop() override;
  std::map<std::string, std::string> Details() const override;

  // The channel compute.tls asks for (INVALID_ARGUMENT / NOT_FOUND naming the key when its
  // files cannot be read).
  static Result<std::shared_ptr<grpc::Channel>> MakeChannel(const config::AgentConfig& config);
  // The token in compute.token_file, whitespace trimmed; an error naming the key when it is
  // missing, unreadable or empty.
  static Result<std::string> ReadToken(const std::string& token_file);

 private:
  config::AgentConfig config_;
  ExecutorHost& host_;
  Clock& clock_;
  DefaultRandom random_;
  FullJitterBackoff backoff_;
  std::unique_ptr<compute::ComputeMember> member_;
};

}  // namespace edge::daemon
