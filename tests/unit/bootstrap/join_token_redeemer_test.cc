// JoinTokenRedeemer against an in-process fake BootstrapService, for the faults a real
// controller does not produce: garbage keystores, a CA that does not match the pin, a
// certificate for another node, transient failures (retried with the injected backoff).
#include "agent/bootstrap/join_token_redeemer.h"

#include "agent/edge/enrollment_files.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "agent/identity/certificate_authority.h"
#include "agent/identity/encoding.h"
#include "agent/identity/keystore_files.h"
#include "agent/identity/pkcs12.h"
#include "bootstrap.grpc.pb.h"
#include "common/atomic_file.h"
#include "controller/peer_identity.h"
#include "tests/support/temp_dir.h"

namespace edge::bootstrap {
namespace {

namespace pb = me::prexorjustin::prexorcloud::protocol;
using std::chrono::milliseconds;

Clock::WallTime Now() {
  return std::chrono::system_clock::now();
}

enum class Mode { kGood, kGarbageKeystore, kWrongCa, kWrongNode, kFlaky };

class FakeBootstrap final : public pb::BootstrapService::Service {
 public:
  FakeBootstrap(const identity::CertificateAuthority& ca,
                const identity::CertificateAuthority& other)
      : ca_(ca), other_(other) {}
  grpc::Status ExchangeJoinToken(grpc::ServerContext*, const pb::ExchangeJoinTokenRequest* req,
                                 pb::ExchangeJoinTokenResponse* resp) override {
    ++calls;
    if (mode == Mode::kFlaky && calls <= 2) return {grpc::StatusCode::UNAVAILABLE, "warming up"};
    const std::string node = mode == Mode::kWrongNode ? "someone-else" : req->node_id();
    auto leaf = ca_.IssueNodeCert(node, Now());
    const std::string pass = identity::GeneratePkcs12Password();
    auto p12 = identity::CreatePkcs12(leaf->key_pem, leaf->cert_pem, ca_.cert_pem(), pass);
    resp->set_pkcs12(mode == Mode::kGarbageKeystore ? p12->substr(0, p12->size() / 2) : *p12);
    resp->set_pkcs12_password(pass);
    resp->set_ca_certificate_pem(mode == Mode::kWrongCa ? other_.cert_pem() : ca_.cert_pem());
    return grpc::Status::OK;
  }
  std::atomic<Mode> mode{Mode::kGood};
  std::atomic<int> calls{0};

 private:
  const identity::CertificateAuthority& ca_;
  const identity::CertificateAuthority& other_;
};

class NoSleepBackoff final : public Backoff {
 public:
  milliseconds Next() override {
    ++next_calls;
    return milliseconds(1234);
  }
  void Reset() override {}
  int next_calls = 0;
};

class RedeemerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_.emplace(*identity::CertificateAuthority::Create("fake CA", Now()));
    other_.emplace(*identity::CertificateAuthority::Create("other CA", Now()));
    service_ = std::make_unique<FakeBootstrap>(*ca_, *other_);
    auto server_cert = ca_->IssueServerCert({}, Now());
    grpc::ServerBuilder b;
    b.AddListeningPort(
        "127.0.0.1:0",
        controller::ControllerServerCredentials(
            ca_->cert_pem(), server_cert->cert_pem + ca_->cert_pem(), server_cert->key_pem),
        &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }
  // An unsigned token carrying only what the agent reads.
  std::string Token(const std::string& pin) {
    return TokenWithClaims({{"jti", "t-1"},
                            {"exp", 4102444800},
                            {"cep", "127.0.0.1:" + std::to_string(port_)},
                            {"cah", pin}});
  }
  static std::string TokenWithClaims(const nlohmann::json& claims) {
    return identity::Base64UrlEncode(R"({"alg":"ES256"})") + "." +
           identity::Base64UrlEncode(claims.dump()) + ".c2ln";
  }
  Result<EnrollResult> Enroll(const std::string& token) {
    JoinTokenRedeemer r(
        backoff_, [this](milliseconds d) { slept_ += d; }, 4);
    return r.Enroll({.join_token = token, .node_id = "edge-01", .data_dir = dir_ + "/agent"});
  }
  bool NothingWritten() const { return !std::filesystem::exists(dir_ + "/agent/certs/node.p12"); }

  edge::testing::TempDir tmp_{"redeem"};
  std::string dir_ = tmp_.path();
  std::optional<identity::CertificateAuthority> ca_, other_;
  std::unique_ptr<FakeBootstrap> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  NoSleepBackoff backoff_;
  milliseconds slept_{0};
};

TEST_F(RedeemerTest, GoodResponseIsStored) {
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->ca_pin, ca_->Pin());
  EXPECT_TRUE(identity::KeystoreFiles::Exists(dir_ + "/agent"));
  auto again = Enroll(Token(ca_->Pin()));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(service_->calls, 1) << "an enrolled node does not spend another token";
}

// Issue 16: the agent was killed after the controller answered (the token is spent) and
// before the keystore was stored. The answer was kept in certs/exchange.pending; the next
// enrollment resumes from it without asking the controller again, and removes it.
TEST_F(RedeemerTest, AnInterruptedEnrollmentResumesFromTheStoredAnswer) {
  const std::string data = dir_ + "/agent";
  {
    // What the killed agent left: the controller's answer, nothing else.
    pb::ExchangeJoinTokenRequest req;
    req.set_node_id("edge-01");
    pb::ExchangeJoinTokenResponse answer;
    ASSERT_TRUE(service_->ExchangeJoinToken(nullptr, &req, &answer).ok());
    ASSERT_TRUE(WriteFileAtomic(JoinTokenRedeemer::SavedExchangePath(data),
                                answer.SerializeAsString(),
                                {.mode = 0600, .create_parents_mode = 0700}));
  }
  service_->calls = 0;
  service_->mode = Mode::kWrongCa;  // a second exchange would be refused: none may happen
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(service_->calls, 0) << "the spent token is not presented again";
  EXPECT_TRUE(identity::KeystoreFiles::Exists(data));
  EXPECT_FALSE(std::filesystem::exists(JoinTokenRedeemer::SavedExchangePath(data)));

  // A stored answer that is not what was asked for is refused, removed, and not used again.
  std::filesystem::remove_all(data);
  ASSERT_TRUE(WriteFileAtomic(JoinTokenRedeemer::SavedExchangePath(data), "not a response",
                              {.mode = 0600, .create_parents_mode = 0700}));
  service_->mode = Mode::kGood;
  auto fresh = Enroll(Token(ca_->Pin()));
  ASSERT_TRUE(fresh) << fresh.error().ToString();
  EXPECT_EQ(service_->calls, 1) << "an unreadable stored answer is replaced by an exchange";
}

// Issue 16 (found by EnrollTest.AKillMidEnrollment…): the keystore says "enrolled", so the
// controller address (from the token's cep claim, which leaves the config with the token)
// is recorded before it. A keystore that cannot be stored leaves the address and the
// controller's stored answer, so the next try resumes; it never leaves a keystore without an
// address.
TEST_F(RedeemerTest, TheControllerAddressIsRecordedBeforeTheKeystore) {
  const std::string data = dir_ + "/agent";
  std::filesystem::create_directories(data + "/certs/node.p12");  // the keystore cannot land
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("keystore could not be stored"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(agentedge::EnrollmentFiles::ReadControllerAddress(data),
            "127.0.0.1:" + std::to_string(port_));
  EXPECT_TRUE(std::filesystem::exists(JoinTokenRedeemer::SavedExchangePath(data)));
  std::filesystem::remove(data + "/certs/node.p12");
  auto resumed = Enroll(Token(ca_->Pin()));
  ASSERT_TRUE(resumed) << resumed.error().ToString();
  EXPECT_EQ(service_->calls, 1) << "resumed from the stored answer";
  EXPECT_TRUE(identity::KeystoreFiles::Exists(data));
}

TEST_F(RedeemerTest, TruncatedKeystoreIsRefusedAndNothingWritten) {
  service_->mode = Mode::kGarbageKeystore;
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unreadable keystore"), std::string::npos) << r.error().message;
  EXPECT_TRUE(NothingWritten());
}

TEST_F(RedeemerTest, ReturnedCaNotMatchingThePinIsRefused) {
  service_->mode = Mode::kWrongCa;
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(r.error().message.find("does not match the pin"), std::string::npos)
      << r.error().message;
  EXPECT_TRUE(NothingWritten());
}

TEST_F(RedeemerTest, CertificateForAnotherNodeIsRefused) {
  service_->mode = Mode::kWrongNode;
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("\"someone-else\""), std::string::npos) << r.error().message;
  EXPECT_TRUE(NothingWritten());
}

TEST_F(RedeemerTest, ServerNotUnderThePinnedCaIsRefusedWithoutRetry) {
  auto r = Enroll(Token(other_->Pin()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(r.error().message.find("does not lead to the CA pinned"), std::string::npos);
  EXPECT_EQ(service_->calls, 0);
  EXPECT_EQ(backoff_.next_calls, 0);
}

TEST_F(RedeemerTest, TransientFailuresAreRetriedWithTheInjectedBackoff) {
  service_->mode = Mode::kFlaky;
  auto r = Enroll(Token(ca_->Pin()));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(service_->calls, 3);
  EXPECT_EQ(backoff_.next_calls, 2);
  EXPECT_EQ(slept_, milliseconds(2 * 1234));
}

// Issue 16: what EnrollTest once waited 20 s of real backoff for, on the injected backoff —
// an unreachable controller is tried max_attempts times, then reported, nothing written.
TEST_F(RedeemerTest, AnUnreachableControllerIsRetriedThenReported) {
  auto r = Enroll(TokenWithClaims(
      {{"jti", "t-1"}, {"exp", 4102444800}, {"cep", "127.0.0.1:1"}, {"cah", ca_->Pin()}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error().ToString();
  EXPECT_NE(r.error().message.find("unreachable"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("gave up after 4 attempts"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(backoff_.next_calls, 3);
  EXPECT_EQ(slept_, milliseconds(3 * 1234));
  EXPECT_TRUE(NothingWritten());
}

TEST_F(RedeemerTest, WithoutAPinAnyServerIsAccepted) {
  auto r = Enroll(Token(""));
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->ca_pin, ca_->Pin()) << "the stored CA's pin is reported";
}

TEST_F(RedeemerTest, MalformedInputsFailBeforeAnyCall) {
  for (const std::string& bad : {std::string(), std::string("x.y"), std::string("a.b.c")}) {
    auto r = Enroll(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  JoinTokenRedeemer r(backoff_, [](milliseconds) {});
  auto bad_pin = r.Enroll({.join_token = Token("sha256:zz"), .node_id = "n", .data_dir = dir_});
  ASSERT_FALSE(bad_pin);
  EXPECT_NE(bad_pin.error().message.find("CA pin"), std::string::npos);
  EXPECT_EQ(service_->calls, 0);
}

TEST_F(RedeemerTest, ClaimsOfTheWrongTypeAreAnErrorNotACrash) {
  const nlohmann::json cases[] = {
      {{"jti", "t-1"}, {"exp", 4102444800}, {"cep", 42}},
      {{"jti", "t-1"}, {"exp", 4102444800}, {"cep", "127.0.0.1:1"}, {"cah", {1, 2}}},
      {{"jti", 7}, {"exp", 4102444800}},
      {{"jti", "t-1"}, {"exp", "tomorrow"}},
  };
  for (const auto& claims : cases) {
    auto r = Enroll(TokenWithClaims(claims));
    ASSERT_FALSE(r) << claims.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << claims.dump();
    EXPECT_NE(r.error().message.find("malformed"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(service_->calls, 0);
  EXPECT_TRUE(NothingWritten());
}

}  // namespace
}  // namespace edge::bootstrap
