#include "agent/identity/certificate_authority.h"

#include <arpa/inet.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>

#include "agent/identity/encoding.h"
#include "common/atomic_file.h"
#include "common/random.h"

namespace edge::identity {
namespace {

bool IsIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1;
}

// 160-bit random positive serial.
std::string SetRandomSerial(X509* cert) {
  std::string bytes = SecureRandomBytes(20);
  bytes[0] = static_cast<char>((bytes[0] & 0x7f) | 0x01);  // positive, full length
  BIGNUM* bn = BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()), 20, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
  BN_free(bn);
  return HexEncode(bytes);
}

void SetValidity(X509* cert, Clock::WallTime now, int64_t days) {
  time_t t = std::chrono::system_clock::to_time_t(now);
  ASN1_TIME_set(X509_getm_notBefore(cert), t - 300);  // 5 min of clock-skew slack
  ASN1_TIME_adj(X509_getm_notAfter(cert), t, static_cast<int>(days), 0);
}

void SetCn(X509_NAME* name, std::string_view cn) {
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.data()),
                             static_cast<int>(cn.size()), -1, 0);
}

}  // namespace

Result<CertificateAuthority> CertificateAuthority::Create(std::string_view common_name,
                                                          Clock::WallTime now) {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return MakeError(ErrorCode::kInternal, "create CA: " + OpenSslErrors());
  X509_set_version(cert.get(), 2);
  SetRandomSerial(cert.get());
  SetValidity(cert.get(), now, 3652);
  SetCn(X509_get_subject_name(cert.get()), common_name);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), key.get());
  if (!AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExt(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
      X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) {
    return MakeError(ErrorCode::kInternal, "create CA: " + OpenSslErrors());
  }
  auto pem = CertToPem(cert.get());
  if (!pem) return std::unexpected(pem.error());
  return CertificateAuthority(std::move(key), std::move(cert), std::move(*pem));
}

Result<CertificateAuthority> CertificateAuthority::FromPem(std::string_view key_pem,
                                                           std::string_view cert_pem) {
  auto key = PrivateKeyFromPem(key_pem);
  if (!key) return std::unexpected(key.error());
  auto cert = CertFromPem(cert_pem);
  if (!cert) return std::unexpected(cert.error());
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInvalidArgument, "CA key does not match the CA certificate");
  }
  if (X509_check_ca(cert->get()) == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "certificate is not a CA (basicConstraints CA:true missing)");
  }
  return CertificateAuthority(std::move(*key), std::move(*cert), std::string(cert_pem));
}

Result<CertificateAuthority> CertificateAuthority::Load(const std::string& dir) {
  auto key_pem = ReadFile(dir + "/ca.key", 1 << 20);
  if (!key_pem) return std::unexpected(key_pem.error());
  auto cert_pem = ReadFile(dir + "/ca.crt", 1 << 20);
  if (!cert_pem) return std::unexpected(cert_pem.error());
  auto ca = FromPem(*key_pem, *cert_pem);
  if (!ca) return MakeError(ca.error().code, "CA in " + dir + ": " + ca.error().message);
  return ca;
}

Status CertificateAuthority::Save(const std::string& dir) const {
  const std::string key_path = dir + "/ca.key", cert_path = dir + "/ca.crt";
  auto k = PrivateKeyToPem(key_.get());
  if (!k) return std::unexpected(k.error());
  if (auto st = MakeDirs(dir, 0700); !st) return st;
  if (auto st = WriteFileAtomic(key_path, *k, {.mode = 0600}); !st) return st;
  if (auto st = WriteFileAtomic(cert_path, cert_pem_, {.mode = 0644}); !st) {
    ::unlink(key_path.c_str());
    return st;
  }
  return OkStatus();
}

Result<CertificateAuthority> CertificateAuthority::LoadOrCreate(const std::string& dir,
                                                                std::string_view common_name,
                                                                Clock::WallTime now) {
  const std::string key_path = dir + "/ca.key", cert_path = dir + "/ca.crt";
  const bool have_key = ::access(key_path.c_str(), F_OK) == 0;
  const bool have_cert = ::access(cert_path.c_str(), F_OK) == 0;
  if (have_key && have_cert) return Load(dir);
  if (have_key || have_cert) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "only one of " + key_path + " and " + cert_path +
                         " exists: restore the other or remove both to create a new CA");
  }
  auto ca = Create(common_name, now);
  if (!ca) return ca;
  if (auto st = ca->Save(dir); !st) return std::unexpected(st.error());
  return ca;
}

Result<IssuedCert> CertificateAuthority::IssueServerCert(const std::vector<std::string>& names,
                                                         Clock::WallTime now, int days) const {
  std::vector<std::string> all = {"localhost", "127.0.0.1"};
  for (const auto& n : names) {
    if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
  }
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return MakeError(ErrorCode::kInternal, "server cert: " + OpenSslErrors());
  X509_set_version(cert.get(), 2);
  std::string serial = SetRandomSerial(cert.get());
  SetValidity(cert.get(), now, days);
  SetCn(X509_get_subject_name(cert.get()), all.size() > 2 ? all[2] : "localhost");
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get()));
  X509_set_pubkey(cert.get(), key.get());
  std::string san;
  for (const auto& n : all)
    san += (san.empty() ? "" : ",") + std::string(IsIp(n) ? "IP:" : "DNS:") + n;
  if (!AddExt(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExt(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExt(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth") ||
      !AddExt(cert.get(), cert_.get(), NID_subject_alt_name, san) ||
      !AddExt(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid:always") ||
      X509_sign(cert.get(), key_.get(), EVP_sha256()) <= 0) {
    return MakeError(ErrorCode::kInternal, "server cert: " + OpenSslErrors());
  }
  auto key_pem = PrivateKeyToPem(key.get());
  auto cert_pem = CertToPem(cert.get());
  if (!key_pem || !cert_pem) return MakeError(ErrorCode::kInternal, "server cert: encode failed");
  return IssuedCert{*key_pem, *cert_pem, serial};
}

Result<IssuedCert> CertificateAuthority::IssueNodeCert(const std::string& node_id,
                                                       Clock::WallTime now) const {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return MakeError(ErrorCode::kInternal, "node cert: " + OpenSslErrors());
  X509_set_version(cert.get(), 2);
  std::string serial = SetRandomSerial(cert.get());
  SetValidity(cert.get(), now, 365);
  SetCn(X509_get_subject_name(cert.get()), node_id);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get()));
  X509_set_pubkey(cert.get(), key.get());
  if (!AddExt(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExt(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExt(cert.get(), cert_.get(), NID_ext_key_usage, "clientAuth") ||
      !AddExt(cert.get(), cert_.get(), NID_subject_alt_name,
              std::string(IsIp(node_id) ? "IP:" : "DNS:") + node_id) ||
      !AddExt(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid:always") ||
      X509_sign(cert.get(), key_.get(), EVP_sha256()) <= 0) {
    return MakeError(ErrorCode::kInternal, "node cert for \"" + node_id + "\": " + OpenSslErrors());
  }
  auto key_pem = PrivateKeyToPem(key.get());
  auto cert_pem = CertToPem(cert.get());
  if (!key_pem || !cert_pem) return MakeError(ErrorCode::kInternal, "node cert: encode failed");
  return IssuedCert{*key_pem, *cert_pem, serial};
}

std::string CertificateAuthority::Pin() const {
  return "sha256:" + HexEncode(Sha256(CertToDer(cert_.get())));
}

Result<std::string> CaPinOfPem(std::string_view cert_pem) {
  auto cert = CertFromPem(cert_pem);
  if (!cert) return std::unexpected(cert.error());
  return "sha256:" + HexEncode(Sha256(CertToDer(cert->get())));
}

bool IsIssuedBy(X509* leaf, X509* issuer) {
  EVP_PKEY* pub = X509_get0_pubkey(issuer);
  bool ok = pub != nullptr && X509_verify(leaf, pub) == 1 &&
            X509_NAME_cmp(X509_get_issuer_name(leaf), X509_get_subject_name(issuer)) == 0;
  ERR_clear_error();
  return ok;
}

}  // namespace edge::identity
