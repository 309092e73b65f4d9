// BootstrapService.ExchangeJoinToken (contract 001, wire.md §1): redeems a join token once
// and returns the node's freshly minted PKCS#12 keystore, its password and the CA. The only
// RPC callable without a client certificate. Failure codes follow the contract's table.
#pragma once

#include "agent/identity/certificate_authority.h"
#include "bootstrap.grpc.pb.h"
#include "common/clock.h"
#include "tests/controller/store.h"

namespace edge::controller {

class BootstrapServiceImpl final
    : public me::prexorjustin::prexorcloud::protocol::BootstrapService::CallbackService {
 public:
  BootstrapServiceImpl(Store& store, const identity::CertificateAuthority& ca, Clock& clock)
      : store_(store), ca_(ca), clock_(clock) {}

  grpc::ServerUnaryReactor* ExchangeJoinToken(
      grpc::CallbackServerContext* ctx,
      const me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenRequest* req,
      me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse* resp) override;

  // The redemption itself, transport-free (unit-tested directly).
  Status Redeem(const me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenRequest& req,
                me::prexorjustin::prexorcloud::protocol::ExchangeJoinTokenResponse* resp);

 private:
  Store& store_;
  const identity::CertificateAuthority& ca_;
  Clock& clock_;
};

}  // namespace edge::controller
