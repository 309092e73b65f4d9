// NodeKeyStore: the node's Ed25519 key on disk (design.md §5): data_dir/keys/node.ed25519
// (0600, keys/ 0700). Creates it at enrollment (or on the first run after enrollment when it
// is missing), stages a new key for `edge-agent rotate-key`, and installs it once the
// controller accepted the rotation: the old key moves to keys/archive/node.ed25519.<unix-time>
// (0600) and the new one replaces it atomically. A running daemon notices the change through
// Fingerprint() and re-attests with the new key. Owns nothing but paths; the files are the
// state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "agent/identity/node_key.h"
#include "common/clock.h"
#include "common/error.h"

namespace edge::agentedge {

class NodeKeyStore {
 public:
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
  // writes `key` to KeyPath() atomically and removes the staged file. Returns the archive path.
  Result<std::string> Install(const identity::NodeKey& key, Clock::WallTime now) const;

  // Identity of the key file's current version (device, inode, size, mtime); 0 when missing.
  // A change means the key was replaced on disk.
  uint64_t Fingerprint() const;

 private:
  std::string data_dir_;
};

}  // namespace edge::agentedge
