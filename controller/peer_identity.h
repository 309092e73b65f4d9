// Who is calling: the controller's gRPC port accepts TLS clients with or without a client
// certificate (a certificate, when presented, must chain to the controller CA). Only
// BootstrapService (and the health/reflection services) may be called without one; every
// other handler calls RequireNodeIdentity first.
#pragma once

#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>

namespace edge::controller {

// The verified client certificate's subject CN, or nullopt when the peer presented none.
std::optional<std::string> PeerCommonName(const grpc::ServerContextBase& ctx);

// OK when the peer presented a verified certificate whose CN equals `claimed_node_id`;
// UNAUTHENTICATED without a certificate; PERMISSION_DENIED when the CN differs.
grpc::Status RequireNodeIdentity(const grpc::ServerContextBase& ctx,
                                 const std::string& claimed_node_id);

// Server credentials: our certificate chain and key, client certificates requested and,
// when present, verified against `client_ca_pem`.
std::shared_ptr<grpc::ServerCredentials> ControllerServerCredentials(
    const std::string& client_ca_pem, const std::string& cert_chain_pem,
    const std::string& key_pem);

}  // namespace edge::controller
