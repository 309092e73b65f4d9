#include "agent/worker_rpc/worker_auth.h"

#include <strings.h>
#include <sys/stat.h>

#include "agent/identity/worker_token.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/secure_compare.h"

namespace edge::workerrpc {
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

SecretSource::SecretSource(std::string value, std::string file)
    : file_(std::move(file)), value_(std::move(value)) {
  if (!file_.empty()) {
    // The config read it already; remember the file's identity so a change is noticed.
    struct stat st {};
    if (::stat(file_.c_str(), &st) == 0) {
      ino_ = st.st_ino;
      size_ = st.st_size;
      mtime_ = st.st_mtim;
    }
  }
}

std::string SecretSource::Get() const {
  std::lock_guard lock(mu_);
  if (file_.empty()) return value_;
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) return value_;
  if (st.st_ino == ino_ && st.st_size == size_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
      st.st_mtim.tv_nsec == mtime_.tv_nsec && !value_.empty()) {
    return value_;
  }
  auto content = ReadFile(file_, 1 << 20);
  if (!content) {
    log::Get("worker_rpc")
        ->warn("cannot read secret file {}: {} (keeping the previous value)", file_,
               content.error().message);
    return value_;
  }
  std::string s = std::move(*content);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  if (s.empty()) {
    log::Get("worker_rpc")->warn("secret file {} is empty (keeping the previous value)", file_);
    return value_;
  }
  log::RegisterSecret(s);
  if (!value_.empty()) log::Get("worker_rpc")->info("secret file {} changed: reloaded", file_);
  value_ = std::move(s);
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_ = st.st_mtim;
  return value_;
}

WorkerAuthenticator::WorkerAuthenticator(std::string worker_id, const config::WorkerAuth& auth,
                                         Clock& clock)
    : worker_id_(std::move(worker_id)),
      clock_(clock),
      shared_(auth.worker_token, auth.worker_token_file),
      signing_key_(auth.worker_signing_key, auth.worker_signing_key_file),
      rotation_keys_(auth.worker_signing_keys),
      revoked_(auth.worker_revoked_token_ids.begin(), auth.worker_revoked_token_ids.end()) {
  if (auto it = auth.worker_tokens.find(worker_id_); it != auth.worker_tokens.end()) {
    per_worker_ = it->second;
  }
}

bool WorkerAuthenticator::configured() const {
  return shared_.configured() || signing_key_.configured() || !rotation_keys_.empty() ||
         per_worker_.has_value();
}

std::expected<AuthOk, AuthFailure> WorkerAuthenticator::Authenticate(
    const http::Request& request, std::string_view audience) const {
  auto id = request.Header("X-Worker-ID");
  if (!id || Trim(*id).empty()) return Refuse("missing X-Worker-ID header");
  std::string_view token;
  if (auto t = request.Header("X-Worker-Token"); t && !Trim(*t).empty()) {
    token = Trim(*t);
  } else if (auto a = request.Header("Authorization"); a) {
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
  if (worker_id != worker_id_) {
    return Refuse("X-Worker-ID \"" + log::Escape(worker_id, 64) + "\" is not this worker (\"" +
                  worker_id_ + "\")");
  }
  if (!configured()) {
    return Refuse("no worker credentials are configured on this worker (worker.auth)");
  }
  std::vector<std::string> keys;
  if (auto k = signing_key_.Get(); !k.empty()) keys.push_back(std::move(k));
  for (const auto& k : rotation_keys_) {
    if (!k.empty()) keys.push_back(k);
  }
  if (token.starts_with(identity::kWorkerTokenPrefix) && !keys.empty()) {
    identity::WorkerTokenVerifyOptions o;
    o.worker_id = worker_id_;
    o.audience = std::string(audience);
    o.keys = std::move(keys);
    o.revoked_jtis = revoked_;
    auto claims = identity::WorkerToken::Verify(token, o, clock_.Now());
    if (!claims) return Refuse(claims.error().message);
    return AuthOk{"signed", claims->jti};
  }
  if (per_worker_) {
    if (ConstantTimeEquals(token, *per_worker_)) return AuthOk{"per-worker", ""};
    // The shared token is not accepted for a worker that has its own.
    return Refuse("worker token does not match auth.worker_tokens." + worker_id_ +
                  " (a per-worker token is configured, so the shared token is refused)");
  }
  if (shared_.configured()) {
    if (ConstantTimeEquals(token, shared_.Get())) return AuthOk{"shared", ""};
    return Refuse(keys.empty() ? "worker token does not match auth.worker_token"
                               : "worker token does not match auth.worker_token and is not a "
                                 "signed token (stacyvm-worker-v1.…)");
  }
  if (token.starts_with(identity::kWorkerTokenPrefix)) {
    return Refuse("signed worker tokens are not accepted: no signing key is configured");
  }
  return Refuse("worker token is not a signed token (stacyvm-worker-v1.…)");
}

}  // namespace edge::workerrpc
