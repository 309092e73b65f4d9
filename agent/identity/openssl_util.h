// Internal to edge_identity: owning pointers for OpenSSL objects, PEM conversions and the
// OpenSSL error queue as text.
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace edge::identity {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

// The OpenSSL error queue (and clears it), for messages.
std::string OpenSslErrors();

Result<PkeyPtr> PrivateKeyFromPem(std::string_view pem);
Result<PkeyPtr> PublicKeyFromPem(std::string_view pem);
Result<std::string> PrivateKeyToPem(EVP_PKEY* key);  // PKCS#8, unencrypted
Result<std::string> PublicKeyToPem(EVP_PKEY* key);
Result<X509Ptr> CertFromPem(std::string_view pem);
// Every certificate in a PEM bundle, in order.
Result<std::vector<X509Ptr>> CertsFromPem(std::string_view pem);
Result<std::string> CertToPem(X509* cert);
std::string CertToDer(X509* cert);

}  // namespace edge::identity
