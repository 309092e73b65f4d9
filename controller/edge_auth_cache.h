// What one ConnectEdge stream has already verified about its node, so the next envelope need
// not repeat it (issue 14: re-reading the node from SQLite and re-verifying its ES256 token on
// every message was most of the controller's cost per streamed chunk). It remembers the node's
// registered keys and the last node security token that passed NodeTokenAuthority::Verify,
// each stamped with the Store's AuthGeneration at the time, and hands them back only while:
//   - the Store's AuthGeneration is the same (no enrollment, rotation, revocation or pruning
//     has committed since: those raise it), and is tracked at all (nullopt = never reuse);
//   - for the token: the same bytes (constant-time compare), a use no wider than the one it
//     was verified for (a kNewSession pass also holds for kOpenStream, not the reverse), and
//     the clock inside [when it was verified, accepted_until) — its exp, or the end of the
//     overlap window when it was accepted only inside one.
// Every envelope's own signature, node id, stream id and timestamp are still checked on every
// message (wire.md §2.4); only the work whose answer cannot have changed is skipped.
// Owned by one EdgeStream and used from its reactor callbacks, one at a time: not
// thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "controller/node_tokens.h"
#include "controller/store.h"

namespace edge::controller {

class EdgeAuthCache {
 public:
  // The node's keys (public_key, prev_public_key, prev_key_until_ms; nothing else is kept)
  // as read under `generation`, or nullptr when they must be read again.
  const EdgeNodeRecord* Keys(std::optional<uint64_t> generation) const;
  // Remembers the key fields of `node`, read after `generation` was taken; returns them.
  const EdgeNodeRecord& RememberKeys(std::optional<uint64_t> generation,
                                     const EdgeNodeRecord& node);

  // True when `token` presented for `use` at `now_ms` passed Verify under `generation`.
  bool TokenStillValid(std::optional<uint64_t> generation, std::string_view token, TokenUse use,
                       int64_t now_ms) const;
  // Remembers that `token` passed Verify for `use` at `now_ms` (generation taken before).
  void RememberToken(std::optional<uint64_t> generation, std::string_view token, TokenUse use,
                     int64_t now_ms, const NodeTokenClaims& claims);

 private:
  std::optional<uint64_t> keys_generation_;
  EdgeNodeRecord keys_;

  std::optional<uint64_t> token_generation_;
  std::string token_;
  TokenUse token_use_ = TokenUse::kNewSession;
  int64_t token_from_ms_ = 0;
  int64_t token_until_ms_ = 0;
};

}  // namespace edge::controller
