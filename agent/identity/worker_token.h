// Signed worker tokens (wire.md §4.1, the worker contract):
//   stacyvm-worker-v1.<b64url(JSON claims)>.<b64url(HMAC-SHA256(key, "stacyvm-worker-v1." +
//   payload))>
// issued by the control plane (and `edge-agent token issue`) and verified by the worker RPC
// server and `token verify`. Keys are raw shared secrets owned by the caller; several may be
// given for verification during a key rotation. Never log a token or a key.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/error.h"

namespace edge::identity {

inline constexpr std::string_view kWorkerTokenPrefix = "stacyvm-worker-v1.";
inline constexpr std::string_view kWorkerRpcAudience = "worker:rpc";
inline constexpr std::string_view kWorkerControlPlaneAudience = "worker:control-plane";

// The claims; times are Unix seconds.
struct WorkerTokenClaims {
  std::string worker_id;
  std::string jti;
  std::string aud;  // empty = no audience claim
  std::vector<std::string> scopes;
  int64_t exp = 0;
  std::optional<int64_t> iat;
  std::optional<int64_t> nbf;

  nlohmann::json ToJson() const;
  // INVALID_ARGUMENT naming the field with the wrong type or the missing `exp`.
  static Result<WorkerTokenClaims> FromJson(const nlohmann::json& j);
};

struct WorkerTokenVerifyOptions {
  // The verifier's own worker id; the token's worker_id must equal it. Required.
  std::string worker_id;
  // Expected audience; a token carrying a different `aud` is refused, a token without `aud`
  // passes. Empty = not checked.
  std::string audience;
  // The active signing key and any rotation keys; a token verifying under any one passes.
  std::vector<std::string> keys;
  // Revoked token ids (`auth.worker_revoked_token_ids`).
  std::set<std::string, std::less<>> revoked_jtis;
  std::chrono::seconds skew{30};
  std::chrono::seconds max_lifetime{15 * 60};
};

class WorkerToken {
 public:
  // Claims for a new token: a fresh UUID jti, iat = now, exp = now + ttl.
  static WorkerTokenClaims NewClaims(std::string worker_id, std::chrono::seconds ttl,
                                     Clock::WallTime now, std::string audience = {},
                                     std::vector<std::string> scopes = {});
  // Signs `claims` with `key`. INVALID_ARGUMENT for an empty key or a blank worker_id.
  static Result<std::string> Issue(const WorkerTokenClaims& claims, std::string_view key);
  // Decodes the claims without checking anything else (`token inspect`: the result is NOT
  // authenticated). INVALID_ARGUMENT naming the malformed part.
  static Result<WorkerTokenClaims> DecodeUnverified(std::string_view token);
  // Full verification, in this order: shape, MAC under one of the keys (constant-time),
  // claims JSON, worker_id non-blank and equal to ours, now < exp, nbf and iat at most
  // `skew` in the future, exp - iat <= max_lifetime when iat is present, audience, jti not
  // revoked. Every failure is UNAUTHENTICATED with its own message; no configured key is
  // FAILED_PRECONDITION.
  static Result<WorkerTokenClaims> Verify(std::string_view token,
                                          const WorkerTokenVerifyOptions& options,
                                          Clock::WallTime now);
};

}  // namespace edge::identity
