// ProcessLedger: records live in fixed 4 KiB slots of one file, freed slots are reused, what an
// earlier runner left is kept until it is read, and the reader returns exactly the records
// (the file layout below is written by hand, from the header's description) and removes the
// file only afterwards, never while a live runner holds it.
#include "sandbox/process_ledger.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using Records = std::vector<std::string>;

class ProcessLedgerTest : public ::testing::Test {
 protected:
  std::string Path() const { return dir_.path() + "/process-ledger"; }
  // Drains the ledger; the records, sorted. Each call sees the file still there.
  Records Drain() {
    Records out;
    auto st = ProcessLedger::Drain(dir_.path(), [&](const std::string& record) {
      EXPECT_TRUE(fs::exists(Path())) << "removed before its records were handled";
      out.push_back(record);
    });
    EXPECT_TRUE(st) << st.error().ToString();
    std::sort(out.begin(), out.end());
    return out;
  }
  std::unique_ptr<ProcessLedger> Open() {
    auto l = ProcessLedger::Open(dir_.path());
    EXPECT_TRUE(l) << l.error().ToString();
    return l ? std::move(*l) : nullptr;
  }

  edge::testing::TempDir dir_{"ledger"};
};

TEST_F(ProcessLedgerTest, RecordsComeBackUntilRemovedAndTheFileGoesWhenRead) {
  auto ledger = Open();
  ASSERT_TRUE(ledger);
  struct stat st {};
  ASSERT_EQ(::stat(Path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto a = ledger->Add("101 5000 /cg/a\nfirst\n");
  auto b = ledger->Add("102 5001 \nsecond\n");
  auto c = ledger->Add("103 5002 /cg/c\nthird\n");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 1u);
  EXPECT_EQ(*c, 2u);
  ledger->Remove(*b);
  ledger.reset();  // an agent killed with -9 leaves its records behind
  EXPECT_EQ(Drain(), (Records{"101 5000 /cg/a\nfirst\n", "103 5002 /cg/c\nthird\n"}));
  EXPECT_FALSE(fs::exists(Path()));
  EXPECT_EQ(Drain(), Records{});  // no file: nothing, and no error
}

TEST_F(ProcessLedgerTest, AFreedSlotIsReusedBeforeTheFileGrows) {
  auto ledger = Open();
  ASSERT_TRUE(ledger);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(ledger->Add("x" + std::to_string(i)));
  const auto size = fs::file_size(Path());
  EXPECT_EQ(size, 2 * 4096u + 3);  // slot 2 holds "x2" and its NUL
  ledger->Remove(0);
  auto again = ledger->Add("a longer record than before");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0u);
  EXPECT_EQ(fs::file_size(Path()), size);
  // The shorter record that was in slot 0 before is not read past the new one's NUL.
  ledger->Remove(2);
  ASSERT_TRUE(ledger->Add("y"));
  ledger.reset();
  EXPECT_EQ(Drain(), (Records{"a longer record than before", "x1", "y"}));
}

TEST_F(ProcessLedgerTest, RecordsThatDoNotFitASlotAreRefused) {
  auto ledger = Open();
  ASSERT_TRUE(ledger);
  auto big = ledger->Add(std::string(4096, 'r'));  // 4096 + its NUL > 4096
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(big.error().message.find("4096 bytes does not fit a slot of 4096"), std::string::npos)
      << big.error().message;
  auto nul = ledger->Add(std::string("a\0b", 3));
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().code, ErrorCode::kInvalidArgument);
  auto fits = ledger->Add(std::string(4095, 'r'));
  ASSERT_TRUE(fits);
  ledger.reset();
  EXPECT_EQ(Drain(), Records{std::string(4095, 'r')});
}

TEST_F(ProcessLedgerTest, ASecondRunnerOnTheSameStateDirIsTurnedAway) {
  auto first = Open();
  ASSERT_TRUE(first);
  auto second = ProcessLedger::Open(dir_.path());
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(second.error().message.find("in use by another runner"), std::string::npos);
  // Nor are its records drained (killed) while it lives.
  ASSERT_TRUE(first->Add("live"));
  size_t called = 0;
  auto drained = ProcessLedger::Drain(dir_.path(), [&](const std::string&) { ++called; });
  ASSERT_FALSE(drained);
  EXPECT_EQ(drained.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(drained.error().message.find("in use by a live runner"), std::string::npos);
  EXPECT_EQ(called, 0u);
  EXPECT_TRUE(fs::exists(Path()));
  first.reset();
  EXPECT_EQ(Drain(), Records{"live"});  // the lock went with the first
  EXPECT_TRUE(ProcessLedger::Open(dir_.path()));
}

// A runner started before anyone read what a crashed one left (KillStaleGroups runs first in
// the agent, but a runner made on its own does not) must not write over those records.
TEST_F(ProcessLedgerTest, RecordsOfAnEarlierRunnerKeepTheirSlots) {
  {
    auto old = Open();
    ASSERT_TRUE(old);
    ASSERT_TRUE(old->Add("old-0"));
    auto gone = old->Add("old-1");
    ASSERT_TRUE(gone);
    ASSERT_TRUE(old->Add("old-2"));
    old->Remove(*gone);
  }
  auto ledger = Open();
  ASSERT_TRUE(ledger);
  auto a = ledger->Add("new-a");
  auto b = ledger->Add("new-b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, 1u) << "the one free slot first";
  EXPECT_EQ(*b, 3u) << "then the file grows";
  ledger.reset();
  EXPECT_EQ(Drain(), (Records{"new-a", "new-b", "old-0", "old-2"}));
}

// The layout, written by hand: slot 0 a record ended by its NUL (the rest of the slot is
// whatever was there: here the tail of a longer, older record), slot 1 free, slot 2 a record
// cut short by the end of the file (no NUL: not a record).
TEST_F(ProcessLedgerTest, TheReaderTakesEachSlotUpToItsNulAndNothingWithout) {
  std::string file(4096 * 2, '\0');
  const std::string r0 = "4242 987654 /sys/fs/cgroup/pids/edge-agent/77-0-0011223344556677\nexec\n";
  file.replace(0, r0.size() + 1, r0 + '\0');
  file.replace(r0.size() + 1, 10, "stale-tail");
  file[4096] = '\0';
  file.replace(4097, 5, "stale");
  file += "99 1 \nno-nul";
  std::ofstream(Path(), std::ios::binary) << file;
  EXPECT_EQ(Drain(), Records{r0});
}

}  // namespace
}  // namespace edge::sandbox
