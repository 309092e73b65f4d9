// NodeKeyStore: the node's Ed25519 key on disk (design.md §5): data_dir/keys/node.ed25519
// (0600, keys/ 0700). Creates it at enrollment (or on the first run after enrollment when it
// is missing), stages a new key for `edge-agent rotate-key`, and installs it once the
// controller accepted the rotation: the old key moves to keys/archive/node.ed25519.<unix-time>
// (0600) and the new one replaces it atomically. The archive keeps only the newest
// kArchivedKeysKept keys: older ones are unlinked once the new key is installed. A running
// daemon notices the change through
// Fingerprint() and re-attests with the new key. Owns nothing but paths; the files are the
// state.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/identity/node_key.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::agentedge {

class NodeKeyStore {
 public:
  // Archived keys kept in keys/archive after a rotation (the newest by the time in their
  // name, then the -N suffix); older ones are deleted.
  static constexpr size_t kArchivedKeysKept = 3;

  explicit NodeKeyStore(std::string data_dir) : data_dir_(std::move(data_dir)) {}

  std::string KeysDir() const { return data_dir_ + "/keys"; }
  std::string KeyPath() const { return KeysDir() + "/node.ed25519"; }
  std::string StagedPath() const { return KeysDir() + "/node.ed25519.new"; }
  std::string ArchiveDir() const { return KeysDir() + "/archive"; }

  // The key; NOT_FOUND when there is none, PERMISSION_DENIED when it is readable by others.
  Result<identity::NodeKey> Load() const;
  // The key, or a new one saved 0600 when the file is missing (`created` says which).
  Result<identity::NodeKey> LoadOrCreate(bool* created = nullptr) const;

  // Writes `key` to StagedPath() (0600), before the rotation is sent: if the agent dies after
  // the controller accepted it, the new key is still on disk.
  Status Stage(const identity::NodeKey& key) const;
  void DiscardStaged() const;
  // After a successful rotation: archives the current key as
  // keys/archive/node.ed25519.<unix seconds of `now`> (0600; a suffix -N when that exists),
  // writes `key` to KeyPath() atomically, removes the staged file, then PruneArchive().
  // Returns the archive path. The rotation has happened once the new key is written, so a
  // failed prune does not fail Install: its message goes to `prune_error` (when given; empty
  // when the prune succeeded) and the next Install prunes again.
  Result<std::string> Install(const identity::NodeKey& key, Clock::WallTime now,
                              std::string* prune_error = nullptr) const;

  // Deletes (unlink) all but the newest kArchivedKeysKept files node.ed25519.<secs>[-N] in
  // ArchiveDir() and makes the kept ones 0600; other names are left alone. Returns how many
  // were deleted; INTERNAL naming the file and errno when one cannot be listed, deleted or
  // chmod-ed. A missing archive directory is nothing to prune.
  Result<size_t> PruneArchive() const;

  // Identity of the key file's current version (device, inode, size, mtime); 0 when missing.
  // A change means the key was replaced on disk.
  uint64_t Fingerprint() const;

 private:
  std::string data_dir_;
};

}  // namespace edge::agentedge
