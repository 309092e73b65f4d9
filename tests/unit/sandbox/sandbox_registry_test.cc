#include "sandbox/sandbox_registry.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class SandboxRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void TearDown() override {
    reg_.reset();
    db_.reset();
  }
  void Reopen(size_t max_sandboxes = 2) {
    reg_.reset();
    db_.reset();
    auto db = StateDb::Open(dir_);
    ASSERT_TRUE(db) << db.error().ToString();
    db_ = std::move(*db);
    auto reg = SandboxRegistry::Open(*db_, clock_, {dir_ + "/sandboxes", max_sandboxes});
    ASSERT_TRUE(reg) << reg.error().ToString();
    reg_ = std::move(*reg);
  }
  SpawnRequest Req(std::string id) {
    return SpawnRequest{id, "local", "rt-" + id, "owner-1", seconds(0), {{"image", "alpine"}}};
  }
  static mode_t Mode(const std::string& p) {
    struct stat st {};
    ::lstat(p.c_str(), &st);
    return st.st_mode & 07777;
  }

  edge::testing::TempDir tmp_{"registry"};
  std::string dir_ = tmp_.path();
  ManualClock clock_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<SandboxRegistry> reg_;
};

TEST(SandboxState, NamesRoundTripAndUnknownNamesAreRejected) {
  for (auto s : {SandboxState::kRunning, SandboxState::kStopped, SandboxState::kDestroyed,
                 SandboxState::kUnhealthy}) {
    EXPECT_EQ(*ParseSandboxState(SandboxStateName(s)), s);
  }
  EXPECT_EQ(SandboxStateName(SandboxState::kUnhealthy), "unhealthy");
  auto bad = ParseSandboxState("Running");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("\"Running\""), std::string::npos);
}

TEST_F(SandboxRegistryTest, SpawnCreatesAPrivateWorkspaceAndARecord) {
  auto req = Req("sbx-1");
  req.ttl = seconds(90);
  auto info = reg_->Spawn(req);
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->state, SandboxState::kRunning);
  EXPECT_EQ(info->root_dir, dir_ + "/sandboxes/sbx-1/root");
  EXPECT_TRUE(fs::is_directory(info->root_dir));
  EXPECT_EQ(Mode(info->root_dir), 0700u);
  EXPECT_EQ(Mode(dir_ + "/sandboxes/sbx-1"), 0700u);
  EXPECT_EQ(Mode(dir_ + "/sandboxes"), 0700u);
  EXPECT_EQ(info->created_at, clock_.Now());
  ASSERT_TRUE(info->expires_at);
  EXPECT_EQ(*info->expires_at, clock_.Now() + seconds(90));

  auto got = reg_->Get("sbx-1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->provider, "local");
  EXPECT_EQ(got->runtime_id, "rt-sbx-1");
  EXPECT_EQ(got->owner, "owner-1");
  EXPECT_EQ(got->ttl, seconds(90));
  EXPECT_EQ(got->expires_at, info->expires_at);
  EXPECT_EQ(got->created_at, info->created_at);
  EXPECT_EQ(got->metadata, (std::map<std::string, std::string>{{"image", "alpine"}}));
}

TEST_F(SandboxRegistryTest, IdsAreValidated) {
  for (std::string bad : {std::string(""), std::string("."), std::string(".."), std::string("a/b"),
                          std::string("a b"), std::string("caf\xc3\xa9"), std::string(65, 'x'),
                          std::string("../etc")}) {
    auto r = reg_->Spawn(Req(bad));
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("sandbox_id \"" + bad + "\""), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("[A-Za-z0-9._-]{1,64}"), std::string::npos);
    EXPECT_EQ(reg_->Get(bad).error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_TRUE(reg_->Spawn(Req(std::string(64, 'x'))));
  EXPECT_TRUE(reg_->Spawn(Req("A-z_0.9")));
  EXPECT_FALSE(fs::exists(dir_ + "/etc"));
}

TEST_F(SandboxRegistryTest, DuplicatesAndNegativeTtlsAreRejected) {
  ASSERT_TRUE(reg_->Spawn(Req("sbx-1")));
  auto dup = reg_->Spawn(Req("sbx-1"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(dup.error().message.find("\"sbx-1\" already exists in state running"),
            std::string::npos);
  auto req = Req("sbx-2");
  req.ttl = seconds(-1);
  auto neg = reg_->Spawn(req);
  ASSERT_FALSE(neg);
  EXPECT_EQ(neg.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(neg.error().message.find("ttl -1s"), std::string::npos);
}

TEST_F(SandboxRegistryTest, MaxSandboxesIsEnforcedOnLiveSandboxes) {
  ASSERT_TRUE(reg_->Spawn(Req("a")));
  ASSERT_TRUE(reg_->SetState("a", SandboxState::kStopped));  // stopped still counts
  ASSERT_TRUE(reg_->Spawn(Req("b")));
  auto full = reg_->Spawn(Req("c"));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(full.error().message.find("max_sandboxes (2)"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/sandboxes/c"));
  ASSERT_TRUE(reg_->Destroy("a"));
  EXPECT_TRUE(reg_->Spawn(Req("c")));
}

TEST_F(SandboxRegistryTest, DestroyRemovesTheWorkspaceWithoutFollowingSymlinks) {
  fs::create_directories(dir_ + "/outside");
  std::ofstream(dir_ + "/outside/keep") << "keep";
  auto info = reg_->Spawn(Req("sbx-1"));
  ASSERT_TRUE(info);
  fs::create_directories(info->root_dir + "/deep/er");
  std::ofstream(info->root_dir + "/deep/er/f") << "x";
  fs::create_symlink(dir_ + "/outside", info->root_dir + "/deep/link");
  std::ofstream(dir_ + "/sandboxes/sbx-1/console.log") << "log";

  auto gone = reg_->Destroy("sbx-1");
  ASSERT_TRUE(gone) << gone.error().ToString();
  EXPECT_EQ(gone->state, SandboxState::kDestroyed);
  EXPECT_FALSE(fs::exists(dir_ + "/sandboxes/sbx-1"));
  EXPECT_TRUE(fs::exists(dir_ + "/outside/keep"));
  EXPECT_EQ(reg_->Get("sbx-1")->state, SandboxState::kDestroyed);
  // Destroying again is a no-op; an unknown id is NOT_FOUND.
  EXPECT_EQ(reg_->Destroy("sbx-1")->state, SandboxState::kDestroyed);
  auto unknown = reg_->Destroy("nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("\"nope\""), std::string::npos);
  EXPECT_EQ(reg_->Get("nope").error().code, ErrorCode::kNotFound);
}

TEST_F(SandboxRegistryTest, RespawnAfterDestroyStartsWithAnEmptyWorkspace) {
  ASSERT_TRUE(reg_->Spawn(Req("sbx-1")));
  ASSERT_TRUE(reg_->Destroy("sbx-1"));
  // Something left behind (say, a crash between steps) is not inherited.
  fs::create_directories(dir_ + "/sandboxes/sbx-1/root");
  std::ofstream(dir_ + "/sandboxes/sbx-1/root/stale") << "old";
  auto again = reg_->Spawn(Req("sbx-1"));
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(again->state, SandboxState::kRunning);
  EXPECT_TRUE(fs::is_empty(again->root_dir));
}

TEST_F(SandboxRegistryTest, ListSkipsDestroyedUnlessAsked) {
  ASSERT_TRUE(reg_->Spawn(Req("b")));
  ASSERT_TRUE(reg_->Spawn(Req("a")));
  ASSERT_TRUE(reg_->Destroy("b"));
  auto live = reg_->List();
  ASSERT_TRUE(live);
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id, "a");
  auto all = reg_->List(true);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, "a");
  EXPECT_EQ((*all)[1].id, "b");
}

TEST_F(SandboxRegistryTest, StateAndRuntimeIdChangesFollowTheRules) {
  ASSERT_TRUE(reg_->Spawn(Req("sbx-1")));
  ASSERT_TRUE(reg_->SetState("sbx-1", SandboxState::kUnhealthy));
  ASSERT_TRUE(reg_->SetRuntimeId("sbx-1", "rt-new"));
  auto got = reg_->Get("sbx-1");
  EXPECT_EQ(got->state, SandboxState::kUnhealthy);
  EXPECT_EQ(got->runtime_id, "rt-new");

  auto direct = reg_->SetState("sbx-1", SandboxState::kDestroyed);
  ASSERT_FALSE(direct);
  EXPECT_EQ(direct.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(direct.error().message.find("Destroy"), std::string::npos);

  ASSERT_TRUE(reg_->Destroy("sbx-1"));
  auto revive = reg_->SetState("sbx-1", SandboxState::kRunning);
  ASSERT_FALSE(revive);
  EXPECT_EQ(revive.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(revive.error().message.find("\"sbx-1\" is destroyed"), std::string::npos);
  auto rt = reg_->SetRuntimeId("sbx-1", "x");
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(reg_->SetState("nope", SandboxState::kRunning).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(reg_->SetRuntimeId("nope", "x").error().code, ErrorCode::kNotFound);
}

TEST_F(SandboxRegistryTest, ExpiredListsLiveSandboxesPastTheirTtl) {
  auto short_lived = Req("short");
  short_lived.ttl = seconds(10);
  auto long_lived = Req("long");
  long_lived.ttl = seconds(100);
  ASSERT_TRUE(reg_->Spawn(short_lived));
  ASSERT_TRUE(reg_->Spawn(long_lived));
  EXPECT_TRUE(reg_->Expired(clock_.Now())->empty());
  clock_.Advance(seconds(10));
  auto one = reg_->Expired(clock_.Now());
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].id, "short");
  ASSERT_TRUE(reg_->Destroy("short"));
  clock_.Advance(seconds(1000));
  auto after = reg_->Expired(clock_.Now());
  ASSERT_TRUE(after);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, "long");
}

TEST_F(SandboxRegistryTest, RecordsSurviveARestart) {
  auto req = Req("sbx-1");
  req.ttl = seconds(60);
  req.metadata = {{"k", "v"}, {"quote", "a\"b"}};
  auto info = reg_->Spawn(req);
  ASSERT_TRUE(info);
  ASSERT_TRUE(reg_->Spawn(Req("sbx-2")));
  ASSERT_TRUE(reg_->Destroy("sbx-2"));
  Reopen(/*max_sandboxes=*/1);
  auto got = reg_->Get("sbx-1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->state, SandboxState::kRunning);
  EXPECT_EQ(got->metadata, req.metadata);
  EXPECT_EQ(got->created_at, info->created_at);
  EXPECT_EQ(got->expires_at, info->expires_at);
  EXPECT_EQ(reg_->Get("sbx-2")->state, SandboxState::kDestroyed);
  // The limit counts the sandboxes found on disk after the restart.
  auto full = reg_->Spawn(Req("sbx-3"));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(full.error().message.find("max_sandboxes (1)"), std::string::npos);
}

TEST_F(SandboxRegistryTest, OpenRejectsBadOptions) {
  auto zero = SandboxRegistry::Open(*db_, clock_, {dir_ + "/s", 0});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(zero.error().message.find("max_sandboxes 0"), std::string::npos);
  auto nodir = SandboxRegistry::Open(*db_, clock_, {"", 1});
  ASSERT_FALSE(nodir);
  EXPECT_EQ(nodir.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(nodir.error().message.find("sandboxes_dir"), std::string::npos);
}

TEST_F(SandboxRegistryTest, MetadataMustBeUtf8) {
  auto req = Req("sbx-1");
  req.metadata = {{"k", std::string("\xff\xfe")}};
  auto r = reg_->Spawn(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("metadata of sandbox \"sbx-1\""), std::string::npos);
  EXPECT_EQ(reg_->Get("sbx-1").error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ + "/sandboxes/sbx-1"));
}

}  // namespace
}  // namespace edge::sandbox
