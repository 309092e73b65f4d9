#include "controller/peer_identity.h"

#include <grpcpp/security/auth_context.h>

namespace edge::controller {

std::optional<std::string> PeerCommonName(const grpc::ServerContextBase& ctx) {
  auto auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return std::nullopt;
  auto cn = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  if (cn.empty()) return std::nullopt;
  return std::string(cn.front().data(), cn.front().size());
}

grpc::Status RequireNodeIdentity(const grpc::ServerContextBase& ctx,
                                 const std::string& claimed_node_id) {
  auto cn = PeerCommonName(ctx);
  if (!cn) {
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        "a client certificate issued by this controller is required (enroll first)");
  }
  if (*cn != claimed_node_id) {
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        "client certificate is for node \"" + *cn + "\", not \"" + claimed_node_id + "\"");
  }
  return grpc::Status::OK;
}

std::shared_ptr<grpc::ServerCredentials> ControllerServerCredentials(
    const std::string& client_ca_pem, const std::string& cert_chain_pem,
    const std::string& key_pem) {
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = client_ca_pem;
  opts.pem_key_cert_pairs.push_back({key_pem, cert_chain_pem});
  return grpc::SslServerCredentials(opts);
}

}  // namespace edge::controller
