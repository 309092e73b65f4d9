// SqliteStore's worker leases against the worker contract's cluster-store guarantees: atomic
// acquire by resource id; acquire when free, expired or already held by the caller; renew
// only by the holder before expiry; release only by the holder; the generation rises on
// every acquire and renew and never goes back; concurrent acquires serialize. The races run
// on separate connections to one database file, as separate controller processes would.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "tests/unit/controller/store_test_support.h"

namespace edge::controller {
namespace {

class LeaseStoreTest : public StoreTestBase {};

constexpr int64_t kTtl = 60'000;

TEST_F(LeaseStoreTest, AcquireWhenFreeExpiredOrHeldByTheCaller) {
  auto store = OpenStore();
  auto a = store->AcquireLease("sb-1", "worker-a", kTtl, 1'000);
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->holder_id, "worker-a");
  EXPECT_EQ(a->generation, 1);
  EXPECT_EQ(a->expires_at_ms, 61'000);
  // The holder again: generation 2, expiry moved.
  auto again = store->AcquireLease("sb-1", "worker-a", kTtl, 2'000);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->generation, 2);
  EXPECT_EQ(again->expires_at_ms, 62'000);
  // Another holder while it is live: refused, naming the holder; nothing changes.
  auto other = store->AcquireLease("sb-1", "worker-b", kTtl, 3'000);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kAborted);
  EXPECT_NE(other.error().message.find("held by worker-a"), std::string::npos)
      << other.error().message;
  EXPECT_EQ((*store->GetLease("sb-1"))->generation, 2);
  // At expiry (expires_at <= now) it is free for anyone.
  auto taken = store->AcquireLease("sb-1", "worker-b", kTtl, 62'000);
  ASSERT_TRUE(taken) << taken.error().ToString();
  EXPECT_EQ(taken->holder_id, "worker-b");
  EXPECT_EQ(taken->generation, 3);
}

TEST_F(LeaseStoreTest, RenewOnlyByTheHolderBeforeExpiryAtTheCurrentGeneration) {
  auto store = OpenStore();
  auto none = store->RenewLease("sb-1", "worker-a", std::nullopt, kTtl, 1'000);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store->AcquireLease("sb-1", "worker-a", kTtl, 1'000));

  auto foreign = store->RenewLease("sb-1", "worker-b", 1, kTtl, 2'000);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, ErrorCode::kAborted);
  EXPECT_NE(foreign.error().message.find("held by worker-a, not worker-b"), std::string::npos);

  auto stale = store->RenewLease("sb-1", "worker-a", 0, kTtl, 2'000);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(stale.error().message.find("stale"), std::string::npos);

  auto renewed = store->RenewLease("sb-1", "worker-a", 1, kTtl, 2'000);
  ASSERT_TRUE(renewed) << renewed.error().ToString();
  EXPECT_EQ(renewed->generation, 2);
  EXPECT_EQ(renewed->expires_at_ms, 62'000);

  auto expired = store->RenewLease("sb-1", "worker-a", 2, kTtl, 62'000);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(expired.error().message.find("expired at"), std::string::npos);
  EXPECT_EQ((*store->GetLease("sb-1"))->generation, 2) << "a refused renew changes nothing";
}

TEST_F(LeaseStoreTest, ReleaseOnlyByTheHolderAndTheGenerationNeverGoesBack) {
  auto store = OpenStore();
  EXPECT_EQ(store->ReleaseLease("sb-1", "worker-a", 1'000).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store->AcquireLease("sb-1", "worker-a", kTtl, 1'000));
  ASSERT_TRUE(store->AcquireLease("sb-1", "worker-a", kTtl, 1'500));
  auto foreign = store->ReleaseLease("sb-1", "worker-b", 2'000);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, ErrorCode::kAborted);
  ASSERT_TRUE(store->ReleaseLease("sb-1", "worker-a", 2'000));
  auto released = *store->GetLease("sb-1");
  ASSERT_TRUE(released);
  EXPECT_EQ(released->holder_id, "");
  EXPECT_EQ(released->generation, 2);
  // A released lease cannot be renewed, even by its last holder...
  auto renew = store->RenewLease("sb-1", "worker-a", 2, kTtl, 3'000);
  ASSERT_FALSE(renew);
  EXPECT_NE(renew.error().message.find("released"), std::string::npos);
  // ...and the next acquire, by anyone, continues the generation (a worker refuses one lower
  // than it accepted).
  auto next = store->AcquireLease("sb-1", "worker-b", kTtl, 3'000);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->generation, 3);
  // Leases survive a reopen.
  store.reset();
  EXPECT_EQ((*OpenStore()->GetLease("sb-1"))->holder_id, "worker-b");
}

TEST_F(LeaseStoreTest, ConcurrentAcquiresOfAFreeLeaseHaveExactlyOneWinner) {
  constexpr int kRacers = 12;
  for (const int64_t now : {1'000, 200'000}) {  // a lease never held, then an expired one
    std::atomic<int> wins{0}, aborted{0};
    Race(kRacers, [&](int i, SqliteStore& store) {
      auto r = store.AcquireLease("sb-race", "worker-" + std::to_string(i), kTtl, now);
      if (r) {
        ++wins;
      } else if (r.error().code == ErrorCode::kAborted) {
        ++aborted;
      } else {
        ADD_FAILURE() << r.error().ToString();
      }
    });
    EXPECT_EQ(wins.load(), 1) << "at " << now;
    EXPECT_EQ(aborted.load(), kRacers - 1) << "at " << now;
    EXPECT_EQ((*OpenStore()->GetLease("sb-race"))->generation, now == 1'000 ? 1 : 2);
  }
}

TEST_F(LeaseStoreTest, ConcurrentRenewsByTheHolderNeverReuseAGeneration) {
  ASSERT_TRUE(OpenStore()->AcquireLease("sb-1", "worker-a", kTtl, 1'000));
  constexpr int kThreads = 6, kEach = 25;
  std::mutex mu;
  std::set<int64_t> seen;
  std::atomic<int> renewed{0};
  Race(kThreads, [&](int, SqliteStore& store) {
    for (int k = 0; k < kEach; ++k) {
      // Without an expected generation: every renew by the holder succeeds, one at a time.
      auto r = store.RenewLease("sb-1", "worker-a", std::nullopt, kTtl, 2'000);
      ASSERT_TRUE(r) << r.error().ToString();
      std::lock_guard lock(mu);
      EXPECT_TRUE(seen.insert(r->generation).second) << "generation reused: " << r->generation;
      ++renewed;
    }
  });
  EXPECT_EQ(renewed.load(), kThreads * kEach);
  EXPECT_EQ((*OpenStore()->GetLease("sb-1"))->generation, 1 + kThreads * kEach);
}

TEST_F(LeaseStoreTest, WorkerHeartbeatsKeepTheFirstSightingAndCount) {
  auto store = OpenStore();
  WorkerRecord w{.worker_id = "worker-a",
                 .hostname = "host-a",
                 .status = "online",
                 .rpc_url = "http://127.0.0.1:7430",
                 .max_sandboxes = 10,
                 .providers_json = R"(["local"])",
                 .capabilities_json = "[]",
                 .last_heartbeat_ms = 1'000};
  ASSERT_TRUE(store->RecordWorkerHeartbeat(w));
  w.status = "draining";
  w.last_heartbeat_ms = 31'000;
  ASSERT_TRUE(store->RecordWorkerHeartbeat(w));
  auto got = *store->GetWorker("worker-a");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, "draining");
  EXPECT_EQ(got->first_seen_ms, 1'000);
  EXPECT_EQ(got->last_heartbeat_ms, 31'000);
  EXPECT_EQ(got->heartbeats, 2);
  EXPECT_EQ(got->max_sandboxes, 10);
  EXPECT_FALSE(*store->GetWorker("worker-b"));
  auto all = store->ListWorkers();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
}

}  // namespace
}  // namespace edge::controller
