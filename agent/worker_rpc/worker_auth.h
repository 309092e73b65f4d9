// WorkerAuthenticator: who may call this worker's /rpc (wire.md §4.1, the worker contract).
//
// Headers: X-Worker-ID (must be this worker's id) and X-Worker-Token or
// `Authorization: Bearer <token>`. Accepted credentials, in this order:
//   - a signed token (`stacyvm-worker-v1.…`) when a signing key is configured: verified by
//     identity::WorkerToken::Verify with the active key and the rotation keys, audience
//     `worker:rpc`, 30 s skew for nbf/iat, the 15-minute lifetime cap and the revoked jtis;
//   - the per-worker token auth.worker_tokens.<this worker id>: when it exists, the shared
//     token is refused for this worker;
//   - the shared token auth.worker_token.
// Comparisons are constant-time; `*_file` secrets are read again when the file changes
// (inode, size or mtime); no message ever contains a token. A failure says which rule failed
// and carries its HTTP status (401; 403 is the envelope's worker_id, checked by the door).
#pragma once

#include <sys/types.h>

#include <set>
#include <vector>

#include <chrono>
#include <ctime>
#include <expected>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "config/agent_config.h"
#include "http/message.h"

namespace edge::workerrpc {

// A secret given inline or as a file; the file is read again when it changes.
class SecretSource {
 public:
  SecretSource() = default;
  SecretSource(std::string value, std::string file);
  // The current value ("" when none); a file that cannot be read keeps the last value.
  std::string Get() const;
  bool configured() const { return !value_.empty() || !file_.empty(); }
  bool from_file() const { return !file_.empty(); }

 private:
  std::string file_;
  mutable std::mutex mu_;
  mutable std::string value_;
  mutable ino_t ino_ = 0;
  mutable off_t size_ = -1;
  mutable timespec mtime_{};
};

struct AuthOk {
  std::string kind;  // "signed", "per-worker", "shared"
  std::string jti;   // signed tokens
};

struct AuthFailure {
  unsigned status = 401;
  std::string message;  // names the rule; never the token
};

class WorkerAuthenticator {
 public:
  WorkerAuthenticator(std::string worker_id, const config::WorkerAuth& auth, Clock& clock);

  // Checks the request's worker headers for `audience` (worker:rpc on the RPC server).
  std::expected<AuthOk, AuthFailure> Authenticate(const http::Request& request,
                                                  std::string_view audience) const;
  // Checks a token as presented by `worker_id` (the header value).
  std::expected<AuthOk, AuthFailure> Check(std::string_view worker_id, std::string_view token,
                                           std::string_view audience) const;

  // Whether any credential is configured (without one every call is refused).
  bool configured() const;
  const std::string& worker_id() const { return worker_id_; }

 private:
  std::string worker_id_;
  Clock& clock_;
  SecretSource shared_;
  SecretSource signing_key_;
  std::vector<std::string> rotation_keys_;
  std::optional<std::string> per_worker_;  // auth.worker_tokens.<own id>
  std::set<std::string, std::less<>> revoked_;
};

}  // namespace edge::workerrpc
