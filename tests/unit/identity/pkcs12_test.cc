#include "agent/identity/pkcs12.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/channel_factory.h"
#include "agent/identity/keystore_files.h"
#include "common/atomic_file.h"
#include "tests/support/temp_dir.h"

namespace edge::identity {
namespace {

Clock::WallTime Now() {
  return std::chrono::system_clock::now();
}

class KeystoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_.emplace(*CertificateAuthority::Create("test CA", Now()));
    leaf_ = *ca_->IssueNodeCert("edge-01", Now());
    password_ = GeneratePkcs12Password();
    auto der = CreatePkcs12(leaf_.key_pem, leaf_.cert_pem, ca_->cert_pem(), password_);
    ASSERT_TRUE(der) << der.error().ToString();
    der_ = *der;
  }
  edge::testing::TempDir tmp_{"p12"};
  std::string dir_ = tmp_.path(), password_, der_;
  std::optional<CertificateAuthority> ca_;
  IssuedCert leaf_;
};

TEST(Pkcs12Password, Is32AlphanumericCharactersAndVaries) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    auto p = GeneratePkcs12Password();
    ASSERT_EQ(p.size(), 32u);
    for (char c : p)
      ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << p;
    seen.insert(p);
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST_F(KeystoreTest, RoundTripsKeyLeafAndChain) {
  auto c = ParsePkcs12(der_, password_);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->cert_pem, leaf_.cert_pem);
  EXPECT_EQ(c->chain_pem, ca_->cert_pem());
  EXPECT_EQ(*PrivateKeyToPem(PrivateKeyFromPem(c->key_pem)->get()),
            *PrivateKeyToPem(PrivateKeyFromPem(leaf_.key_pem)->get()));
}

TEST_F(KeystoreTest, WrongPasswordAndGarbageAreClearErrors) {
  auto wrong = ParsePkcs12(der_, "not-the-password");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kUnauthenticated);
  auto garbage = ParsePkcs12("definitely not DER", password_);
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(ParsePkcs12(der_.substr(0, der_.size() / 2), password_));
}

TEST_F(KeystoreTest, OpenSsl3ReadsItWithoutLegacy) {
  const std::string p12 = dir_ + "/node.p12", pass = dir_ + "/node.p12.pass";
  ASSERT_TRUE(WriteFileAtomic(p12, der_));
  ASSERT_TRUE(WriteFileAtomic(pass, password_));
  const std::string cmd =
      "openssl pkcs12 -in " + p12 + " -passin file:" + pass + " -info -noout 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    out.append(buf, n);
  int rc = ::pclose(f);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("MAC: sha256"), std::string::npos) << out;
  EXPECT_NE(out.find("AES-256-CBC"), std::string::npos) << out;
  EXPECT_EQ(out.find("RC2"), std::string::npos) << out;
  EXPECT_EQ(out.find("3DES"), std::string::npos) << out;
}

TEST_F(KeystoreTest, KeystoreFilesHaveTheirModesAndLoadBack) {
  ASSERT_FALSE(KeystoreFiles::Exists(dir_));
  ASSERT_TRUE(KeystoreFiles::CheckWritable(dir_));
  ASSERT_TRUE(KeystoreFiles::Write(dir_, der_, password_, ca_->cert_pem()));
  EXPECT_TRUE(KeystoreFiles::Exists(dir_));
  struct stat st {};
  for (auto [name, mode] : {std::pair{"certs", 0700u},
                            {"certs/node.p12", 0600u},
                            {"certs/node.p12.pass", 0600u},
                            {"certs/ca.pem", 0644u}}) {
    ASSERT_EQ(::stat((dir_ + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, mode) << name;
  }
  auto id = KeystoreFiles::Load(dir_);
  ASSERT_TRUE(id) << id.error().ToString();
  EXPECT_EQ(id->ca_pem, ca_->cert_pem());
  EXPECT_EQ(id->cert_chain_pem.rfind(leaf_.cert_pem, 0), 0u) << "leaf first";
  // Exactly the three files: no probe or temp file left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_ + "/certs"),
                          std::filesystem::directory_iterator()),
            3);
}

TEST_F(KeystoreTest, LoadToleratesATrailingNewlineInThePasswordFileButNotAWrongPassword) {
  ASSERT_TRUE(KeystoreFiles::Write(dir_, der_, password_, ca_->cert_pem()));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/certs/node.p12.pass", password_ + "\n"));
  EXPECT_TRUE(KeystoreFiles::Load(dir_));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/certs/node.p12.pass", "x" + password_));
  auto r = KeystoreFiles::Load(dir_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(r.error().message.find("node.p12"), std::string::npos);
  EXPECT_NE(r.error().message.find("password is wrong"), std::string::npos);
  EXPECT_EQ(r.error().message.find(password_), std::string::npos) << "never echo the password";
}

TEST_F(KeystoreTest, FailedWriteLeavesNoPartialKeystore) {
  // ca.pem's place is taken by a non-empty directory: the last rename fails.
  std::filesystem::create_directories(dir_ + "/certs/ca.pem/x");
  auto st = KeystoreFiles::Write(dir_, der_, password_, ca_->cert_pem());
  ASSERT_FALSE(st);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/certs/node.p12"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/certs/node.p12.pass"));
}

TEST_F(KeystoreTest, ServerChainPinCheck) {
  auto server = ca_->IssueServerCert({}, Now());
  std::string chain = server->cert_pem + ca_->cert_pem();
  EXPECT_TRUE(CheckServerChainAgainstPin(chain, ca_->Pin()));
  auto other = CertificateAuthority::Create("other", Now());
  auto st = CheckServerChainAgainstPin(chain, other->Pin());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(st.error().message.find("another controller"), std::string::npos);
  // A chain that merely carries the pinned CA but whose leaf it did not issue is refused.
  auto foreign = other->IssueServerCert({}, Now());
  EXPECT_FALSE(CheckServerChainAgainstPin(foreign->cert_pem + ca_->cert_pem(), ca_->Pin()));
  EXPECT_FALSE(CheckServerChainAgainstPin("garbage", ca_->Pin()));
}

TEST_F(KeystoreTest, PinCheckRefusesANodeCertificatePosingAsTheController) {
  // Another enrolled node holds a certificate of the same CA, but for clientAuth only.
  auto st = CheckServerChainAgainstPin(leaf_.cert_pem + ca_->cert_pem(), ca_->Pin());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(st.error().message.find("not a TLS server certificate"), std::string::npos);
  // The CA certificate itself is not a server certificate either.
  EXPECT_FALSE(CheckServerChainAgainstPin(ca_->cert_pem(), ca_->Pin()));
}

TEST_F(KeystoreTest, PinHexIsCaseInsensitive) {
  auto server = ca_->IssueServerCert({}, Now());
  std::string upper = ca_->Pin();
  for (size_t i = 7; i < upper.size(); ++i)
    upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
  EXPECT_TRUE(CheckServerChainAgainstPin(server->cert_pem + ca_->cert_pem(), upper));
}

TEST_F(KeystoreTest, MtlsOptionsComeFromTheKeystore) {
  ASSERT_TRUE(KeystoreFiles::Write(dir_, der_, password_, ca_->cert_pem()));
  auto id = KeystoreFiles::Load(dir_);
  ASSERT_TRUE(id);
  auto opts = MtlsOptions(*id);
  EXPECT_EQ(opts.pem_root_certs, ca_->cert_pem()) << "ca.pem is the only root";
  EXPECT_EQ(opts.pem_cert_chain, leaf_.cert_pem + ca_->cert_pem());
  EXPECT_EQ(*PrivateKeyToPem(PrivateKeyFromPem(opts.pem_private_key)->get()),
            *PrivateKeyToPem(PrivateKeyFromPem(leaf_.key_pem)->get()));
}

TEST_F(KeystoreTest, FriendlyNameIsStored) {
  auto der = CreatePkcs12(leaf_.key_pem, leaf_.cert_pem, ca_->cert_pem(), password_, "node-key");
  ASSERT_TRUE(der);
  const std::string p12 = dir_ + "/f.p12", pass = dir_ + "/f.pass";
  ASSERT_TRUE(WriteFileAtomic(p12, *der));
  ASSERT_TRUE(WriteFileAtomic(pass, password_));
  const std::string cmd =
      "openssl pkcs12 -in " + p12 + " -passin file:" + pass + " -nodes -nokeys -clcerts 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    out.append(buf, n);
  EXPECT_EQ(::pclose(f), 0) << out;
  EXPECT_NE(out.find("friendlyName: node-key"), std::string::npos) << out;
  // Default name is "cert" (wire.md §1).
  ASSERT_TRUE(WriteFileAtomic(p12, der_));
  f = ::popen(cmd.c_str(), "r");
  out.clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    out.append(buf, n);
  EXPECT_EQ(::pclose(f), 0) << out;
  EXPECT_NE(out.find("friendlyName: cert"), std::string::npos) << out;
}

}  // namespace
}  // namespace edge::identity
