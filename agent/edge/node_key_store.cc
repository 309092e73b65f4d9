#include "agent/edge/node_key_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "common/atomic_file.h"

namespace edge::agentedge {

Result<identity::NodeKey> NodeKeyStore::Load() const {
  return identity::NodeKey::Load(KeyPath());
}

Result<identity::NodeKey> NodeKeyStore::LoadOrCreate(bool* created) const {
  if (created) *created = false;
  auto key = Load();
  if (key || key.error().code != ErrorCode::kNotFound) return key;
  if (auto st = MakeDirs(KeysDir(), 0700); !st) {
    return MakeError(st.error().code, "cannot create " + KeysDir() + ": " + st.error().message);
  }
  auto fresh = identity::NodeKey::Generate();
  if (!fresh) return fresh;
  if (auto st = fresh->Save(KeyPath()); !st) {
    return MakeError(st.error().code, "cannot write " + KeyPath() + ": " + st.error().message);
  }
  if (created) *created = true;
  return fresh;
}

Status NodeKeyStore::Stage(const identity::NodeKey& key) const {
  if (auto st = MakeDirs(KeysDir(), 0700); !st) return st;
  if (auto st = key.Save(StagedPath()); !st) {
    return MakeError(st.error().code, "cannot write " + StagedPath() + ": " + st.error().message);
  }
  return OkStatus();
}

void NodeKeyStore::DiscardStaged() const {
  ::unlink(StagedPath().c_str());
}

Result<std::string> NodeKeyStore::Install(const identity::NodeKey& key, Clock::WallTime now) const {
  auto old_key = Load();
  if (!old_key) return std::unexpected(old_key.error());
  if (auto st = MakeDirs(ArchiveDir(), 0700); !st) {
    return MakeError(st.error().code, "cannot create " + ArchiveDir() + ": " + st.error().message);
  }
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch());
  const std::string base = ArchiveDir() + "/node.ed25519." + std::to_string(secs.count());
  std::string archive = base;
  struct stat st {};
  for (int n = 1; ::lstat(archive.c_str(), &st) == 0; ++n)
    archive = base + "-" + std::to_string(n);
  // The old key is copied to the archive first, then the new one replaces it atomically:
  // at every instant keys/node.ed25519 holds a whole key.
  if (auto s = old_key->Save(archive); !s) {
    return MakeError(s.error().code,
                     "cannot archive the old key to " + archive + ": " + s.error().message);
  }
  if (auto s = key.Save(KeyPath()); !s) {
    ::unlink(archive.c_str());
    return MakeError(s.error().code, "cannot write " + KeyPath() + ": " + s.error().message);
  }
  DiscardStaged();
  return archive;
}

uint64_t NodeKeyStore::Fingerprint() const {
  struct stat st {};
  if (::stat(KeyPath().c_str(), &st) != 0) return 0;
  uint64_t h = std::hash<uint64_t>{}(static_cast<uint64_t>(st.st_dev));
  auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<uint64_t>(st.st_ino));
  mix(static_cast<uint64_t>(st.st_size));
  mix(static_cast<uint64_t>(st.st_mtim.tv_sec));
  mix(static_cast<uint64_t>(st.st_mtim.tv_nsec));
  return h == 0 ? 1 : h;
}

}  // namespace edge::agentedge
