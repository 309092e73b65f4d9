#include "sandbox/idempotency_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class IdempotencyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void TearDown() override {
    store_.reset();
    db_.reset();
  }
  void Reopen() {
    store_.reset();
    db_.reset();
    auto db = StateDb::Open(dir_);
    ASSERT_TRUE(db) << db.error().ToString();
    db_ = std::move(*db);
    auto store = IdempotencyStore::Open(*db_, clock_, options_);
    ASSERT_TRUE(store) << store.error().ToString();
    store_ = std::move(*store);
  }
  std::optional<std::string> Lookup(std::string_view id) {
    auto r = store_->Lookup(id);
    EXPECT_TRUE(r) << r.error().ToString();
    return r ? *r : std::nullopt;
  }

  edge::testing::TempDir tmp_{"idem"};
  std::string dir_ = tmp_.path();
  ManualClock clock_;
  IdempotencyStore::Options options_{
      .max_entries = 3, .max_age = seconds(60), .max_result_bytes = 64};
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<IdempotencyStore> store_;
};

TEST_F(IdempotencyStoreTest, RecordsAndReturnsOpaqueResults) {
  EXPECT_EQ(Lookup("cmd-1"), std::nullopt);
  const std::string result("{\"exit\":0}\0\xff", 12);
  ASSERT_TRUE(store_->Record("cmd-1", result));
  EXPECT_EQ(Lookup("cmd-1"), result);
  EXPECT_EQ(Lookup("cmd-2"), std::nullopt);
}

TEST_F(IdempotencyStoreTest, KeepsTheFirstResult) {
  ASSERT_TRUE(store_->Record("cmd-1", "first"));
  auto again = store_->Record("cmd-1", "second");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(again.error().message.find("\"cmd-1\""), std::string::npos);
  EXPECT_EQ(Lookup("cmd-1"), "first");
}

TEST_F(IdempotencyStoreTest, SurvivesReopen) {
  ASSERT_TRUE(store_->Record("cmd-1", "r1"));
  Reopen();
  EXPECT_EQ(Lookup("cmd-1"), "r1");
}

TEST_F(IdempotencyStoreTest, EvictsTheOldestBeyondMaxEntries) {
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(store_->Record(id, std::string("r-") + id));
    clock_.Advance(seconds(1));
  }
  EXPECT_EQ(*store_->Size(), 3u);
  EXPECT_EQ(Lookup("a"), std::nullopt);
  EXPECT_EQ(Lookup("b"), "r-b");
  EXPECT_EQ(Lookup("d"), "r-d");
  // Same timestamp: insertion order decides.
  ASSERT_TRUE(store_->Record("e", "r-e"));
  ASSERT_TRUE(store_->Record("f", "r-f"));
  EXPECT_EQ(Lookup("b"), std::nullopt);
  EXPECT_EQ(Lookup("c"), std::nullopt);
  EXPECT_EQ(Lookup("d"), "r-d");
  EXPECT_EQ(Lookup("f"), "r-f");
}

// Eviction follows the order the results were recorded in, not their wall-clock stamps: a
// wall clock stepped back (NTP, a VM restored) must not make the result just recorded the
// first to go, or the command it belongs to would run again when it is retried.
TEST_F(IdempotencyStoreTest, AfterTheWallClockStepsBackTheResultJustRecordedIsKept) {
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(store_->Record(id, std::string("r-") + id));
    clock_.Advance(seconds(1));
  }
  clock_.SetWall(clock_.Now() - seconds(10));
  ASSERT_TRUE(store_->Record("d", "r-d"));
  EXPECT_EQ(*store_->Size(), 3u);
  EXPECT_EQ(Lookup("d"), "r-d");
  EXPECT_EQ(Lookup("a"), std::nullopt);
  EXPECT_EQ(Lookup("b"), "r-b");
  EXPECT_EQ(Lookup("c"), "r-c");
  // Prune trims the same way.
  auto pruned = store_->Prune();
  ASSERT_TRUE(pruned);
  EXPECT_EQ(*pruned, 0u);
  EXPECT_EQ(Lookup("d"), "r-d");
}

TEST_F(IdempotencyStoreTest, EntriesOlderThanMaxAgeAreGone) {
  ASSERT_TRUE(store_->Record("old", "r-old"));
  clock_.Advance(seconds(30));
  ASSERT_TRUE(store_->Record("young", "r-young"));
  clock_.Advance(seconds(29));
  EXPECT_EQ(Lookup("old"), "r-old");
  clock_.Advance(seconds(1));  // "old" is now exactly max_age old
  EXPECT_EQ(Lookup("old"), std::nullopt);
  EXPECT_EQ(Lookup("young"), "r-young");
  // Its id can run (and be recorded) again.
  EXPECT_TRUE(store_->Record("old", "r-old-2"));
  EXPECT_EQ(Lookup("old"), "r-old-2");
  clock_.Advance(seconds(100));
  auto pruned = store_->Prune();
  ASSERT_TRUE(pruned);
  EXPECT_EQ(*pruned, 2u);
  EXPECT_EQ(*store_->Size(), 0u);
}

TEST_F(IdempotencyStoreTest, RejectsBadIdsAndOversizedResults) {
  for (std::string bad : {std::string(""), std::string("  "), std::string(257, 'x')}) {
    auto r = store_->Record(bad, "r");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("command_id"), std::string::npos);
    auto l = store_->Lookup(bad);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().code, ErrorCode::kInvalidArgument);
  }
  auto big = store_->Record("cmd-big", std::string(65, 'r'));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message.find("65 bytes, more than max_result_bytes 64"), std::string::npos)
      << big.error().message;
  EXPECT_TRUE(store_->Record("cmd-fits", std::string(64, 'r')));
}

TEST_F(IdempotencyStoreTest, RejectsAZeroWindow) {
  auto r = IdempotencyStore::Open(*db_, clock_, {.max_entries = 0});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("max_entries (0)"), std::string::npos);
}

}  // namespace
}  // namespace edge::sandbox
