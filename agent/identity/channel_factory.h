// Every gRPC channel the agent opens to its controller comes from here (design.md §6):
// before enrollment a TLS channel without a client certificate whose server is checked
// against the join token's CA pin; after it, mTLS with the keystore's key and certificate
// and certs/ca.pem as the only trust anchor.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>

#include "agent/identity/keystore_files.h"

namespace edge::identity {

// Filled by the bootstrap channel's certificate check when it refuses the server.
struct PinFailure {
  std::mutex mu;
  std::string reason;
  std::string Get() {
    std::lock_guard lock(mu);
    return reason;
  }
};

class ChannelFactory {
 public:
  explicit ChannelFactory(TlsIdentity identity) : identity_(std::move(identity)) {}

  // mTLS to `target` (host:port). `server_name_override` replaces the name the server
  // certificate must carry (empty = the host of `target`). `max_message_bytes` > 0 sets the
  // largest message sent or received (edge.max_message_bytes; gRPC's default receive limit
  // is 4 MiB).
  std::shared_ptr<grpc::Channel> Mtls(const std::string& target,
                                      const std::string& server_name_override = "",
                                      int max_message_bytes = 0) const;
  // TLS with a given trust anchor but no client certificate (to show what the controller
  // refuses without one).
  static std::shared_ptr<grpc::Channel> TlsNoClientCert(const std::string& target,
                                                        const std::string& ca_pem);

  // The enrollment channel: TLS, no client certificate. With `ca_pin` ("sha256:<hex>") the
  // server's chain must contain the pinned CA and the server certificate must be issued by
  // it; without a pin any server certificate is accepted — the single-use join token is the
  // proof (wire.md §1, "Trust at first contact").
  // When the pin check refuses the server, the reason is stored in `*pin_failure` (the RPC
  // itself only fails with UNAVAILABLE), so the caller can say why and not retry.
  static std::shared_ptr<grpc::Channel> Bootstrap(
      const std::string& target, const std::string& ca_pin,
      std::shared_ptr<PinFailure> pin_failure = nullptr);

  const TlsIdentity& identity() const { return identity_; }

 private:
  TlsIdentity identity_;
};

// The TLS material of an enrolled node as gRPC wants it: the keystore's key and certificate
// chain (leaf first) and certs/ca.pem as the only root.
grpc::SslCredentialsOptions MtlsOptions(const TlsIdentity& identity);

// The check the bootstrap channel applies: OK when the leaf of `chain_pem` (server leaf first)
// is a TLS server certificate (serverAuth) and another certificate in the chain has the pin
// `ca_pin` (hex case-insensitive) and issued the leaf; UNAUTHENTICATED with the reason otherwise.
Status CheckServerChainAgainstPin(const std::string& chain_pem, const std::string& ca_pin);

}  // namespace edge::identity
