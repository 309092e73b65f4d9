#include "sandbox/lease_table.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class LeaseTableTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void TearDown() override {
    table_.reset();
    db_.reset();
  }
  void Reopen() {
    table_.reset();
    db_.reset();
    auto db = StateDb::Open(dir_);
    ASSERT_TRUE(db) << db.error().ToString();
    db_ = std::move(*db);
    auto table = LeaseTable::Open(*db_);
    ASSERT_TRUE(table) << table.error().ToString();
    table_ = std::move(*table);
  }
  Lease Make(int64_t gen, std::string resource = "sbx-1", std::string holder = "worker-a") {
    return Lease{std::move(resource), std::move(holder), gen, clock_.Now() + seconds(30)};
  }
  static void ExpectRejected(const Status& st, std::initializer_list<std::string_view> words) {
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::kLeaseRejected) << st.error().ToString();
    for (auto w : words) {
      EXPECT_NE(st.error().message.find(w), std::string::npos)
          << "\"" << w << "\" not in: " << st.error().message;
    }
  }

  edge::testing::TempDir tmp_{"lease"};
  std::string dir_ = tmp_.path();
  ManualClock clock_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<LeaseTable> table_;
};

TEST_F(LeaseTableTest, AcceptsAValidLeaseAndRecordsIt) {
  Lease lease = Make(3);
  ASSERT_TRUE(table_->Check(&lease, "worker-a", "sbx-1", clock_));
  // Check alone records nothing.
  EXPECT_EQ(table_->Get("sbx-1").error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(table_->Accept(&lease, "worker-a", "sbx-1", clock_));
  auto rec = table_->Get("sbx-1");
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->highest_generation, 3);
  ASSERT_TRUE(rec->current);
  EXPECT_EQ(rec->current->holder_id, "worker-a");
  EXPECT_EQ(rec->current->generation, 3);
  EXPECT_EQ(ToEpochMillis(rec->current->expires_at), ToEpochMillis(lease.expires_at));
  // The same generation again is fine (not lower than the highest).
  EXPECT_TRUE(table_->Accept(&lease, "worker-a", "sbx-1", clock_));
}

TEST_F(LeaseTableTest, EachRuleRejectsWithItsOwnMessage) {
  const Clock& now = clock_;
  ExpectRejected(table_->Check(nullptr, "worker-a", "sbx-1", now), {"lease is missing", "sbx-1"});

  Lease foreign = Make(1, "sbx-1", "worker-b");
  ExpectRejected(table_->Check(&foreign, "worker-a", "sbx-1", now),
                 {"holder_id \"worker-b\"", "\"worker-a\""});

  Lease blank = Make(1, "  ");
  ExpectRejected(table_->Check(&blank, "worker-a", "  ", now), {"resource_id", "is blank"});
  Lease empty = Make(1, "");
  ExpectRejected(table_->Check(&empty, "worker-a", "", now), {"is blank"});

  Lease other = Make(1, "sbx-2");
  ExpectRejected(table_->Check(&other, "worker-a", "sbx-1", now),
                 {"\"sbx-2\"", "does not match", "\"sbx-1\""});

  Lease expired = Make(1);
  expired.expires_at = clock_.Now();  // expires_at <= now is expired
  ExpectRejected(table_->Check(&expired, "worker-a", "sbx-1", now), {"expired", "sbx-1"});
  expired.expires_at = clock_.Now() - seconds(1);
  ExpectRejected(table_->Accept(&expired, "worker-a", "sbx-1", now), {"expired"});

  Lease negative = Make(-1);
  ExpectRejected(table_->Check(&negative, "worker-a", "sbx-1", now), {"-1", "negative"});

  Lease high = Make(7);
  ASSERT_TRUE(table_->Accept(&high, "worker-a", "sbx-1", now));
  Lease low = Make(6);
  ExpectRejected(table_->Check(&low, "worker-a", "sbx-1", now),
                 {"generation 6", "lower than the highest accepted generation 7"});
  ExpectRejected(table_->Accept(&low, "worker-a", "sbx-1", now), {"generation 6", "7"});
  // None of the rejected leases changed the record.
  auto rec = table_->Get("sbx-1");
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->highest_generation, 7);
  EXPECT_EQ(rec->current->generation, 7);
}

TEST_F(LeaseTableTest, GenerationsAreTrackedPerResource) {
  Lease a = Make(10, "sbx-a");
  ASSERT_TRUE(table_->Accept(&a, "worker-a", "sbx-a", clock_));
  Lease b = Make(1, "sbx-b");
  EXPECT_TRUE(table_->Accept(&b, "worker-a", "sbx-b", clock_));
}

TEST_F(LeaseTableTest, HighestGenerationSurvivesReopen) {
  Lease lease = Make(5);
  ASSERT_TRUE(table_->Accept(&lease, "worker-a", "sbx-1", clock_));
  Reopen();
  auto rec = table_->Get("sbx-1");
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->highest_generation, 5);
  ASSERT_TRUE(rec->current);
  EXPECT_EQ(rec->current->generation, 5);
  Lease stale = Make(4);
  ExpectRejected(table_->Accept(&stale, "worker-a", "sbx-1", clock_),
                 {"generation 4", "highest accepted generation 5"});
}

TEST_F(LeaseTableTest, ReleaseKeepsTheFenceAndOnlyTheHolderReleases) {
  Lease lease = Make(2);
  ASSERT_TRUE(table_->Accept(&lease, "worker-a", "sbx-1", clock_));
  ExpectRejected(table_->Release("sbx-1", "worker-b"), {"held by \"worker-a\"", "\"worker-b\""});
  ASSERT_TRUE(table_->Release("sbx-1", "worker-a"));
  auto rec = table_->Get("sbx-1");
  ASSERT_TRUE(rec);
  EXPECT_FALSE(rec->current);
  EXPECT_EQ(rec->highest_generation, 2);
  auto again = table_->Release("sbx-1", "worker-a");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  EXPECT_NE(again.error().message.find("sbx-1"), std::string::npos);
  // A released resource still fences lower generations.
  Lease old = Make(1);
  ExpectRejected(table_->Accept(&old, "worker-a", "sbx-1", clock_), {"generation 1"});
}

TEST_F(LeaseTableTest, RenewNeedsACurrentLeaseAndExtendsIt) {
  Lease renewed = Make(1);
  ExpectRejected(table_->Renew(renewed, "worker-a", clock_), {"no current lease to renew"});
  ASSERT_TRUE(table_->Accept(&renewed, "worker-a", "sbx-1", clock_));
  clock_.Advance(seconds(20));
  renewed.expires_at = clock_.Now() + seconds(60);
  ASSERT_TRUE(table_->Renew(renewed, "worker-a", clock_));
  clock_.Advance(seconds(30));  // past the first expiry, before the renewed one
  auto expired = table_->ExpiredLeases(clock_);
  ASSERT_TRUE(expired);
  EXPECT_TRUE(expired->empty());
  Lease stale = renewed;
  stale.generation = 0;
  ExpectRejected(table_->Renew(stale, "worker-a", clock_), {"generation 0"});
  Lease foreign = renewed;
  foreign.holder_id = "worker-b";
  ExpectRejected(table_->Renew(foreign, "worker-a", clock_), {"\"worker-b\""});
}

TEST_F(LeaseTableTest, ExpiredLeasesListsOnlyCurrentLeasesPastExpiry) {
  Lease soon = Make(1, "sbx-soon");
  soon.expires_at = clock_.Now() + seconds(5);
  Lease later = Make(1, "sbx-later");
  later.expires_at = clock_.Now() + seconds(50);
  Lease released = Make(1, "sbx-released");
  released.expires_at = clock_.Now() + seconds(1);
  for (auto* l : {&soon, &later, &released})
    ASSERT_TRUE(table_->Accept(l, "worker-a", l->resource_id, clock_));
  ASSERT_TRUE(table_->Release("sbx-released", "worker-a"));

  auto none = table_->ExpiredLeases(clock_);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  clock_.Advance(seconds(5));  // exactly at sbx-soon's expiry
  auto one = table_->ExpiredLeases(clock_);
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].resource_id, "sbx-soon");
  clock_.Advance(seconds(100));
  auto two = table_->ExpiredLeases(clock_);
  ASSERT_TRUE(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].resource_id, "sbx-soon");
  EXPECT_EQ((*two)[1].resource_id, "sbx-later");
}

// Issue 16: the wall clock stepped an hour either way after a lease was accepted. The lease
// keeps the real time it had left: not expired at once by a jump forward, not kept an hour
// too long by a jump back. A lease this table never accepted is judged by the wall clock.
TEST_F(LeaseTableTest, AWallClockJumpNeitherEndsALeaseEarlyNorKeepsItLate) {
  Lease ahead = Make(3, "sbx-ahead");  // 30 s left
  ASSERT_TRUE(table_->Accept(&ahead, "worker-a", "sbx-ahead", clock_));
  clock_.SetWall(clock_.Now() + std::chrono::hours(1));
  EXPECT_TRUE(table_->ExpiredLeases(clock_)->empty()) << "a jump forward ends nothing";
  EXPECT_TRUE(table_->Check(&ahead, "worker-a", "sbx-ahead", clock_));
  EXPECT_TRUE(table_->Accept(&ahead, "worker-a", "sbx-ahead", clock_))
      << "the same lease presented again keeps its deadline";
  Lease unknown = Make(1, "sbx-new");
  unknown.expires_at = ahead.expires_at;  // by the jumped wall clock: an hour ago
  ExpectRejected(table_->Check(&unknown, "worker-a", "sbx-new", clock_), {"expired"});
  clock_.Advance(seconds(29));
  EXPECT_TRUE(table_->ExpiredLeases(clock_)->empty());
  clock_.Advance(seconds(1));  // 30 s of real time: its time is up
  auto expired = table_->ExpiredLeases(clock_);
  ASSERT_TRUE(expired);
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].resource_id, "sbx-ahead");
  ExpectRejected(table_->Check(&ahead, "worker-a", "sbx-ahead", clock_), {"expired"});

  Lease behind = Make(1, "sbx-behind");  // 30 s left
  ASSERT_TRUE(table_->Accept(&behind, "worker-a", "sbx-behind", clock_));
  clock_.SetWall(clock_.Now() - std::chrono::hours(2));
  clock_.Advance(seconds(30));  // the wall clock says an hour and more is left; it is not
  auto both = table_->ExpiredLeases(clock_);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->size(), 2u);
  ExpectRejected(table_->Check(&behind, "worker-a", "sbx-behind", clock_), {"expired"});

  // A renewal anchors the new expiry afresh.
  clock_.SetWall(clock_.Now() + std::chrono::hours(2));
  Lease renewed = Make(2, "sbx-behind");
  ASSERT_TRUE(table_->Renew(renewed, "worker-a", clock_));
  clock_.SetWall(clock_.Now() + std::chrono::hours(1));
  EXPECT_TRUE(table_->Check(&renewed, "worker-a", "sbx-behind", clock_));
}

TEST_F(LeaseTableTest, ConcurrentAcceptsNeverTakeALowerGenerationAfterAHigherOne) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 60;
  std::vector<int64_t> gens;
  for (int64_t g = 1; g <= kThreads * kPerThread; ++g)
    gens.push_back(g);
  std::shuffle(gens.begin(), gens.end(), std::mt19937(42));
  // The highest generation known to be committed; a success for g after `floor` was read
  // means g was accepted after floor, so g must not be lower.
  std::atomic<int64_t> committed{0};
  std::atomic<int> violations{0}, accepted{0}, other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int64_t g = gens[static_cast<size_t>(t * kPerThread + i)];
        Lease lease = Make(g);
        const int64_t floor = committed.load();
        auto st = table_->Accept(&lease, "worker-a", "sbx-1", clock_);
        if (st) {
          ++accepted;
          if (g < floor) ++violations;
          int64_t cur = committed.load();
          while (cur < g && !committed.compare_exchange_weak(cur, g)) {
          }
        } else if (st.error().code != ErrorCode::kLeaseRejected ||
                   st.error().message.find("lower than the highest") == std::string::npos) {
          ++other_errors;
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_GT(accepted.load(), 0);
  auto rec = table_->Get("sbx-1");
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->highest_generation, kThreads * kPerThread);
  EXPECT_EQ(rec->current->generation, kThreads * kPerThread);
}

}  // namespace
}  // namespace edge::sandbox
