// NodeKeyStore: keys/node.ed25519 is created 0600 (keys/ 0700) and loaded again unchanged; a
// staged key survives until Install archives the old key (0600) and makes the new one
// current; a corrupt or over-readable key file is an error naming the path and is never
// overwritten. Temp dirs only.
#include "agent/edge/node_key_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/clock.h"
#include "tests/unit/edge/test_support.h"

namespace edge::agentedge::testing {
namespace {

using namespace std::chrono_literals;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& data, mode_t mode) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << data;
  }
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

class NodeKeyStoreTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string data_ = dir_ / "data";
  NodeKeyStore store_{data_};
};

TEST_F(NodeKeyStoreTest, PathsAreTheDocumentedOnes) {
  EXPECT_EQ(store_.KeyPath(), data_ + "/keys/node.ed25519");
  EXPECT_EQ(store_.ArchiveDir(), data_ + "/keys/archive");
}

TEST_F(NodeKeyStoreTest, LoadOrCreateCreatesA0600Key) {
  auto missing = store_.Load();
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store_.Fingerprint(), 0u);

  bool created = false;
  auto key = store_.LoadOrCreate(&created);
  ASSERT_TRUE(key) << key.error().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(key->public_key().size(), identity::kEd25519PublicKeySize);
  ASSERT_TRUE(std::filesystem::exists(store_.KeyPath()));
  EXPECT_EQ(ModeOf(store_.KeyPath()), 0600);
  EXPECT_EQ(ModeOf(store_.KeysDir()), 0700);
  EXPECT_NE(store_.Fingerprint(), 0u);

  // The file holds that key: it signs, and the signature verifies with the returned public key.
  auto loaded = store_.Load();
  ASSERT_TRUE(loaded) << loaded.error().ToString();
  auto sig = loaded->Sign("challenge");
  ASSERT_TRUE(sig);
  EXPECT_TRUE(identity::NodeKey::Verify(key->public_key(), "challenge", *sig));
}

TEST_F(NodeKeyStoreTest, SecondCallLoadsTheSameKey) {
  auto first = store_.LoadOrCreate();
  ASSERT_TRUE(first) << first.error().ToString();
  const std::string bytes = Slurp(store_.KeyPath());
  const uint64_t fp = store_.Fingerprint();

  bool created = true;
  auto second = store_.LoadOrCreate(&created);
  ASSERT_TRUE(second) << second.error().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(second->public_key(), first->public_key());
  EXPECT_EQ(Slurp(store_.KeyPath()), bytes) << "the key file was rewritten";
  EXPECT_EQ(store_.Fingerprint(), fp);
  // A store over the same data_dir (another process, a restart) sees the same key.
  EXPECT_EQ(NodeKeyStore(data_).Load().value().public_key(), first->public_key());
}

TEST_F(NodeKeyStoreTest, CorruptKeyIsAnErrorAndIsNotOverwritten) {
  // A key generated now, then cut in half: a PEM that no longer parses.
  bool made = false;
  ASSERT_TRUE(store_.LoadOrCreate(&made));
  ASSERT_TRUE(made);
  const std::string whole = Slurp(store_.KeyPath());
  const std::string garbage = whole.substr(0, whole.size() / 2);
  Spit(store_.KeyPath(), garbage, 0600);

  bool created = true;
  auto key = store_.LoadOrCreate(&created);
  ASSERT_FALSE(key) << "a corrupt key was replaced by a new identity";
  EXPECT_FALSE(created);
  EXPECT_NE(key.error().code, ErrorCode::kNotFound);
  EXPECT_NE(key.error().message.find(store_.KeyPath()), std::string::npos) << key.error().message;
  EXPECT_EQ(Slurp(store_.KeyPath()), garbage);

  auto load = store_.Load();
  ASSERT_FALSE(load);
  EXPECT_NE(load.error().message.find(store_.KeyPath()), std::string::npos);
}

TEST_F(NodeKeyStoreTest, EmptyKeyFileIsNotOverwritten) {
  Spit(store_.KeyPath(), "", 0600);
  auto key = store_.LoadOrCreate();
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message.find(store_.KeyPath()), std::string::npos) << key.error().message;
  EXPECT_EQ(Slurp(store_.KeyPath()), "");
}

TEST_F(NodeKeyStoreTest, KeyReadableByOthersIsRefused) {
  auto key = store_.LoadOrCreate();
  ASSERT_TRUE(key);
  const std::string bytes = Slurp(store_.KeyPath());
  ASSERT_EQ(::chmod(store_.KeyPath().c_str(), 0644), 0);

  auto load = store_.Load();
  ASSERT_FALSE(load);
  EXPECT_EQ(load.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(load.error().message.find(store_.KeyPath()), std::string::npos);
  auto again = store_.LoadOrCreate();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(Slurp(store_.KeyPath()), bytes);
  EXPECT_EQ(ModeOf(store_.KeyPath()), 0644) << "the store must not silently chmod";
}

TEST_F(NodeKeyStoreTest, StageKeepsTheCurrentKeyUntilInstall) {
  auto old_key = store_.LoadOrCreate();
  ASSERT_TRUE(old_key);
  auto new_key = identity::NodeKey::Generate();
  ASSERT_TRUE(new_key);
  ASSERT_NE(new_key->public_key(), old_key->public_key());

  ASSERT_TRUE(store_.Stage(*new_key));
  EXPECT_EQ(ModeOf(store_.StagedPath()), 0600);
  auto staged = identity::NodeKey::Load(store_.StagedPath());
  ASSERT_TRUE(staged) << staged.error().ToString();
  EXPECT_EQ(staged->public_key(), new_key->public_key());
  EXPECT_EQ(store_.Load().value().public_key(), old_key->public_key());

  store_.DiscardStaged();
  EXPECT_FALSE(std::filesystem::exists(store_.StagedPath()));
  EXPECT_EQ(store_.Load().value().public_key(), old_key->public_key());
  store_.DiscardStaged();  // nothing staged: harmless
}

TEST_F(NodeKeyStoreTest, InstallArchivesTheOldKeyAndMakesTheNewOneCurrent) {
  auto old_key = store_.LoadOrCreate();
  ASSERT_TRUE(old_key);
  const uint64_t old_fp = store_.Fingerprint();
  auto new_key = identity::NodeKey::Generate();
  ASSERT_TRUE(new_key);
  ASSERT_TRUE(store_.Stage(*new_key));

  const Clock::WallTime now{std::chrono::seconds(1'700'000'123)};
  auto archive = store_.Install(*new_key, now);
  ASSERT_TRUE(archive) << archive.error().ToString();
  EXPECT_EQ(*archive, data_ + "/keys/archive/node.ed25519.1700000123");
  EXPECT_EQ(ModeOf(*archive), 0600);
  EXPECT_EQ(ModeOf(store_.ArchiveDir()), 0700);
  auto archived = identity::NodeKey::Load(*archive);
  ASSERT_TRUE(archived) << archived.error().ToString();
  EXPECT_EQ(archived->public_key(), old_key->public_key());

  EXPECT_EQ(store_.Load().value().public_key(), new_key->public_key());
  EXPECT_EQ(ModeOf(store_.KeyPath()), 0600);
  EXPECT_FALSE(std::filesystem::exists(store_.StagedPath()));
  EXPECT_NE(store_.Fingerprint(), old_fp);
  EXPECT_NE(store_.Fingerprint(), 0u);

  // A second rotation in the same second does not overwrite the first archive.
  auto third = identity::NodeKey::Generate();
  ASSERT_TRUE(third);
  auto archive2 = store_.Install(*third, now);
  ASSERT_TRUE(archive2) << archive2.error().ToString();
  EXPECT_EQ(*archive2, data_ + "/keys/archive/node.ed25519.1700000123-1");
  EXPECT_EQ(identity::NodeKey::Load(*archive).value().public_key(), old_key->public_key());
  EXPECT_EQ(identity::NodeKey::Load(*archive2).value().public_key(), new_key->public_key());
  EXPECT_EQ(store_.Load().value().public_key(), third->public_key());
}

TEST_F(NodeKeyStoreTest, InstallWithoutACurrentKeyFailsAndWritesNothing) {
  auto new_key = identity::NodeKey::Generate();
  ASSERT_TRUE(new_key);
  auto archive = store_.Install(*new_key, Clock::WallTime{std::chrono::seconds(1)});
  ASSERT_FALSE(archive);
  EXPECT_EQ(archive.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(store_.KeyPath()));
}

// Issue 15: archived keys were kept forever. Only the newest kArchivedKeysKept stay (0600),
// ordered by the time in the name and then by the -N suffix; other files are left alone.
TEST_F(NodeKeyStoreTest, ArchiveKeepsOnlyTheNewestKeys) {
  ASSERT_EQ(NodeKeyStore::kArchivedKeysKept, 3u);
  ASSERT_TRUE(store_.LoadOrCreate());
  std::vector<std::string> public_keys;  // of the key each Install archives, in order
  std::vector<std::string> archives;
  // Seconds out of lexical order (9 < 10 < 100) and two in the same second (-1).
  for (int64_t secs : {9, 10, 10, 100, 1000}) {
    public_keys.push_back(store_.Load().value().public_key());
    auto next = identity::NodeKey::Generate();
    ASSERT_TRUE(next);
    std::string prune_error = "unset";
    auto archive = store_.Install(*next, Clock::WallTime{std::chrono::seconds(secs)}, &prune_error);
    ASSERT_TRUE(archive) << archive.error().ToString();
    EXPECT_EQ(prune_error, "");
    archives.push_back(*archive);
    EXPECT_EQ(store_.Load().value().public_key(), next->public_key());
  }
  const std::string a = data_ + "/keys/archive/";
  EXPECT_EQ(archives, (std::vector<std::string>{a + "node.ed25519.9", a + "node.ed25519.10",
                                                a + "node.ed25519.10-1", a + "node.ed25519.100",
                                                a + "node.ed25519.1000"}));
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(store_.ArchiveDir()))
    left.insert(e.path());
  EXPECT_EQ(left, (std::set<std::string>{archives[2], archives[3], archives[4]}));
  for (size_t i = 2; i < archives.size(); ++i) {
    EXPECT_EQ(ModeOf(archives[i]), 0600) << archives[i];
    EXPECT_EQ(identity::NodeKey::Load(archives[i]).value().public_key(), public_keys[i]);
  }
}

TEST_F(NodeKeyStoreTest, PruneLeavesOtherFilesAndTightensModes) {
  const std::string a = data_ + "/keys/archive/";
  for (const char* name : {"node.ed25519.1", "node.ed25519.2", "node.ed25519.3", "node.ed25519.4",
                           "README", "node.ed25519.x", "node.ed25519.5-"}) {
    Spit(a + name, "k", 0644);
  }
  auto pruned = store_.PruneArchive();
  ASSERT_TRUE(pruned) << pruned.error().ToString();
  EXPECT_EQ(*pruned, 1u);
  EXPECT_FALSE(std::filesystem::exists(a + "node.ed25519.1"));
  for (const char* kept : {"node.ed25519.2", "node.ed25519.3", "node.ed25519.4"})
    EXPECT_EQ(ModeOf(a + kept), 0600) << kept;
  for (const char* other : {"README", "node.ed25519.x", "node.ed25519.5-"})
    EXPECT_EQ(ModeOf(a + other), 0644) << other;  // not an archived key: untouched
  // Nothing to prune: no archive directory, or few enough keys.
  EXPECT_EQ(store_.PruneArchive().value(), 0u);
  EXPECT_EQ(NodeKeyStore(data_ + "-none").PruneArchive().value(), 0u);
}

// The rotation has happened once the new key is written: a failed prune is reported beside
// the result, not as a failed Install. (A directory in the way cannot be unlinked, also by
// root.)
TEST_F(NodeKeyStoreTest, FailedPruneDoesNotFailTheInstall) {
  ASSERT_TRUE(store_.LoadOrCreate());
  const std::string a = data_ + "/keys/archive/";
  std::filesystem::create_directories(a + "node.ed25519.1/in-the-way");
  for (const char* name : {"node.ed25519.2", "node.ed25519.3", "node.ed25519.4"})
    Spit(a + name, "k", 0600);
  auto next = identity::NodeKey::Generate();
  ASSERT_TRUE(next);
  std::string prune_error;
  auto archive = store_.Install(*next, Clock::WallTime{std::chrono::seconds(50)}, &prune_error);
  ASSERT_TRUE(archive) << archive.error().ToString();
  EXPECT_EQ(store_.Load().value().public_key(), next->public_key());
  EXPECT_NE(prune_error.find(a + "node.ed25519.1"), std::string::npos) << prune_error;
  EXPECT_NE(prune_error.find("cannot delete"), std::string::npos) << prune_error;
  // The other old key was still deleted; the newest three stay.
  EXPECT_FALSE(std::filesystem::exists(a + "node.ed25519.2"));
  EXPECT_TRUE(std::filesystem::exists(a + "node.ed25519.3"));
  EXPECT_TRUE(std::filesystem::exists(*archive));
  auto direct = store_.PruneArchive();
  ASSERT_FALSE(direct);
  EXPECT_EQ(direct.error().code, ErrorCode::kInternal);
}

}  // namespace
}  // namespace edge::agentedge::testing
