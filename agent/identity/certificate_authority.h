// The controller's certificate authority (wire.md §1): an EC P-256 CA (10 years, CA:true
// critical, keyCertSign|cRLSign) that mints the controller's server certificate and each
// node's client certificate at enrollment. Owns the CA key; the caller owns the files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/identity/openssl_util.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::identity {

struct IssuedCert {
  std::string key_pem;   // PKCS#8 PEM of the new private key
  std::string cert_pem;  // the leaf certificate
  std::string serial_hex;
};

class CertificateAuthority {
 public:
  // Creates a new CA named `common_name`, valid 10 years from `now`.
  static Result<CertificateAuthority> Create(std::string_view common_name, Clock::WallTime now);
  // Loads `dir`/ca.key and `dir`/ca.crt, or creates them (key 0600, cert 0644, dir 0700).
  static Result<CertificateAuthority> LoadOrCreate(const std::string& dir,
                                                   std::string_view common_name,
                                                   Clock::WallTime now);
  static Result<CertificateAuthority> FromPem(std::string_view key_pem, std::string_view cert_pem);
  // Loads `dir`/ca.key and `dir`/ca.crt. NOT_FOUND when either is missing.
  static Result<CertificateAuthority> Load(const std::string& dir);
  // Writes `dir`/ca.key (PKCS#8 PEM, 0600) and `dir`/ca.crt (0644) atomically, creating `dir`
  // 0700. If the certificate cannot be written the key written by this call is removed.
  Status Save(const std::string& dir) const;

  // Server certificate: EKU serverAuth, SANs from `names` (DNS names, or IPs when they parse
  // as one) plus localhost and 127.0.0.1; `days` of validity.
  Result<IssuedCert> IssueServerCert(const std::vector<std::string>& names, Clock::WallTime now,
                                     int days = 825) const;
  // Node client certificate: CN = SAN = node_id, EKU clientAuth, keyUsage digitalSignature
  // (critical), 365 days, 160-bit random positive serial.
  Result<IssuedCert> IssueNodeCert(const std::string& node_id, Clock::WallTime now) const;

  const std::string& cert_pem() const { return cert_pem_; }
  // "sha256:<hex of the CA certificate's DER>" — the `cah` claim / `ca_pin`.
  std::string Pin() const;

 private:
  CertificateAuthority(PkeyPtr key, X509Ptr cert, std::string cert_pem)
      : key_(std::move(key)), cert_(std::move(cert)), cert_pem_(std::move(cert_pem)) {}
  PkeyPtr key_;
  X509Ptr cert_;
  std::string cert_pem_;
};

// The pin of a certificate given as PEM (the first certificate in it).
Result<std::string> CaPinOfPem(std::string_view cert_pem);
// True when `leaf` is signed by `issuer`'s key and names it as issuer.
bool IsIssuedBy(X509* leaf, X509* issuer);

}  // namespace edge::identity
