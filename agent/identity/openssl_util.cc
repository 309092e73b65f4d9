#include "agent/identity/openssl_util.h"

namespace edge::identity {

std::string OpenSslErrors() {
  std::string out;
  unsigned long e;
  char buf[256];
  while ((e = ERR_get_error()) != 0) {
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

namespace {
BioPtr MemBio(std::string_view data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}
std::string BioString(BIO* bio) {
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  return std::string(p, static_cast<size_t>(n));
}
}  // namespace

Result<PkeyPtr> PrivateKeyFromPem(std::string_view pem) {
  auto bio = MemBio(pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key)
    return MakeError(ErrorCode::kInvalidArgument, "not a PEM private key: " + OpenSslErrors());
  return key;
}

Result<PkeyPtr> PublicKeyFromPem(std::string_view pem) {
  auto bio = MemBio(pem);
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key)
    return MakeError(ErrorCode::kInvalidArgument, "not a PEM public key: " + OpenSslErrors());
  return key;
}

Result<std::string> PrivateKeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return MakeError(ErrorCode::kInternal, "encode private key: " + OpenSslErrors());
  }
  return BioString(bio.get());
}

Result<std::string> PublicKeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    return MakeError(ErrorCode::kInternal, "encode public key: " + OpenSslErrors());
  }
  return BioString(bio.get());
}

Result<X509Ptr> CertFromPem(std::string_view pem) {
  auto bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert)
    return MakeError(ErrorCode::kInvalidArgument, "not a PEM certificate: " + OpenSslErrors());
  return cert;
}

Result<std::vector<X509Ptr>> CertsFromPem(std::string_view pem) {
  auto bio = MemBio(pem);
  std::vector<X509Ptr> out;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))
    out.emplace_back(c);
  ERR_clear_error();  // the end of the bundle leaves a "no start line" error
  if (out.empty()) return MakeError(ErrorCode::kInvalidArgument, "no PEM certificate found");
  return out;
}

Result<std::string> CertToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) {
    return MakeError(ErrorCode::kInternal, "encode certificate: " + OpenSslErrors());
  }
  return BioString(bio.get());
}

std::string CertToDer(X509* cert) {
  unsigned char* der = nullptr;
  int n = i2d_X509(cert, &der);
  if (n <= 0) return {};
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

}  // namespace edge::identity
