// KeyRotation: `edge-agent rotate-key` — a new node key, RotateEdgeKey with the dual signature
// (old key proves authority, new key proves possession); on success the new key replaces
// keys/node.ed25519 and the old one moves to keys/archive/node.ed25519.<unix-time>. A running
// daemon picks the new key up at its next heartbeat (or reconnect) and re-attests with it.
//
// Order: keystore and controller address (not enrolled: error) → current key (missing: error)
// → attest with it (a token for the request's outer envelope) → stage the new key (if this
// process dies after the controller accepted it, the key survives) → RotateEdgeKey (refused:
// the staged key is removed) → install and archive. Blocking calls with NodeAttestor's
// deadlines; no waits of its own. Errors are one message naming the cause and the next step.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/error.h"
#include "config/agent_config.h"

namespace edge::agentedge {

struct RotatedKey {
  std::string public_key_hex;  // the new key's raw public key, hex
  std::string archive_path;    // where the old key went
};

class KeyRotation {
 public:
  // Borrows `cfg` (data_dir, node_id, controller address) and `clock`.
  KeyRotation(const config::AgentConfig& cfg, Clock& clock) : cfg_(cfg), clock_(clock) {}

  Result<RotatedKey> Run();

 private:
  const config::AgentConfig& cfg_;
  Clock& clock_;
};

}  // namespace edge::agentedge
