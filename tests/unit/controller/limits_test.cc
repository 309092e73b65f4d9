// Issue 15 #7: the controller's unauthenticated surface had no limits. ExchangeJoinToken is
// rate-limited per peer address (token bucket), refused-call log lines are rate-limited per
// peer with a "suppressed K similar lines" summary, and calls/streams from connections
// without a client certificate (health Watch above all) are capped in total and per peer.
#include <grpcpp/generic/generic_stub.h>

#include "controller/bootstrap_service.h"
#include "controller/rate_limiter.h"
#include "controller/refusal_log.h"
#include "controller/sqlite_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/controller/edge_test_support.h"

namespace edge::controller::testing {
namespace {

TEST(TokenBucketLimiter, BurstThenRefillPerMinutePerKey) {
  ManualClock clock;
  TokenBucketLimiter limiter(clock, /*per_minute=*/10, /*burst=*/10);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(limiter.Allow("ipv4:10.0.0.1")) << i;
  EXPECT_FALSE(limiter.Allow("ipv4:10.0.0.1"));
  EXPECT_TRUE(limiter.Allow("ipv4:10.0.0.2")) << "another address has its own bucket";
  clock.Advance(5s);
  EXPECT_FALSE(limiter.Allow("ipv4:10.0.0.1")) << "10/min = one token per 6 s";
  clock.Advance(1s);
  EXPECT_TRUE(limiter.Allow("ipv4:10.0.0.1"));
  EXPECT_FALSE(limiter.Allow("ipv4:10.0.0.1"));
  clock.Advance(10min);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(limiter.Allow("ipv4:10.0.0.1")) << "refilled to the burst, not beyond: " << i;
  EXPECT_FALSE(limiter.Allow("ipv4:10.0.0.1"));
}

TEST(TokenBucketLimiter, ForgetsFullBuckets) {
  ManualClock clock;
  TokenBucketLimiter limiter(clock, 10, 10);
  for (int i = 0; i < 200; ++i)
    limiter.Allow("ipv4:10.0.1." + std::to_string(i));
  clock.Advance(2min);
  limiter.Allow("ipv4:10.0.2.1");
  EXPECT_EQ(limiter.tracked(), 1u) << "memory is bounded by the recently active addresses";
}

class Capture {
 public:
  Capture() {
    log::Init({.level = spdlog::level::debug, .writer = [this](std::string_view l) {
                 std::lock_guard lock(mu_);
                 lines_.emplace_back(l);
               }});
  }
  ~Capture() { log::Init({}); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(RefusalLog, AtMostNLinesPerIntervalPerPeerThenASummary) {
  Capture cap;
  ManualClock clock;
  RefusalLog refusals(clock, 3, 1min);
  auto logger = log::Get("bootstrap");
  for (int i = 0; i < 2000; ++i)
    refusals.Warn(logger, "ipv4:10.0.0.1", "refused " + std::to_string(i));
  refusals.Warn(logger, "ipv4:10.0.0.2", "refused other");
  auto lines = cap.lines();
  ASSERT_EQ(lines.size(), 4u) << "3 for the flooding peer, 1 for the other";
  EXPECT_NE(lines[2].find("refused 2"), std::string::npos);
  EXPECT_NE(lines[3].find("refused other"), std::string::npos);
  clock.Advance(1min);
  refusals.Warn(logger, "ipv4:10.0.0.1", "refused again");
  lines = cap.lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_NE(lines[4].find("suppressed 1997 similar lines from ipv4:10.0.0.1 (at most 3 per 60 s)"),
            std::string::npos)
      << lines[4];
  EXPECT_NE(lines[5].find("refused again"), std::string::npos);
  // A peer that went quiet gets its summary when the next call of anyone closes its window.
  for (int i = 0; i < 5; ++i)
    refusals.Warn(logger, "ipv4:10.0.0.3", "x");
  clock.Advance(2min);
  refusals.Warn(logger, "ipv4:10.0.0.4", "y");
  lines = cap.lines();
  bool summarised = false;
  for (const auto& l : lines)
    summarised |= l.find("suppressed 2 similar lines from ipv4:10.0.0.3") != std::string::npos;
  EXPECT_TRUE(summarised);
}

TEST(BootstrapLimits, ExchangeJoinTokenIsRateLimitedPerPeerAddress) {
  edge::testing::TempDir tmp("bslim");
  const std::string dir = tmp.path();
  {
    ManualClock clock;
    auto store = std::move(*SqliteStore::Open(dir + "/c.db"));
    auto ca = *identity::CertificateAuthority::Create("ca", clock.Now());
    BootstrapServiceImpl service(*store, ca, clock, BootstrapLimits{.per_minute = 10, .burst = 5});
    for (int i = 0; i < 5; ++i)
      EXPECT_TRUE(service.Admit("ipv4:203.0.113.9")) << i;
    auto refused = service.Admit("ipv4:203.0.113.9");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
    EXPECT_EQ(refused.error().message,
              "ExchangeJoinToken rate limit: at most 5 at once and 10 per minute from "
              "ipv4:203.0.113.9; retry later");
    EXPECT_TRUE(service.Admit("ipv4:203.0.113.10"));
    clock.Advance(6s);
    EXPECT_TRUE(service.Admit("ipv4:203.0.113.9"));
  }
}

// A grpc.health.v1.Health/Watch stream sent as raw bytes (an empty HealthCheckRequest).
class Watch final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Watch(grpc::GenericStub& stub) {
    stub.PrepareBidiStreamingCall(&ctx_, "/grpc.health.v1.Health/Watch", grpc::StubOptions(), this);
    grpc::Slice empty("");
    request_ = grpc::ByteBuffer(&empty, 1);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (ok) answered_ = true;
    cv_.notify_all();
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard lock(mu_);
    done_ = true;
    status_ = s;
    cv_.notify_all();
  }
  // Waits until it was answered (true) or ended (false).
  bool Answered(std::chrono::milliseconds wait = 10s) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return answered_ || done_; });
    return answered_ && !done_;
  }
  grpc::Status WaitDone() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return done_; });
    return done_ ? status_ : grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "not done");
  }
  void Cancel() { ctx_.TryCancel(); }

 private:
  grpc::ClientContext ctx_;
  grpc::ByteBuffer request_, response_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool answered_ = false, done_ = false;
  grpc::Status status_;
};

class UnauthenticatedLimitsTest : public ControllerHarness {};

TEST_F(UnauthenticatedLimitsTest, HealthWatchStreamsWithoutACertificateAreCapped) {
  // Defaults: 16 per peer address, 256 in total.
  auto node = EnrolledNode("edge-01");  // before the anonymous budget is used up
  auto channel = identity::ChannelFactory::TlsNoClientCert(target_, controller_->ca_pem());
  grpc::GenericStub stub(channel);
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < 24; ++i)
    watches.push_back(std::make_unique<Watch>(stub));
  int answered = 0, refused = 0;
  for (auto& w : watches) {
    if (w->Answered()) {
      ++answered;
    } else {
      EXPECT_EQ(w->WaitDone().error_code(), grpc::StatusCode::CANCELLED);
      ++refused;
    }
  }
  EXPECT_EQ(answered, 16);
  EXPECT_EQ(refused, 8);
  // An enrolled node (verified certificate) is not counted against the anonymous budget.
  EXPECT_TRUE(node->Handshake(std::nullopt).ok());
  // Closed streams give their places back.
  for (auto& w : watches)
    w->Cancel();
  for (auto& w : watches)
    w->WaitDone();
  watches.clear();
  // (The server releases a place when its side of the call is done, which may be a moment
  // after the client saw the end.)
  EXPECT_TRUE(WaitFor([&] {
    Watch again(stub);
    const bool answered = again.Answered();
    again.Cancel();
    again.WaitDone();
    return answered;
  }));
}

}  // namespace
}  // namespace edge::controller::testing
