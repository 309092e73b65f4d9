#include "agent/worker_rpc/token_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "agent/identity/worker_token.h"
#include "agent/worker_rpc/rpc_envelope.h"
#include "common/atomic_file.h"
#include "common/clock.h"
#include "config/agent_config.h"
#include "config/duration.h"

namespace edge::workerrpc {
namespace {

using cli::kExitFailure;
using cli::kExitOk;
using cli::kExitUsage;
using nlohmann::json;

constexpr std::chrono::seconds kMaxLifetime{15 * 60};

struct TokenArgs {
  std::string worker_id;
  std::string token;
  std::string ttl = "5m";
  std::string audience;
  std::vector<std::string> scopes;
  std::string format = "text";
  std::string key_file;
  std::string new_key_ref = "/run/secrets/edge-worker-signing-key-new";
  std::string previous_key_ref = "/run/secrets/edge-worker-signing-key-old";
};

std::optional<std::string> ReadKeyFile(const std::string& path) {
  auto content = ReadFile(path, 1 << 20);
  if (!content) {
    std::fprintf(stderr, "error: --signing-key-file %s: %s\n", path.c_str(),
                 content.error().message.c_str());
    return std::nullopt;
  }
  std::string s = std::move(*content);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  if (s.empty()) {
    std::fprintf(stderr, "error: --signing-key-file %s is empty\n", path.c_str());
    return std::nullopt;
  }
  return s;
}

// The keys and revocations to use: --signing-key-file alone, else the config's worker.auth.
struct KeyMaterial {
  std::vector<std::string> keys;  // active first
  std::set<std::string, std::less<>> revoked;
  std::string own_worker_id;
};

std::optional<KeyMaterial> LoadKeys(const cli::GlobalOptions& opts, const TokenArgs& a) {
  KeyMaterial m;
  if (!a.key_file.empty()) {
    auto k = ReadKeyFile(a.key_file);
    if (!k) return std::nullopt;
    m.keys.push_back(*k);
    return m;
  }
  auto cfg = cli::LoadConfigOrReport(opts, config::LoadAgentConfig);
  if (!cfg) return std::nullopt;
  const auto& auth = cfg->worker.auth;
  if (!auth.worker_signing_key.empty()) m.keys.push_back(auth.worker_signing_key);
  for (const auto& k : auth.worker_signing_keys)
    m.keys.push_back(k);
  m.revoked.insert(auth.worker_revoked_token_ids.begin(), auth.worker_revoked_token_ids.end());
  m.own_worker_id = cfg->worker.worker_id;
  if (m.keys.empty()) {
    std::fprintf(stderr,
                 "error: no signing key: pass --signing-key-file or set "
                 "worker.auth.worker_signing_key(_file) in %s\n",
                 opts.config_path.c_str());
    return std::nullopt;
  }
  return m;
}

std::string Iso(int64_t unix_seconds) {
  return FormatRfc3339(Clock::WallTime(std::chrono::seconds(unix_seconds)));
}

json ClaimsJson(const identity::WorkerTokenClaims& c) {
  json j = c.ToJson();
  j["expires_at"] = Iso(c.exp);
  if (c.iat) j["issued_at"] = Iso(*c.iat);
  if (c.nbf) j["not_before"] = Iso(*c.nbf);
  return j;
}

int Issue(const cli::GlobalOptions& opts, const TokenArgs& a) {
  auto ttl = config::ParseDuration(a.ttl);
  if (!ttl || ttl->count() < 1000) {
    std::fprintf(stderr, "error: --ttl %s: must be a duration of at least 1s, such as 5m\n",
                 a.ttl.c_str());
    return kExitUsage;
  }
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
  if (secs > kMaxLifetime) {
    std::fprintf(stderr,
                 "error: --ttl %s: worker tokens live at most 15m (verifiers refuse longer "
                 "ones)\n",
                 a.ttl.c_str());
    return kExitUsage;
  }
  auto keys = LoadKeys(opts, a);
  if (!keys) return kExitUsage;
  auto claims = identity::WorkerToken::NewClaims(a.worker_id, secs, SystemClock::Instance().Now(),
                                                 a.audience, a.scopes);
  auto token = identity::WorkerToken::Issue(claims, keys->keys.front());
  if (!token) {
    std::fprintf(stderr, "error: %s\n", token.error().message.c_str());
    return kExitUsage;
  }
  if (a.format == "json") {
    json j = ClaimsJson(claims);
    j["token"] = *token;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << *token << "\n";
  }
  return kExitOk;
}

int Inspect(const TokenArgs& a) {
  auto claims = identity::WorkerToken::DecodeUnverified(a.token);
  if (!claims) {
    std::fprintf(stderr, "error: %s\n", claims.error().message.c_str());
    return kExitFailure;
  }
  json j = ClaimsJson(*claims);
  if (a.format == "json") {
    j["verified"] = false;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "UNVERIFIED: the signature was not checked; do not treat these claims as an "
                 "authenticated identity (use `token verify`).\n"
              << j.dump(2) << "\n";
  }
  return kExitOk;
}

int Verify(const cli::GlobalOptions& opts, const TokenArgs& a) {
  auto keys = LoadKeys(opts, a);
  if (!keys) return kExitUsage;
  identity::WorkerTokenVerifyOptions o;
  o.worker_id = a.worker_id.empty() ? keys->own_worker_id : a.worker_id;
  if (o.worker_id.empty()) {
    std::fprintf(stderr, "error: pass --worker-id (no config names this worker)\n");
    return kExitUsage;
  }
  o.audience = a.audience;
  o.keys = keys->keys;
  o.revoked_jtis = keys->revoked;
  auto claims = identity::WorkerToken::Verify(a.token, o, SystemClock::Instance().Now());
  if (!claims) {
    std::fprintf(stderr, "invalid: %s\n", claims.error().message.c_str());
    return kExitFailure;
  }
  if (a.format == "json") {
    json j = ClaimsJson(*claims);
    j["verified"] = true;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "valid: worker_id=" << claims->worker_id << " jti=" << claims->jti
              << " aud=" << (claims->aud.empty() ? "(none)" : claims->aud)
              << " expires_at=" << Iso(claims->exp) << "\n";
  }
  return kExitOk;
}

int RotationPlan(const TokenArgs& a) {
  const std::string ttl = a.ttl;
  std::cout
      << "Worker signing-key rotation (two keys; no secret is shown here)\n"
      << "\n"
      << "1. Put the new key in a secret file: " << a.new_key_ref << "\n"
      << "2. On every verifier and issuer (control plane and workers), set\n"
      << "     worker.auth.worker_signing_key_file: " << a.new_key_ref << "\n"
      << "   and move the previous key into the rotation list:\n"
      << "     worker.auth.worker_signing_keys: [<contents of " << a.previous_key_ref << ">]\n"
      << "3. Restart or reload the workers and the control plane so they mint with the new key\n"
      << "   (tokens signed with either key verify during the window).\n"
      << "4. Wait until every token signed with the old key has expired: at least the token\n"
      << "   TTL (" << ttl << ") plus 30 s of clock skew; never more than 15m30s.\n"
      << "5. Remove the old key from worker.auth.worker_signing_keys and reload again.\n"
      << "\n"
      << "Config sketch:\n"
      << "  worker:\n"
      << "    auth:\n"
      << "      worker_signing_key_file: " << a.new_key_ref << "\n"
      << "      worker_signing_keys: [\"<previous key, until step 5>\"]\n"
      << "\n"
      << "Checks:\n"
      << "  edge-agent token issue <worker-id> --ttl " << ttl << " --signing-key-file "
      << a.new_key_ref << " > /tmp/t\n"
      << "  edge-agent token verify \"$(cat /tmp/t)\" --worker-id <worker-id> --audience "
         "worker:rpc\n"
      << "  edge-agent config check --production   # warns if the active key is repeated in "
         "worker_signing_keys\n"
      << "If a token leaks: `edge-agent token inspect <token>` gives its jti; add it to\n"
      << "worker.auth.worker_revoked_token_ids.\n";
  return kExitOk;
}

}  // namespace

cli::CommandRunner AddTokenCommands(CLI::App& app, const cli::GlobalOptions& opts) {
  auto args = std::make_shared<TokenArgs>();
  auto* token = app.add_subcommand("token", "signed worker tokens (stacyvm-worker-v1.…)");
  token->require_subcommand(1);
  auto* issue = token->add_subcommand(
      "issue", "issue a signed worker token (key: --signing-key-file or worker.auth)");
  issue->add_option("worker-id", args->worker_id, "the worker the token is for")->required();
  issue->add_option("--ttl", args->ttl, "lifetime, at most 15m")->capture_default_str();
  issue->add_option("--audience", args->audience, "aud claim: worker:rpc or worker:control-plane");
  issue->add_option("--scopes", args->scopes, "worker scopes (worker:exec, …)")->delimiter(',');
  issue->add_option("--signing-key-file", args->key_file, "file holding the signing key");
  cli::AddFormatOption(issue, args->format);
  auto* inspect =
      token->add_subcommand("inspect", "decode a token's claims WITHOUT verifying them");
  inspect->add_option("token", args->token, "the token")->required();
  cli::AddFormatOption(inspect, args->format);
  auto* verify = token->add_subcommand(
      "verify", "verify a token (exit 0 valid, 1 refused; the message names the rule)");
  verify->add_option("token", args->token, "the token")->required();
  verify->add_option("--worker-id", args->worker_id,
                     "expected worker id (default: worker.worker_id)");
  verify->add_option("--audience", args->audience, "expected audience");
  verify->add_option("--signing-key-file", args->key_file,
                     "file holding the key (default: worker.auth's keys and revocations)");
  cli::AddFormatOption(verify, args->format);
  auto* plan =
      token->add_subcommand("rotation-plan", "print a no-secret checklist for a key rotation");
  plan->add_option("--new-key-ref", args->new_key_ref, "where the new key lives");
  plan->add_option("--previous-key-ref", args->previous_key_ref, "where the previous key lives");
  plan->add_option("--ttl", args->ttl, "the token TTL in use")->capture_default_str();
  return [=, &opts]() -> std::optional<int> {
    if (*issue) return Issue(opts, *args);
    if (*inspect) return Inspect(*args);
    if (*verify) return Verify(opts, *args);
    if (*plan) return RotationPlan(*args);
    return std::nullopt;
  };
}

}  // namespace edge::workerrpc
