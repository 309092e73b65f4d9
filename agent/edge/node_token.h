// NodeToken: what the agent knows about its NodeSecurityToken (wire.md §2.3): the compact
// ES256 JWT the controller returns from ChallengeNode / RotateEdgeKey, with the claims read
// by an UNVERIFIED decode (the agent cannot and need not verify its own token; it reads
// `exp` to schedule renewal and `tid` to check the tenant of InvokeTool's inner envelope).
// Plain value; the token string is a secret (registered with the log scrubber by Parse).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"
#include "common/random.h"

namespace edge::agentedge {

struct NodeToken {
  std::string token;      // the compact JWT (secret: never logged)
  std::string node_id;    // sub
  std::string tenant_id;  // tid
  std::string jti;
  Clock::WallTime issued_at{};   // iat, or the receipt time when the token has none
  Clock::WallTime expires_at{};  // exp

  // Decodes `token` without verifying it. INVALID_ARGUMENT naming the claim when the token is
  // not a JWT, `sub` is not `expected_node_id`, `tid` or `exp` is missing or of the wrong type,
  // or it expires before it was issued. `received_at` stands in for a missing `iat`.
  static Result<NodeToken> Parse(std::string_view token, std::string_view expected_node_id,
                                 Clock::WallTime received_at);

  std::chrono::milliseconds Lifetime() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(expires_at - issued_at);
  }
  // True while `now` is more than `margin` before expiry.
  bool FreshAt(Clock::WallTime now, std::chrono::milliseconds margin) const {
    return now + margin < expires_at;
  }
  // True once `now` is past the latest moment RenewalDelay can pick (90 % of the lifetime):
  // a renewal due by the wall clock that the monotonic timer has not fired (the wall clock
  // jumped forward).
  bool OverdueAt(Clock::WallTime now) const { return now > issued_at + Lifetime() * 9 / 10; }
};

// When to renew a token of `lifetime`: uniformly jittered between 70 % and 90 % of it
// (so a fleet does not renew in lockstep), never less than 1 s.
std::chrono::milliseconds RenewalDelay(std::chrono::milliseconds lifetime, Random& random);

}  // namespace edge::agentedge
