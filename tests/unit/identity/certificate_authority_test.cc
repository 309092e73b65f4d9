#include "agent/identity/certificate_authority.h"

#include <gtest/gtest.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "agent/identity/encoding.h"
#include "common/atomic_file.h"
#include "tests/support/temp_dir.h"

namespace edge::identity {
namespace {

Clock::WallTime Now() {
  return Clock::WallTime(std::chrono::seconds(1'800'000'000));
}

std::string ExtText(X509* cert, int nid) {
  int idx = X509_get_ext_by_NID(cert, nid, -1);
  if (idx < 0) return "";
  X509_EXTENSION* ext = X509_get_ext(cert, idx);
  BioPtr bio(BIO_new(BIO_s_mem()));
  X509V3_EXT_print(bio.get(), ext, 0, 0);
  char* p = nullptr;
  long n = BIO_get_mem_data(bio.get(), &p);
  return (X509_EXTENSION_get_critical(ext) ? "critical " : "") +
         std::string(p, static_cast<size_t>(n));
}

int64_t ValidityDays(X509* cert) {
  int days = 0, secs = 0;
  ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(cert), X509_get0_notAfter(cert));
  return days;
}

TEST(CertificateAuthority, CaHasTheContractProperties) {
  auto ca = CertificateAuthority::Create("edge-controller CA", Now());
  ASSERT_TRUE(ca) << ca.error().ToString();
  auto cert = CertFromPem(ca->cert_pem());
  ASSERT_TRUE(cert);
  EXPECT_EQ(ExtText(cert->get(), NID_basic_constraints), "critical CA:TRUE");
  EXPECT_EQ(ExtText(cert->get(), NID_key_usage), "critical Certificate Sign, CRL Sign");
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(cert->get())), EVP_PKEY_EC);
  EXPECT_GE(ValidityDays(cert->get()), 3650);
  EXPECT_EQ(ca->Pin(), "sha256:" + HexEncode(Sha256(CertToDer(cert->get()))));
  EXPECT_EQ(ca->Pin().size(), 7u + 64u);
}

TEST(CertificateAuthority, NodeCertMatchesWireSpec) {
  auto ca = CertificateAuthority::Create("ca", Now());
  auto issued = ca->IssueNodeCert("edge-07", Now());
  ASSERT_TRUE(issued) << issued.error().ToString();
  auto cert = CertFromPem(issued->cert_pem);
  ASSERT_TRUE(cert);
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert->get()), NID_commonName, cn, sizeof cn);
  EXPECT_STREQ(cn, "edge-07");
  EXPECT_EQ(ExtText(cert->get(), NID_subject_alt_name), "DNS:edge-07");
  EXPECT_EQ(ExtText(cert->get(), NID_ext_key_usage), "TLS Web Client Authentication");
  EXPECT_EQ(ExtText(cert->get(), NID_key_usage), "critical Digital Signature");
  EXPECT_EQ(ValidityDays(cert->get()), 365);
  EXPECT_EQ(issued->serial_hex.size(), 40u) << "160-bit serial";
  const ASN1_INTEGER* serial = X509_get0_serialNumber(cert->get());
  EXPECT_EQ(ASN1_STRING_length(serial), 20);
  auto ca_cert = CertFromPem(ca->cert_pem());
  EXPECT_TRUE(IsIssuedBy(cert->get(), ca_cert->get()));
  auto other = CertificateAuthority::Create("other", Now());
  EXPECT_FALSE(IsIssuedBy(cert->get(), CertFromPem(other->cert_pem())->get()));
  auto key = PrivateKeyFromPem(issued->key_pem);
  ASSERT_TRUE(key);
  EXPECT_EQ(X509_check_private_key(cert->get(), key->get()), 1);
}

TEST(CertificateAuthority, IpNodeIdBecomesAnIpSan) {
  auto ca = CertificateAuthority::Create("ca", Now());
  auto issued = ca->IssueNodeCert("10.0.0.7", Now());
  EXPECT_EQ(ExtText(CertFromPem(issued->cert_pem)->get(), NID_subject_alt_name),
            "IP Address:10.0.0.7");
}

TEST(CertificateAuthority, ServerCertAlwaysCoversLocalhost) {
  auto ca = CertificateAuthority::Create("ca", Now());
  auto issued = ca->IssueServerCert({"ctl.example.com", "10.1.2.3"}, Now());
  ASSERT_TRUE(issued);
  auto cert = CertFromPem(issued->cert_pem);
  EXPECT_EQ(ExtText(cert->get(), NID_subject_alt_name),
            "DNS:localhost, IP Address:127.0.0.1, DNS:ctl.example.com, IP Address:10.1.2.3");
  EXPECT_EQ(ExtText(cert->get(), NID_ext_key_usage), "TLS Web Server Authentication");
}

class CaDirTest : public ::testing::Test {
 protected:
  edge::testing::TempDir tmp_{"ca"};
  std::string dir_ = tmp_.path();
};

TEST_F(CaDirTest, LoadOrCreateWritesOnceWithModesThenReuses) {
  auto first = CertificateAuthority::LoadOrCreate(dir_ + "/ca", "ca", Now());
  ASSERT_TRUE(first) << first.error().ToString();
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/ca/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/ca/ca.crt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::stat((dir_ + "/ca").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto second = CertificateAuthority::LoadOrCreate(dir_ + "/ca", "ca", Now());
  ASSERT_TRUE(second);
  EXPECT_EQ(first->Pin(), second->Pin());
}

TEST_F(CaDirTest, HalfACaIsRefused) {
  ASSERT_TRUE(CertificateAuthority::LoadOrCreate(dir_ + "/ca", "ca", Now()));
  ::unlink((dir_ + "/ca/ca.key").c_str());
  auto r = CertificateAuthority::LoadOrCreate(dir_ + "/ca", "ca", Now());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("only one of"), std::string::npos);
}

TEST_F(CaDirTest, SaveThenLoadGivesTheSameCaThatStillIssues) {
  auto ca = CertificateAuthority::Create("saved", Now());
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->Save(dir_ + "/x/ca"));
  auto loaded = CertificateAuthority::Load(dir_ + "/x/ca");
  ASSERT_TRUE(loaded) << loaded.error().ToString();
  EXPECT_EQ(loaded->Pin(), ca->Pin());
  auto leaf = loaded->IssueNodeCert("edge-09", Now());
  ASSERT_TRUE(leaf);
  auto leaf_cert = CertFromPem(leaf->cert_pem);
  auto ca_cert = CertFromPem(ca->cert_pem());
  EXPECT_TRUE(IsIssuedBy(leaf_cert->get(), ca_cert->get()));
  auto missing = CertificateAuthority::Load(dir_ + "/nowhere");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST(CertificateAuthority, MismatchedKeyIsRefused) {
  auto a = CertificateAuthority::Create("a", Now());
  auto b = CertificateAuthority::Create("b", Now());
  auto leaf = a->IssueNodeCert("n", Now());
  auto r = CertificateAuthority::FromPem(leaf->key_pem, b->cert_pem());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("does not match"), std::string::npos);
}

}  // namespace
}  // namespace edge::identity
