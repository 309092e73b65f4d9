#include "agent/identity/pkcs12.h"

#include <openssl/pkcs12.h>

#include "agent/identity/openssl_util.h"
#include "common/random.h"

namespace edge::identity {
namespace {
struct P12Free {
  void operator()(PKCS12* p) const { PKCS12_free(p); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
}  // namespace

Result<std::string> CreatePkcs12(std::string_view key_pem, std::string_view cert_pem,
                                 std::string_view ca_pem, const std::string& password,
                                 const std::string& friendly_name) {
  static_assert(PKCS12_DEFAULT_ITER >= 2048, "PBKDF2 / MAC iteration count below 2048");
  auto key = PrivateKeyFromPem(key_pem);
  if (!key) return std::unexpected(key.error());
  auto cert = CertFromPem(cert_pem);
  if (!cert) return std::unexpected(cert.error());
  auto cas = CertsFromPem(ca_pem);
  if (!cas) return std::unexpected(cas.error());
  std::unique_ptr<STACK_OF(X509), StackFree> chain(sk_X509_new_null());
  for (auto& c : *cas)
    sk_X509_push(chain.get(), c.release());
  // mac_iter -1: no MAC yet; it is added below with SHA-256.
  std::unique_ptr<PKCS12, P12Free> p12(PKCS12_create_ex(
      password.c_str(), friendly_name.c_str(), key->get(), cert->get(), chain.get(),
      NID_aes_256_cbc, NID_aes_256_cbc, PKCS12_DEFAULT_ITER, -1, 0, nullptr, nullptr));
  if (!p12 || PKCS12_set_mac(p12.get(), password.c_str(), -1, nullptr, 0, PKCS12_DEFAULT_ITER,
                             EVP_sha256()) != 1) {
    return MakeError(ErrorCode::kInternal, "create PKCS#12: " + OpenSslErrors());
  }
  unsigned char* der = nullptr;
  int n = i2d_PKCS12(p12.get(), &der);
  if (n <= 0) return MakeError(ErrorCode::kInternal, "encode PKCS#12: " + OpenSslErrors());
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

Result<KeystoreContents> ParsePkcs12(std::string_view der, const std::string& password) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<PKCS12, P12Free> p12(d2i_PKCS12(nullptr, &p, static_cast<long>(der.size())));
  if (!p12) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInvalidArgument, "not a PKCS#12 keystore");
  }
  if (PKCS12_verify_mac(p12.get(), password.c_str(), -1) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kUnauthenticated,
                     "PKCS#12 password is wrong (MAC does not verify)");
  }
  EVP_PKEY* pkey = nullptr;
  X509* cert = nullptr;
  STACK_OF(X509)* ca = nullptr;
  if (PKCS12_parse(p12.get(), password.c_str(), &pkey, &cert, &ca) != 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot read PKCS#12 contents: " + OpenSslErrors());
  }
  PkeyPtr key_owner(pkey);
  X509Ptr cert_owner(cert);
  std::unique_ptr<STACK_OF(X509), StackFree> ca_owner(ca);
  if (!pkey || !cert) return MakeError(ErrorCode::kInvalidArgument, "PKCS#12 has no key entry");
  KeystoreContents out;
  auto k = PrivateKeyToPem(pkey);
  auto c = CertToPem(cert);
  if (!k || !c) return MakeError(ErrorCode::kInternal, "re-encode PKCS#12 contents");
  out.key_pem = *k;
  out.cert_pem = *c;
  for (int i = 0; ca && i < sk_X509_num(ca); ++i) {
    if (auto pem = CertToPem(sk_X509_value(ca, i))) out.chain_pem += *pem;
  }
  return out;
}

std::string GeneratePkcs12Password() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";  // 62
  std::string out;
  while (out.size() < 32) {
    for (unsigned char b : SecureRandomBytes(64)) {
      if (b >= 248) continue;  // 248 = 4 * 62: reject to stay unbiased
      out += kAlphabet[b % 62];
      if (out.size() == 32) break;
    }
  }
  return out;
}

}  // namespace edge::identity
