// CommandJournal: one row per admitted command, removed only by the admission that wrote it
// (issue 16: a repeat admitted while the first run ends must keep its own row), numbers that
// count on across processes, and rows of a journal written before admissions were numbered.
#include "sandbox/command_journal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sandbox/state_db.h"
#include "tests/support/temp_dir.h"

namespace edge::sandbox {
namespace {

class CommandJournalTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  // A new agent process's journal on the state database under `dir` (default: the fixture's).
  void Reopen(const std::string& dir = "") {
    journal_.reset();
    db_.reset();
    auto db = StateDb::Open(dir.empty() ? tmp_.path() : dir);
    ASSERT_TRUE(db) << db.error().ToString();
    db_ = std::move(*db);
    auto journal = CommandJournal::Open(*db_);
    ASSERT_TRUE(journal) << journal.error().ToString();
    journal_ = std::move(*journal);
  }
  std::vector<std::string> Ids() {
    auto rows = journal_->Unfinished();
    EXPECT_TRUE(rows) << rows.error().ToString();
    std::vector<std::string> ids;
    if (rows) {
      for (const auto& e : *rows)
        ids.push_back(e.command_id + "#" + std::to_string(e.admission));
    }
    return ids;
  }

  edge::testing::TempDir tmp_{"journal"};
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<CommandJournal> journal_;
};

TEST_F(CommandJournalTest, ARowIsRemovedOnlyByTheAdmissionThatWroteIt) {
  auto first = journal_->Admitted({"cmd-a", "exec", "edge", 1000});
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_EQ(*first, 1);
  auto again = journal_->Admitted({"cmd-a", "exec", "edge", 1001});
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(*again, 2);
  EXPECT_EQ(Ids(), std::vector<std::string>{"cmd-a#2"}) << "the repeat replaced the row";

  ASSERT_TRUE(journal_->Finished("cmd-a", 1));
  EXPECT_EQ(Ids(), std::vector<std::string>{"cmd-a#2"}) << "the first run's end left it";
  ASSERT_TRUE(journal_->Finished("cmd-a", 2));
  EXPECT_TRUE(Ids().empty());
  ASSERT_TRUE(journal_->Finished("cmd-a", 2)) << "removing what is gone is not an error";
}

TEST_F(CommandJournalTest, AdmissionsCountOnAboveTheRowsAnEarlierProcessLeft) {
  ASSERT_TRUE(journal_->Admitted({"cmd-a", "exec", "edge", 1000}));
  ASSERT_TRUE(journal_->Admitted({"cmd-b", "exec", "worker", 1001}));
  ASSERT_TRUE(journal_->Admitted({"cmd-c", "exec", "worker", 1002}));
  ASSERT_TRUE(journal_->Finished("cmd-c", 3));
  Reopen();  // a new agent process
  EXPECT_EQ(Ids(), (std::vector<std::string>{"cmd-a#1", "cmd-b#2"}));
  auto next = journal_->Admitted({"cmd-a", "exec", "edge", 2000});
  ASSERT_TRUE(next) << next.error().ToString();
  EXPECT_EQ(*next, 3) << "above every row left (2), so never one of theirs";
  ASSERT_TRUE(journal_->Finished("cmd-a", 1)) << "the earlier process's number";
  EXPECT_EQ(Ids(), (std::vector<std::string>{"cmd-b#2", "cmd-a#3"}));
}

// A journal written by an agent before admissions were numbered (schema version 1): its rows
// read back as admission 0 and are removed as such; new admissions start at 1.
TEST_F(CommandJournalTest, RowsOfAnUnnumberedJournalReadAsAdmissionZero) {
  edge::testing::TempDir old{"journal-v1"};
  {
    auto db = StateDb::Open(old.path());
    ASSERT_TRUE(db) << db.error().ToString();
    ASSERT_TRUE((*db)->Migrate("command_journal",
                               {{1,
                                 "CREATE TABLE command_journal (command_id TEXT PRIMARY KEY, "
                                 "tool TEXT NOT NULL, door TEXT NOT NULL, admitted_at_ms "
                                 "INTEGER NOT NULL);"}}));
    ASSERT_TRUE((*db)->Exec("INSERT INTO command_journal VALUES ('cmd-old', 'exec', 'edge', 5)"));
  }
  Reopen(old.path());
  EXPECT_EQ(Ids(), std::vector<std::string>{"cmd-old#0"});
  auto next = journal_->Admitted({"cmd-new", "exec", "edge", 6});
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, 1);
  ASSERT_TRUE(journal_->Finished("cmd-old", 0));
  EXPECT_EQ(Ids(), std::vector<std::string>{"cmd-new#1"});
  journal_.reset();  // closed before `old` is removed
  db_.reset();
}

}  // namespace
}  // namespace edge::sandbox
