#include "agent/identity/worker_authenticator.h"

#include <strings.h>

#include "agent/identity/worker_token.h"
#include "common/log.h"
#include "common/secure_compare.h"
#include "config/validate.h"

namespace edge::identity {
namespace {

std::unexpected<AuthFailure> Refuse(std::string message) {
  return std::unexpected(AuthFailure{401, std::move(message)});
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

WorkerAuthenticator::WorkerAuthenticator(std::string worker_id, const config::WorkerAuth& auth,
                                         Clock& clock)
    : WorkerAuthenticator(std::move(worker_id), false, auth, clock) {}

WorkerAuthenticator WorkerAuthenticator::ForControlPlane(const config::WorkerAuth& auth,
                                                         Clock& clock) {
  return WorkerAuthenticator("", true, auth, clock);
}

WorkerAuthenticator::WorkerAuthenticator(std::string own_id, bool any_worker,
                                         const config::WorkerAuth& auth, Clock& clock)
    : worker_id_(std::move(own_id)),
      any_worker_(any_worker),
      clock_(&clock),
      shared_(auth.worker_token, auth.worker_token_file),
      signing_key_(auth.worker_signing_key, auth.worker_signing_key_file),
      rotation_keys_(auth.worker_signing_keys),
      revoked_(auth.worker_revoked_token_ids.begin(), auth.worker_revoked_token_ids.end()) {
  for (const auto& [id, token] : auth.worker_tokens) {
    // On a worker only its own entry matters.
    if (any_worker_ || id == worker_id_) per_worker_.emplace(id, token);
  }
}

bool WorkerAuthenticator::configured() const {
  return shared_.configured() || signing_key_.configured() || !rotation_keys_.empty() ||
         !per_worker_.empty();
}

std::expected<AuthOk, AuthFailure> WorkerAuthenticator::Authenticate(
    const HeaderLookup& header, std::string_view audience) const {
  auto id = header("X-Worker-ID");
  if (!id || Trim(*id).empty()) return Refuse("missing X-Worker-ID header");
  std::string_view token;
  if (auto t = header("X-Worker-Token"); t && !Trim(*t).empty()) {
    token = Trim(*t);
  } else if (auto a = header("Authorization"); a) {
    std::string_view v = Trim(*a);
    if (v.size() < 7 || ::strncasecmp(v.data(), "Bearer ", 7) != 0) {
      return Refuse("Authorization header is not \"Bearer <token>\"");
    }
    token = Trim(v.substr(7));
  }
  if (token.empty()) {
    return Refuse("missing worker token (X-Worker-Token or Authorization: Bearer)");
  }
  return Check(Trim(*id), token, audience);
}

std::expected<AuthOk, AuthFailure> WorkerAuthenticator::Check(std::string_view worker_id,
                                                              std::string_view token,
                                                              std::string_view audience) const {
  const std::string where = any_worker_ ? "this control plane" : "this worker";
  if (any_worker_) {
    if (!config::IsValidNodeId(worker_id)) {
      return Refuse("X-Worker-ID \"" + log::Escape(worker_id, 64) +
                    "\" is not a worker id ([A-Za-z0-9._-]{1,64})");
    }
  } else if (worker_id != worker_id_) {
    return Refuse("X-Worker-ID \"" + log::Escape(worker_id, 64) + "\" is not this worker (\"" +
                  worker_id_ + "\")");
  }
  const std::string id(worker_id);
  if (!configured()) {
    return Refuse("no worker credentials are configured on " + where + " (worker.auth)");
  }
  std::vector<std::string> keys;
  if (auto k = signing_key_.Get(); !k.empty()) keys.push_back(std::move(k));
  for (const auto& k : rotation_keys_) {
    if (!k.empty()) keys.push_back(k);
  }
  if (token.starts_with(kWorkerTokenPrefix) && !keys.empty()) {
    WorkerTokenVerifyOptions o;
    o.worker_id = id;
    o.audience = std::string(audience);
    o.keys = std::move(keys);
    o.revoked_jtis = revoked_;
    auto claims = WorkerToken::Verify(token, o, clock_->Now());
    if (!claims) return Refuse(claims.error().message);
    return AuthOk{id, "signed", claims->jti, std::move(claims->scopes)};
  }
  if (auto it = per_worker_.find(worker_id); it != per_worker_.end()) {
    if (ConstantTimeEquals(token, it->second)) return AuthOk{id, "per-worker", ""};
    // The shared token is not accepted for a worker that has its own.
    return Refuse("worker token does not match auth.worker_tokens." + id +
                  " (a per-worker token is configured, so the shared token is refused)");
  }
  if (shared_.configured()) {
    if (ConstantTimeEquals(token, shared_.Get())) return AuthOk{id, "shared", ""};
    return Refuse(keys.empty() ? "worker token does not match auth.worker_token"
                               : "worker token does not match auth.worker_token and is not a "
                                 "signed token (stacyvm-worker-v1.…)");
  }
  if (token.starts_with(kWorkerTokenPrefix)) {
    return Refuse("signed worker tokens are not accepted: no signing key is configured");
  }
  return Refuse("worker token is not a signed token (stacyvm-worker-v1.…)");
}

WorkerCredentials::WorkerCredentials(const config::WorkerAuth& auth, Clock& clock)
    : clock_(&clock),
      per_worker_(auth.worker_tokens.begin(), auth.worker_tokens.end()),
      shared_(auth.worker_token, auth.worker_token_file),
      signing_key_(auth.worker_signing_key, auth.worker_signing_key_file) {}

Result<std::string> WorkerCredentials::TokenFor(std::string_view worker_id,
                                                std::string_view audience, std::chrono::seconds ttl,
                                                Prefer prefer) const {
  auto sign = [&]() -> Result<std::string> {
    auto claims =
        WorkerToken::NewClaims(std::string(worker_id), ttl, clock_->Now(), std::string(audience));
    return WorkerToken::Issue(claims, signing_key_.Get());
  };
  if (prefer == Prefer::kSigned && signing_key_.configured()) return sign();
  if (auto it = per_worker_.find(worker_id); it != per_worker_.end()) return it->second;
  if (shared_.configured()) return shared_.Get();
  if (signing_key_.configured()) return sign();
  return MakeError(ErrorCode::kUnauthenticated,
                   "no worker credential for worker \"" + std::string(worker_id) +
                       "\": set worker.auth.worker_signing_key(_file), "
                       "worker.auth.worker_tokens.<id> or worker.auth.worker_token(_file)");
}

}  // namespace edge::identity
