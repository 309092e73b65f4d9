#include "agent/identity/channel_factory.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/x509v3.h>

#include <cctype>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/join_token_claims.h"
#include "agent/identity/openssl_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/secure_compare.h"

namespace edge::identity {
namespace {

class PinVerifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  PinVerifier(std::string pin, std::shared_ptr<PinFailure> failure)
      : pin_(std::move(pin)), failure_(std::move(failure)) {}
  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>, grpc::Status* sync_status) override {
    if (pin_.empty()) {
      *sync_status = grpc::Status::OK;
      return true;
    }
    auto chain = request->peer_cert_full_chain();
    auto st = CheckServerChainAgainstPin(std::string(chain.data(), chain.size()), pin_);
    *sync_status =
        st ? grpc::Status::OK : grpc::Status(grpc::StatusCode::UNAUTHENTICATED, st.error().message);
    if (!st && failure_) {
      std::lock_guard lock(failure_->mu);
      failure_->reason = st.error().message;
    }
    return true;
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  std::string pin_;
  std::shared_ptr<PinFailure> failure_;
};

}  // namespace

Status CheckServerChainAgainstPin(const std::string& chain_pem, const std::string& ca_pin) {
  auto certs = CertsFromPem(chain_pem);
  if (!certs || certs->empty()) {
    return MakeError(ErrorCode::kUnauthenticated, "the controller presented no certificate chain");
  }
  X509* leaf = (*certs)[0].get();
  // A certificate of the pinned CA that is not for TLS servers (a node's clientAuth
  // certificate, say) must not let its holder pose as the controller.
  if (X509_check_purpose(leaf, X509_PURPOSE_SSL_SERVER, 0) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kUnauthenticated,
                     "the controller's certificate is not a TLS server certificate (no "
                     "serverAuth extended key usage): refusing it as the controller");
  }
  std::string want(ca_pin);
  for (char& ch : want)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (auto& c : *certs) {
    if (!ConstantTimeEquals(CaPin(c.get()), want)) continue;
    if (c.get() != leaf && IsIssuedBy(leaf, c.get())) return OkStatus();
  }
  return MakeError(ErrorCode::kUnauthenticated,
                   "the controller's certificate chain does not lead to the CA pinned by the join "
                   "token (" +
                       ca_pin +
                       "): this token is for another controller, or the "
                       "connection is being intercepted");
}

grpc::SslCredentialsOptions MtlsOptions(const TlsIdentity& identity) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = identity.ca_pem;
  opts.pem_private_key = identity.key_pem;
  opts.pem_cert_chain = identity.cert_chain_pem;
  return opts;
}

std::shared_ptr<grpc::Channel> ChannelFactory::Mtls(const std::string& target,
                                                    const std::string& server_name_override,
                                                    int max_message_bytes) const {
  grpc::SslCredentialsOptions opts = MtlsOptions(identity_);
  grpc::ChannelArguments args;
  if (!server_name_override.empty()) args.SetSslTargetNameOverride(server_name_override);
  if (max_message_bytes > 0) {
    args.SetMaxReceiveMessageSize(max_message_bytes);
    args.SetMaxSendMessageSize(max_message_bytes);
  }
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(opts), args);
}

std::shared_ptr<grpc::Channel> ChannelFactory::TlsNoClientCert(const std::string& target,
                                                               const std::string& ca_pem) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ca_pem;
  return grpc::CreateChannel(target, grpc::SslCredentials(opts));
}

std::shared_ptr<grpc::Channel> ChannelFactory::Bootstrap(const std::string& target,
                                                         const std::string& ca_pin,
                                                         std::shared_ptr<PinFailure> pin_failure) {
  grpc::experimental::TlsChannelCredentialsOptions opts;
  opts.set_verify_server_certs(false);  // no trust anchor yet: the pin check below decides
  opts.set_check_call_host(false);
  // gRPC 1.51 gives a TLS client channel without a root certificate the host's default roots
  // (grpc_ssl_tsi_client_handshaker_factory_init), verifying or not: it reads the system CA
  // bundle, or /usr/share/grpc/roots.pem, into a store held for the life of the process
  // (0.7 MiB of heap), and on a host with neither (debian:bookworm-slim has no CA bundle, and
  // the package links gRPC statically) the channel cannot be made at all, so enrollment
  // failed. The pin decides here, not a root: the channel gets one it never uses, a
  // self-signed certificate made now whose key is dropped at once.
  if (auto placeholder =
          CertificateAuthority::Create("edge-agent enrollment placeholder root (never trusted)",
                                       SystemClock::Instance().Now())) {
    opts.set_certificate_provider(
        std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
            placeholder->cert_pem()));
    opts.watch_root_certs();
  } else {
    log::Get("enroll")->warn(
        "no placeholder root for the enrollment channel ({}): gRPC falls back to the host's "
        "root certificates, which a host without a CA bundle does not have",
        placeholder.error().message);
  }
  opts.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<PinVerifier>(ca_pin,
                                                                           std::move(pin_failure)));
  return grpc::CreateChannel(target, grpc::experimental::TlsCredentials(opts));
}

}  // namespace edge::identity
