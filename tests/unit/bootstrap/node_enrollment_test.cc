// NodeEnrollment without a controller: a fake EnrollmentCalls that fails N times, a
// ManualSleeper on a ManualClock (no real sleeping). The retry bounds, the outcomes and exit
// decisions, and that a stop (SIGTERM) ends every wait at once.
#include "agent/bootstrap/node_enrollment.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "agent/edge/enrollment_files.h"
#include "agent/identity/encoding.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::bootstrap {
namespace {

using namespace std::chrono_literals;
using agentedge::EnrollmentFiles;

class FakeCalls final : public EnrollmentCalls {
 public:
  Result<EnrollResult> Redeem(const EnrollRequest& request, Backoff&, Sleeper&) override {
    ++redeems;
    last_request = request;
    if (redeem_error) return std::unexpected(*redeem_error);
    return EnrollResult{.controller_address = "127.0.0.1:7", .ca_pin = ""};
  }
  Status OpenAttestation(const std::string&, const std::string& node_id, const std::string& address,
                         Clock&) override {
    attest_node = node_id;
    attest_address = address;
    return OkStatus();
  }
  Result<agentedge::NodeToken> Attest(const identity::NodeKey&, const std::string& proof) override {
    ++attests;
    proofs.push_back(proof);
    if (during_attest) during_attest();
    if (cancelled) return MakeError(ErrorCode::kCancelled, "AttestNode: cancelled");
    if (attests <= fail_times) return MakeError(fail_code, "AttestNode: connection refused");
    return agentedge::NodeToken{.token = "t", .node_id = attest_node, .tenant_id = "tenant-1"};
  }
  void CancelAttest() override { cancelled = true; }

  std::optional<Error> redeem_error;
  int fail_times = 0;
  ErrorCode fail_code = ErrorCode::kUnavailable;
  std::function<void()> during_attest;
  int redeems = 0, attests = 0;
  bool cancelled = false;
  EnrollRequest last_request;
  std::string attest_node, attest_address;
  std::vector<std::string> proofs;
};

class FixedRandom final : public Random {
 public:
  uint64_t Uniform(uint64_t bound) override { return bound - 1; }
};

class NodeEnrollmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.data_dir = dir_ + "/agent";
    cfg_.node_id = "edge-01";
    cfg_.edge.enabled = true;
  }

  EnrollmentResult Enroll(bool from_cli, bool attest = true) {
    NodeEnrollment e(cfg_, calls_, clock_, random_, sleeper_);
    return e.Run({.token = "join-token-secret",
                  .node_id = "edge-02",
                  .config_path = "",
                  .from_cli = from_cli,
                  .attest = attest});
  }
  bool PendingExists() const {
    return std::filesystem::exists(EnrollmentFiles::PendingTokenPath(cfg_.data_dir));
  }

  edge::testing::TempDir tmp_{"node-enrollment"};
  std::string dir_ = tmp_.path();
  config::AgentConfig cfg_;
  FakeCalls calls_;
  ManualClock clock_;
  FixedRandom random_;
  ManualSleeper sleeper_{clock_};
};

TEST_F(NodeEnrollmentTest, AttestsAfterTransientFailuresWithinTheBound) {
  calls_.fail_times = 3;
  const auto t0 = clock_.Monotonic();
  auto r = Enroll(/*from_cli=*/false);
  ASSERT_TRUE(r) << r.error().error.message;
  EXPECT_EQ(*r, EnrollmentOutcome::kAttested);
  EXPECT_EQ(calls_.attests, NodeEnrollment::kAttestAttempts);
  // Full jitter from 1 s, cap 10 s; FixedRandom takes the top of each window [0, 1 s·2^n].
  EXPECT_EQ(sleeper_.slept(), (std::vector<std::chrono::milliseconds>{1000ms, 2000ms, 4000ms}));
  EXPECT_EQ(clock_.Monotonic() - t0, 7000ms);
  EXPECT_EQ(calls_.attest_node, "edge-02");
  EXPECT_EQ(calls_.attest_address, "127.0.0.1:7");
  EXPECT_EQ(calls_.proofs.front(), "") << "the proof comes from the pending file";
  EXPECT_EQ(calls_.last_request.join_token, "join-token-secret");
  EXPECT_TRUE(PendingExists()) << "the attestor (not faked here) deletes it";
}

TEST_F(NodeEnrollmentTest, UnreachableControllerLeavesThePendingTokenForRun) {
  calls_.fail_times = 100;
  auto r = Enroll(/*from_cli=*/false);
  ASSERT_TRUE(r) << r.error().error.message;
  EXPECT_EQ(*r, EnrollmentOutcome::kAttestationPending);  // exit 0
  EXPECT_EQ(calls_.attests, NodeEnrollment::kAttestAttempts);
  EXPECT_EQ(sleeper_.slept().size(), 3u);
  EXPECT_TRUE(PendingExists());
}

TEST_F(NodeEnrollmentTest, UnreachableControllerFailsATokenFromTheCommandLine) {
  calls_.fail_times = 100;
  auto r = Enroll(/*from_cli=*/true);
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.error().usage);  // exit 1
  EXPECT_FALSE(r.error().interrupted);
  EXPECT_NE(r.error().error.message.find("edge enrollment failed: AttestNode: connection refused"),
            std::string::npos)
      << r.error().error.message;
  EXPECT_NE(r.error().error.message.find("--token is never written"), std::string::npos);
  EXPECT_EQ(r.error().error.message.find("join-token-secret"), std::string::npos);
  EXPECT_EQ(calls_.proofs.front(), "join-token-secret");
  EXPECT_FALSE(PendingExists()) << "a --token token is never written";
}

TEST_F(NodeEnrollmentTest, OtherAttestationFailuresAreNotRetried) {
  calls_.fail_times = 1;
  calls_.fail_code = ErrorCode::kPermissionDenied;
  auto r = Enroll(/*from_cli=*/false);
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.error().usage);
  EXPECT_EQ(calls_.attests, 1);
  EXPECT_TRUE(sleeper_.slept().empty());
  EXPECT_EQ(r.error().error.message, "edge enrollment failed: AttestNode: connection refused");
}

TEST_F(NodeEnrollmentTest, RunLeavesTheAttestationToTheEdgeSession) {
  auto r = Enroll(/*from_cli=*/false, /*attest=*/false);
  ASSERT_TRUE(r) << r.error().error.message;
  EXPECT_EQ(*r, EnrollmentOutcome::kEnrolled);
  EXPECT_EQ(calls_.attests, 0);
  EXPECT_TRUE(PendingExists());
  EXPECT_TRUE(std::filesystem::exists(cfg_.data_dir + "/keys/node.ed25519"));
  EXPECT_EQ(EnrollmentFiles::ReadControllerAddress(cfg_.data_dir), "127.0.0.1:7");
}

TEST_F(NodeEnrollmentTest, AMalformedTokenIsAUsageErrorAndRemovesThePendingFile) {
  calls_.redeem_error = Error{ErrorCode::kInvalidArgument, "the join token is malformed (x)"};
  auto r = Enroll(/*from_cli=*/false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().usage);  // exit 2
  EXPECT_EQ(r.error().error.message, "enrollment failed: the join token is malformed (x)");
  EXPECT_FALSE(PendingExists());
  calls_.redeem_error = Error{ErrorCode::kUnavailable, "unreachable"};
  r = Enroll(/*from_cli=*/false);
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.error().usage);  // exit 1
}

TEST_F(NodeEnrollmentTest, AStopDuringTheBackoffEndsTheEnrollmentAtOnce) {
  calls_.fail_times = 100;
  sleeper_.StopAt(2);
  auto r = Enroll(/*from_cli=*/false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().interrupted);
  EXPECT_FALSE(r.error().usage);
  EXPECT_EQ(calls_.attests, 2) << "no attempt after the stop";
  EXPECT_EQ(r.error().error.message,
            "edge enrollment interrupted (SIGTERM): the join token stays in " +
                EnrollmentFiles::PendingTokenPath(cfg_.data_dir) +
                " and `edge-agent run` finishes the enrollment");
  EXPECT_TRUE(PendingExists());
}

TEST_F(NodeEnrollmentTest, AStopDuringAnAttestationCancelsIt) {
  calls_.during_attest = [this] { sleeper_.Stop("SIGINT"); };
  auto r = Enroll(/*from_cli=*/true);
  ASSERT_FALSE(r);
  EXPECT_TRUE(calls_.cancelled);
  EXPECT_TRUE(r.error().interrupted);
  EXPECT_EQ(calls_.attests, 1);
  EXPECT_NE(r.error().error.message.find("edge enrollment interrupted (SIGINT): the keystore is "
                                         "stored, but a token given with --token is never"),
            std::string::npos)
      << r.error().error.message;
}

TEST_F(NodeEnrollmentTest, AStopBeforeTheAttestationMakesNoCall) {
  sleeper_.Stop("SIGTERM");
  auto r = Enroll(/*from_cli=*/false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().interrupted);
  EXPECT_EQ(calls_.attests, 0);
}

// The real JoinTokenRedeemer against a closed loopback port (refused at once): a stop during
// its backoff ends the enrollment with kCancelled, nothing stored, the pending file removed.
TEST_F(NodeEnrollmentTest, AStopDuringTheRedeemersBackoffEndsItAtOnce) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);  // nothing listens there now
  const std::string token =
      identity::Base64UrlEncode(R"({"alg":"ES256"})") + "." +
      identity::Base64UrlEncode(
          nlohmann::json(
              {{"jti", "t-1"}, {"exp", 4102444800}, {"cep", "127.0.0.1:" + std::to_string(port)}})
              .dump()) +
      ".c2ln";
  class RealRedeem final : public EnrollmentCalls {
   public:
    Result<EnrollResult> Redeem(const EnrollRequest& request, Backoff& backoff,
                                Sleeper& sleeper) override {
      return JoinTokenRedeemer(backoff, sleeper).Enroll(request);
    }
    Status OpenAttestation(const std::string&, const std::string&, const std::string&,
                           Clock&) override {
      return MakeError(ErrorCode::kInternal, "not reached");
    }
    Result<agentedge::NodeToken> Attest(const identity::NodeKey&, const std::string&) override {
      return MakeError(ErrorCode::kInternal, "not reached");
    }
    void CancelAttest() override {}
  } calls;
  sleeper_.StopAt(2);
  NodeEnrollment e(cfg_, calls, clock_, random_, sleeper_);
  auto r = e.Run({.token = token, .node_id = "edge-01", .from_cli = false, .attest = true});
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().interrupted);
  EXPECT_EQ(r.error().error.code, ErrorCode::kCancelled);
  EXPECT_NE(r.error().error.message.find("enrollment failed: interrupted (SIGTERM) while waiting "
                                         "to retry after attempt 2/6"),
            std::string::npos)
      << r.error().error.message;
  EXPECT_EQ(r.error().error.message.find(token), std::string::npos);
  EXPECT_EQ(sleeper_.slept().size(), 2u);
  EXPECT_FALSE(PendingExists());
  EXPECT_FALSE(std::filesystem::exists(cfg_.data_dir + "/certs/node.p12"));
}

}  // namespace
}  // namespace edge::bootstrap
