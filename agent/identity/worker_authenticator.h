// WorkerAuthenticator: who may call with worker credentials (wire.md §4.1, the worker
// contract), on both sides of the worker RPC contract:
//   - on a worker (the agent's /rpc door), for its own worker id only;
//   - on the control plane (the controller's /api/v1/worker/... endpoints), for any worker
//     id, the per-worker token looked up by the id the caller presents.
//
// Headers: X-Worker-ID and X-Worker-Token or `Authorization: Bearer <token>`. Accepted
// credentials, in this order:
//   - a signed token (`stacyvm-worker-v1.…`) when a signing key is configured: verified by
//     WorkerToken::Verify with the active key and the rotation keys, the expected audience,
//     30 s skew for nbf/iat, the 15-minute lifetime cap and the revoked jtis;
//   - the per-worker token auth.worker_tokens.<worker id>: when it exists, the shared token
//     is refused for that worker;
//   - the shared token auth.worker_token.
// Comparisons are constant-time; `*_file` secrets are read again when the file changes
// (SecretSource); no message ever contains a token. A failure says which rule failed and
// carries its HTTP status (401).
#pragma once

#include <chrono>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/identity/secret_source.h"
#include "common/clock.h"
#include "common/error.h"
#include "config/agent_config.h"

namespace edge::identity {

struct AuthOk {
  std::string worker_id;  // the authenticated id
  std::string kind;       // "signed", "per-worker", "shared"
  std::string jti;        // signed tokens
  // A signed token's `scopes` claim as given; empty (absent, or a token that is not signed)
  // means no restriction. The door decides what each scope allows.
  std::vector<std::string> scopes;
};

struct AuthFailure {
  unsigned status = 401;
  std::string message;  // names the rule; never the token
};

// Looks a request header up by name (case-insensitive), nullopt when absent.
using HeaderLookup = std::function<std::optional<std::string_view>(std::string_view name)>;

class WorkerAuthenticator {
 public:
  // On a worker: only `worker_id` is accepted.
  WorkerAuthenticator(std::string worker_id, const config::WorkerAuth& auth, Clock& clock);
  // On the control plane: any worker id.
  static WorkerAuthenticator ForControlPlane(const config::WorkerAuth& auth, Clock& clock);

  // Checks a request's worker headers for `audience`.
  std::expected<AuthOk, AuthFailure> Authenticate(const HeaderLookup& header,
                                                  std::string_view audience) const;
  // Checks a token as presented by `worker_id` (the header value).
  std::expected<AuthOk, AuthFailure> Check(std::string_view worker_id, std::string_view token,
                                           std::string_view audience) const;

  // Whether any credential is configured (without one every call is refused).
  bool configured() const;
  // The worker's own id ("" on the control plane).
  const std::string& worker_id() const { return worker_id_; }

 private:
  WorkerAuthenticator(std::string own_id, bool any_worker, const config::WorkerAuth& auth,
                      Clock& clock);

  std::string worker_id_;
  bool any_worker_ = false;
  Clock* clock_;
  SecretSource shared_;
  SecretSource signing_key_;
  std::vector<std::string> rotation_keys_;
  std::map<std::string, std::string, std::less<>> per_worker_;  // auth.worker_tokens
  std::set<std::string, std::less<>> revoked_;
};

// The credential a caller presents as a worker: a static token (auth.worker_tokens.<id>,
// else auth.worker_token(_file), the file re-read per call) or a token signed with
// auth.worker_signing_key(_file). The worker's calls to its control plane prefer a static
// token (the contract: derive a signed one only when none is given); the control plane's
// calls to a worker prefer a freshly signed, short-lived one.
class WorkerCredentials {
 public:
  enum class Prefer { kStatic, kSigned };
  WorkerCredentials(const config::WorkerAuth& auth, Clock& clock);

  // UNAUTHENTICATED naming the keys to set when no credential is configured.
  Result<std::string> TokenFor(std::string_view worker_id, std::string_view audience,
                               std::chrono::seconds ttl, Prefer prefer) const;
  bool can_sign() const { return signing_key_.configured(); }

 private:
  Clock* clock_;
  std::map<std::string, std::string, std::less<>> per_worker_;
  SecretSource shared_;
  SecretSource signing_key_;
};

}  // namespace edge::identity
