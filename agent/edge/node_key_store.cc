#include "agent/edge/node_key_store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

#include "common/atomic_file.h"

namespace edge::agentedge {
namespace {

// node.ed25519.<secs>[-N] → (secs, N); nullopt for any other name.
std::optional<std::pair<uint64_t, uint64_t>> ArchiveOrder(const std::string& name) {
  static const std::string kPrefix = "node.ed25519.";
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::string rest = name.substr(kPrefix.size());
  size_t dash = rest.find('-');
  std::string secs = rest.substr(0, dash);
  std::string n = dash == std::string::npos ? "0" : rest.substr(dash + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(secs) || !digits(n)) return std::nullopt;
  return std::make_pair(std::stoull(secs), std::stoull(n));
}

}  // namespace

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

Result<std::string> NodeKeyStore::Install(const identity::NodeKey& key, Clock::WallTime now,
                                          std::string* prune_error) const {
  if (prune_error) prune_error->clear();
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
  if (auto pruned = PruneArchive(); !pruned && prune_error) *prune_error = pruned.error().message;
  return archive;
}

Result<size_t> NodeKeyStore::PruneArchive() const {
  const std::string dir_path = ArchiveDir();
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return size_t{0};
    return MakeError(ErrorCode::kInternal,
                     "archived keys: cannot list " + dir_path + ": " + std::strerror(errno));
  }
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> keys;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (auto order = ArchiveOrder(name)) keys.emplace_back(order->first, order->second, name);
  }
  ::closedir(dir);
  std::sort(keys.begin(), keys.end());
  size_t drop = keys.size() > kArchivedKeysKept ? keys.size() - kArchivedKeysKept : 0;
  size_t deleted = 0;
  std::string first_error;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string path = dir_path + "/" + std::get<2>(keys[i]);
    if (i < drop) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        if (first_error.empty()) {
          first_error = "archived keys: cannot delete " + path + " (older than the newest " +
                        std::to_string(kArchivedKeysKept) + "): " + std::strerror(errno);
        }
      } else {
        ++deleted;
      }
      continue;
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) != 0600 &&
        ::chmod(path.c_str(), 0600) != 0 && first_error.empty()) {
      first_error = "archived keys: cannot chmod 0600 " + path + ": " + std::strerror(errno);
    }
  }
  // Every file was tried; the first failure is reported.
  if (!first_error.empty()) return MakeError(ErrorCode::kInternal, first_error);
  return deleted;
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
