// BootstrapService.ExchangeJoinToken (contract 001, wire.md §1): redeems a join token once
// and returns the node's freshly minted PKCS#12 keystore, its password and the CA. The only
// RPC callable without a client certificate. Failure codes follow the contract's table.
#pragma once

#include "agent/identity/certificate_authority.h"
#include "bootstrap.grpc.pb.h"
#include "common/clock.h"
#include "controller/rate_limiter.h"
#include "controller/refusal_log.h"
#include "controller/store.h"

namespace edge::controller {

// limits.exchange_per_minute / exchange_burst / refusal_log_lines_per_minute.
struct BootstrapLimits {
  double per_minute = 10;
  double burst = 10;
  size_t log_lines_per_minute = 5;
};

class BootstrapServiceImpl final
    : public me::prexorjustin::prexorcloud::protocol::BootstrapService::CallbackService {
 public:
  BootstrapServiceImpl(Store& store, const identity::CertificateAuthority& ca, Clock& clock,
                       BootstrapLimits limits = {})
      : store_(store),
        ca_(ca),
        clock_(clock),
        limits_(limits),
        limiter_(clock, limits.per_minute, limits.burst),
        refusals_(clock, limits.log_lines_per_minute) {}

  grpc::ServerUnaryReactor* ExchangeJoinToken(
      grpc::CallbackServerContext* ctx,
      const me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenRequest* req,
      me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse* resp) override;

  // The per-address rate limit (a token bucket): RESOURCE_EXHAUSTED naming the limit when
  // `peer_address` ("ipv4:1.2.3.4") has no token left. Checked before anything else.
  Status Admit(const std::string& peer_address);

  // The redemption itself, transport-free (unit-tested directly).
  Status Redeem(const me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenRequest& req,
                me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse* resp);

 private:
  Store& store_;
  const identity::CertificateAuthority& ca_;
  Clock& clock_;
  const BootstrapLimits limits_;
  TokenBucketLimiter limiter_;
  RefusalLog refusals_;
};

}  // namespace edge::controller
