// ServiceRegistry: a service that fails to start is reported and started again with
// exponential backoff on the injected clock (issue 9 #9: a failed service was never retried);
// the others keep running. ManualClock only: no sleeping.
#include "agent/daemon/service_registry.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "tests/support/manual_clock.h"

namespace edge::daemon {
namespace {

using namespace std::chrono_literals;

class FlakyService : public Service {
 public:
  FlakyService(std::string name, int failures) : name_(std::move(name)), failures_(failures) {}
  std::string Name() const override { return name_; }
  Status Start() override {
    ++starts;
    if (failures_-- > 0) return MakeError(ErrorCode::kUnavailable, "controller unreachable");
    return OkStatus();
  }
  void Stop() override { ++stops; }
  std::optional<std::string> Stuck(int64_t) const override { return stuck; }
  size_t ReleaseMemory() override { return cached; }
  void Notify() const { NotifyStatusChanged(); }
  int starts = 0, stops = 0;
  size_t cached = 0;
  std::optional<std::string> stuck;

 private:
  std::string name_;
  int failures_;
};

ServiceStatus Find(const ServiceRegistry& r, const std::string& name) {
  for (const auto& s : r.Snapshot())
    if (s.name == name) return s;
  return {};
}

// An executor, an edge service and a compute service that fails to start (not running once
// StartAll is called), added to a registry in that order, not yet started.
struct ThreeServices {
  ThreeServices() {
    auto a = std::make_unique<FlakyService>("executor", 0);
    auto b = std::make_unique<FlakyService>("edge", 0);
    auto c = std::make_unique<FlakyService>("compute", 5);
    executor = a.get();
    edge = b.get();
    compute = c.get();
    registry.Add(std::move(a));
    registry.Add(std::move(b));
    registry.Add(std::move(c));
  }
  ManualClock clock;
  ServiceRegistry registry{clock};
  FlakyService *executor, *edge, *compute;
};

TEST(ServiceRegistryTest, FirstStuckNamesTheWedgedRunningServiceOnly) {
  ThreeServices s;
  s.registry.StartAll();
  EXPECT_FALSE(s.registry.FirstStuck(0).has_value());
  s.compute->stuck = "never started";  // a failed service does not hold the watchdog back
  EXPECT_FALSE(s.registry.FirstStuck(0).has_value());
  s.edge->stuck = "no heartbeat for 95 s";
  EXPECT_EQ(s.registry.FirstStuck(0).value_or(""), "edge: no heartbeat for 95 s");
  s.edge->stuck.reset();
  EXPECT_FALSE(s.registry.FirstStuck(0).has_value());
}

TEST(ServiceRegistryTest, ReleaseMemoryAllSumsWhatTheRunningServicesGaveBack) {
  ThreeServices s;
  s.executor->cached = 1000;
  s.edge->cached = 24;
  s.compute->cached = 500;
  EXPECT_EQ(s.registry.ReleaseMemoryAll(), 0u) << "nothing runs yet";
  s.registry.StartAll();
  EXPECT_EQ(s.registry.ReleaseMemoryAll(), 1024u) << "the compute service is not running";
  s.registry.StopAll();
  EXPECT_EQ(s.registry.ReleaseMemoryAll(), 0u);
}

TEST(ServiceRegistryTest, AFailedServiceIsRetriedWithBackoffAndTheOthersRun) {
  ManualClock clock;
  ServiceRegistry registry(clock);
  auto ok = std::make_unique<FlakyService>("executor", 0);
  auto flaky = std::make_unique<FlakyService>("edge", 3);
  FlakyService* f = flaky.get();
  registry.Add(std::move(ok));
  registry.Add(std::move(flaky));
  EXPECT_EQ(registry.StartAll(), 1u);
  EXPECT_EQ(Find(registry, "executor").state, ServiceState::kRunning);
  ServiceStatus edge = Find(registry, "edge");
  EXPECT_EQ(edge.state, ServiceState::kFailed);
  EXPECT_EQ(edge.failed_attempts, 1);
  EXPECT_EQ(edge.retry_in, 1s);
  EXPECT_NE(edge.error.find("controller unreachable"), std::string::npos);

  // Not before its time.
  clock.Advance(999ms);
  EXPECT_EQ(registry.RetryFailed(), 1u);
  EXPECT_EQ(f->starts, 1);
  // Then 1 s, 2 s, 4 s apart.
  clock.Advance(1ms);
  EXPECT_EQ(registry.RetryFailed(), 1u);
  EXPECT_EQ(f->starts, 2);
  EXPECT_EQ(Find(registry, "edge").retry_in, 2s);
  clock.Advance(2s);
  EXPECT_EQ(registry.RetryFailed(), 1u);
  EXPECT_EQ(f->starts, 3);
  EXPECT_EQ(Find(registry, "edge").retry_in, 4s);
  clock.Advance(4s);
  EXPECT_EQ(registry.RetryFailed(), 0u);
  EXPECT_EQ(f->starts, 4);
  edge = Find(registry, "edge");
  EXPECT_EQ(edge.state, ServiceState::kRunning);
  EXPECT_EQ(edge.failed_attempts, 0);
  EXPECT_TRUE(edge.error.empty());
  // Running services are left alone.
  clock.Advance(1h);
  EXPECT_EQ(registry.RetryFailed(), 0u);
  EXPECT_EQ(f->starts, 4);
  registry.StopAll();
  EXPECT_EQ(f->stops, 1);
}

// Issue 14: the daemon sleeps until the next retry instead of polling RetryFailed.
TEST(ServiceRegistryTest, NextRetryIsTheEarliestFailedServicesRetry) {
  ManualClock clock;
  ServiceRegistry registry(clock);
  registry.Add(std::make_unique<FlakyService>("executor", 0));
  EXPECT_EQ(registry.StartAll(), 0u);
  EXPECT_FALSE(registry.NextRetry().has_value()) << "nothing failed: nothing to wake for";
  registry.Add(std::make_unique<FlakyService>("edge", 2));
  const auto t0 = clock.Monotonic();
  EXPECT_EQ(registry.StartAll(), 1u);
  EXPECT_EQ(registry.NextRetry(), t0 + 1s);
  clock.Advance(1s);
  registry.RetryFailed();
  EXPECT_EQ(registry.NextRetry(), t0 + 3s) << "1 s later, then 2 s after that";
  clock.Advance(2s);
  registry.RetryFailed();
  EXPECT_FALSE(registry.NextRetry().has_value());
}

TEST(ServiceRegistryTest, EveryServiceAddedGetsTheStatusListener) {
  ManualClock clock;
  ServiceRegistry registry(clock);
  int notified = 0;
  registry.SetStatusListener([&] { ++notified; });
  auto svc = std::make_unique<FlakyService>("edge", 0);
  FlakyService* f = svc.get();
  registry.Add(std::move(svc));
  f->Notify();
  EXPECT_EQ(notified, 1);
}

TEST(ServiceRegistryTest, TheBackoffIsCappedAtFiveMinutes) {
  ManualClock clock;
  ServiceRegistry registry(clock);
  registry.Add(std::make_unique<FlakyService>("edge", 1000));
  registry.StartAll();
  for (int i = 0; i < 30; ++i) {
    clock.Advance(ServiceRegistry::kMaxRetry);
    registry.RetryFailed();
  }
  EXPECT_EQ(Find(registry, "edge").retry_in, ServiceRegistry::kMaxRetry);
  EXPECT_EQ(Find(registry, "edge").failed_attempts, 31);
}

}  // namespace
}  // namespace edge::daemon
