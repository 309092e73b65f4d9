#include "agent/identity/channel_factory.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/keystore_files.h"
#include "agent/identity/pkcs12.h"
#include "bootstrap.grpc.pb.h"
#include "tests/support/temp_dir.h"

namespace edge::identity {
namespace {

namespace bp = me::prexorjustin::prexorcloud::protocol;
using namespace std::chrono_literals;

Clock::WallTime Now() {
  return std::chrono::system_clock::now();
}

// Answers with the CN of the client certificate it saw ("" without one).
class EchoPeer final : public bp::BootstrapService::Service {
  grpc::Status ExchangeJoinToken(grpc::ServerContext* ctx, const bp::ExchangeJoinTokenRequest*,
                                 bp::ExchangeJoinTokenResponse* resp) override {
    auto cn = ctx->auth_context()->FindPropertyValues("x509_common_name");
    resp->set_cli_token(cn.empty() ? "" : std::string(cn.front().data(), cn.front().size()));
    return grpc::Status::OK;
  }
};

class ChannelFactoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_.emplace(*CertificateAuthority::Create("chan CA", Now()));
    other_.emplace(*CertificateAuthority::Create("other CA", Now()));
    // The node's enrolled identity, through the real keystore files.
    auto leaf = ca_->IssueNodeCert("edge-01", Now());
    auto password = GeneratePkcs12Password();
    auto der = CreatePkcs12(leaf->key_pem, leaf->cert_pem, ca_->cert_pem(), password);
    ASSERT_TRUE(der);
    ASSERT_TRUE(KeystoreFiles::Write(dir_, *der, password, ca_->cert_pem()));
    auto id = KeystoreFiles::Load(dir_);
    ASSERT_TRUE(id) << id.error().ToString();
    identity_ = *id;
    node_leaf_ = *leaf;
  }
  void TearDown() override {
    for (auto& s : servers_)
      s->Shutdown();
  }

  // A server with `cert` (chain PEM) and `key`; `require_client` asks for a client certificate
  // issued by our CA.
  std::string Serve(const std::string& chain, const std::string& key, bool require_client) {
    grpc::SslServerCredentialsOptions opts(
        require_client ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    opts.pem_root_certs = ca_->cert_pem();
    opts.pem_key_cert_pairs.push_back({key, chain});
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(opts), &port);
    b.RegisterService(&service_);
    servers_.push_back(b.BuildAndStart());
    EXPECT_NE(port, 0);
    return "127.0.0.1:" + std::to_string(port);
  }
  std::string ServeController(bool require_client) {
    auto server = ca_->IssueServerCert({"ctl.test"}, Now());
    return Serve(server->cert_pem + ca_->cert_pem(), server->key_pem, require_client);
  }

  static grpc::Status Call(const std::shared_ptr<grpc::Channel>& ch, std::string* cn = nullptr) {
    auto stub = bp::BootstrapService::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    bp::ExchangeJoinTokenRequest req;
    bp::ExchangeJoinTokenResponse resp;
    auto st = stub->ExchangeJoinToken(&ctx, req, &resp);
    if (cn) *cn = resp.cli_token();
    return st;
  }

  edge::testing::TempDir tmp_{"chan"};
  std::string dir_ = tmp_.path();
  std::optional<CertificateAuthority> ca_, other_;
  TlsIdentity identity_;
  IssuedCert node_leaf_;
  EchoPeer service_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
};

TEST_F(ChannelFactoryTest, MtlsPresentsTheKeystoreCertificate) {
  const std::string target = ServeController(/*require_client=*/true);
  ChannelFactory factory(identity_);
  std::string cn;
  auto st = Call(factory.Mtls(target), &cn);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(cn, "edge-01");
  // Without a client certificate the same server refuses the handshake.
  EXPECT_FALSE(Call(ChannelFactory::TlsNoClientCert(target, ca_->cert_pem())).ok());
}

TEST_F(ChannelFactoryTest, MtlsTrustsOnlyCaPemAndChecksTheName) {
  const std::string target = ServeController(true);
  ChannelFactory factory(identity_);
  EXPECT_TRUE(Call(factory.Mtls(target, "ctl.test")).ok()) << "SAN from IssueServerCert";
  EXPECT_FALSE(Call(factory.Mtls(target, "not-the-controller.test")).ok());
  // A controller whose certificate comes from another CA is not trusted.
  auto foreign = other_->IssueServerCert({}, Now());
  const std::string foreign_target =
      Serve(foreign->cert_pem + other_->cert_pem(), foreign->key_pem, false);
  EXPECT_FALSE(Call(factory.Mtls(foreign_target)).ok());
}

TEST_F(ChannelFactoryTest, BootstrapChecksThePin) {
  const std::string target = ServeController(false);
  auto failure = std::make_shared<PinFailure>();
  std::string cn = "unset";
  auto ok = Call(ChannelFactory::Bootstrap(target, ca_->Pin(), failure), &cn);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(cn, "") << "no client certificate before enrollment";
  EXPECT_EQ(failure->Get(), "");

  auto wrong = Call(ChannelFactory::Bootstrap(target, other_->Pin(), failure));
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(failure->Get().find("does not lead to the CA pinned"), std::string::npos)
      << failure->Get();

  // No pin: any server is accepted (the token is the proof), even one of another CA.
  auto foreign = other_->IssueServerCert({}, Now());
  const std::string foreign_target =
      Serve(foreign->cert_pem + other_->cert_pem(), foreign->key_pem, false);
  EXPECT_TRUE(Call(ChannelFactory::Bootstrap(foreign_target, "")).ok());
  EXPECT_FALSE(Call(ChannelFactory::Bootstrap(foreign_target, ca_->Pin())).ok());
}

TEST_F(ChannelFactoryTest, BootstrapRefusesAnEnrolledNodePosingAsTheController) {
  // A node's clientAuth certificate from the pinned CA, served as a TLS server certificate.
  const std::string target =
      Serve(node_leaf_.cert_pem + ca_->cert_pem(), node_leaf_.key_pem, false);
  auto failure = std::make_shared<PinFailure>();
  EXPECT_FALSE(Call(ChannelFactory::Bootstrap(target, ca_->Pin(), failure)).ok());
  EXPECT_NE(failure->Get().find("not a TLS server certificate"), std::string::npos)
      << failure->Get();
}

}  // namespace
}  // namespace edge::identity
