// The controller's persistent state behind one interface (design.md §1): join tokens and
// nodes now; keys, commands and leases as later contracts need them. SqliteStore is the
// embedded default; the SQL is kept portable (explicit transactions, conditional UPDATEs for
// single-winner transitions) so a PostgreSQL backend can implement the same interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace edge::controller {

struct JoinTokenRecord {
  std::string token_id;
  std::string token_hash;  // hex SHA-256 of the token bytes; the token itself is never stored
  std::string node_id;     // bound node, empty = any
  std::string tenant_id;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  int64_t consumed_at_ms = 0;  // 0 = not consumed
  int64_t revoked_at_ms = 0;   // 0 = not revoked
  std::string consumed_by;     // node id that redeemed it
};

struct NodeRecord {
  std::string node_id;
  std::string tenant_id;
  std::string state;            // "enrolled", "healthy", "unhealthy", "draining", "revoked"
  std::string cert_serial_hex;  // serial of the node certificate minted at enrollment
  int64_t enrolled_at_ms = 0;
  int64_t last_seen_ms = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual Status InsertJoinToken(const JoinTokenRecord& rec) = 0;
  virtual Result<std::optional<JoinTokenRecord>> FindJoinTokenByHash(const std::string& hash) = 0;
  // The single-use transition: marks the token consumed by `node_id` at `now_ms` if, and only
  // if, it exists, is not consumed, not revoked, not expired and not bound to another node.
  // Exactly one of any number of concurrent callers wins. Errors, as the contract's table:
  // NOT_FOUND unknown; FAILED_PRECONDITION expired/revoked/consumed; PERMISSION_DENIED bound
  // to another node.
  virtual Result<JoinTokenRecord> ConsumeJoinToken(const std::string& hash,
                                                   const std::string& node_id, int64_t now_ms) = 0;
  // Gives a consumed token back (used when enrollment fails after consuming, e.g. minting).
  virtual Status UnconsumeJoinToken(const std::string& hash) = 0;
  virtual Status RevokeJoinToken(const std::string& token_id, int64_t now_ms) = 0;
  virtual Result<std::vector<JoinTokenRecord>> ListJoinTokens(bool include_inactive,
                                                              int64_t now_ms) = 0;

  virtual Status UpsertNode(const NodeRecord& node) = 0;
  virtual Result<std::optional<NodeRecord>> GetNode(const std::string& node_id) = 0;
  virtual Result<std::vector<NodeRecord>> ListNodes() = 0;
};

}  // namespace edge::controller
