#include "config/production_check.h"

#include <set>

namespace edge::config {

std::vector<ProductionFinding> ProductionFindings(const AgentConfig& c) {
  std::vector<ProductionFinding> out;
  if (c.security_contexts.empty()) {
    out.push_back({"security_contexts",
                   "none configured: every tool, exec included, is allowed to every caller and "
                   "runs as the agent's own user (the implicit 'default' context); configure "
                   "contexts with allowed_tools and run_as"});
  }
  if (c.security.user_token_issuers.empty()) {
    out.push_back({"security.user_token_issuers",
                   "none configured: the user token inside each command is checked for shape "
                   "only, so anyone who can reach the controller's command path is believed; "
                   "configure the controller's public key (its data_dir/ca/token.pub.pem)"});
  }
  // Worker RPC credentials (wire.md §4.1; the worker contract's production lint).
  const auto& a = c.worker.auth;
  if (!a.worker_token.empty() && a.worker_token_file.empty()) {
    out.push_back({"worker.auth.worker_token",
                   "an inline secret in the config file: use worker.auth.worker_token_file "
                   "(a secret-mounted file, re-read when it changes)"});
  }
  if (!a.worker_signing_key.empty() && a.worker_signing_key_file.empty()) {
    out.push_back({"worker.auth.worker_signing_key",
                   "an inline secret in the config file: use "
                   "worker.auth.worker_signing_key_file (re-read when it changes)"});
  }
  if (!a.worker_tokens.empty()) {
    out.push_back({"worker.auth.worker_tokens",
                   "long-lived per-worker tokens inline in the config file: prefer signed, "
                   "short-lived tokens (worker.auth.worker_signing_key_file)"});
  }
  const bool signing = !a.worker_signing_key.empty() || !a.worker_signing_keys.empty();
  if (!a.worker_token.empty() && signing) {
    out.push_back({"worker.auth.worker_token",
                   "a shared worker token is configured beside signed worker tokens: anyone "
                   "holding it passes as any worker without a per-worker token; remove it once "
                   "every caller uses signed tokens"});
  }
  std::set<std::string> seen;
  for (const auto& k : a.worker_signing_keys) {
    if (!a.worker_signing_key.empty() && k == a.worker_signing_key) {
      out.push_back({"worker.auth.worker_signing_keys",
                     "repeats the active signing key (worker.auth.worker_signing_key): list only "
                     "previous keys, during a rotation window"});
    } else if (!seen.insert(k).second) {
      out.push_back({"worker.auth.worker_signing_keys", "lists the same rotation key twice"});
    }
  }
  const auto& w = c.worker;
  if (!w.listen_addr.empty() && !w.rpc_tls.enabled &&
      !(w.listen_addr.starts_with("127.") || w.listen_addr.starts_with("localhost:") ||
        w.listen_addr.starts_with("[::1]:"))) {
    out.push_back({"worker.rpc_tls",
                   "worker RPC listens on " + w.listen_addr +
                       " without TLS: tokens and commands cross the network in clear; enable "
                       "worker.rpc_tls with a client_ca_file (mTLS)"});
  }
  if (w.control_plane_tls.insecure_skip_verify) {
    out.push_back({"worker.control_plane_tls.insecure_skip_verify",
                   "the control plane's certificate is not verified: anyone on the path can "
                   "impersonate it and collect the worker's tokens; give its CA in "
                   "worker.control_plane_tls.ca_file"});
  }
  if (!w.control_plane_url.empty() && w.control_plane_url.starts_with("http://") &&
      !(w.control_plane_url.starts_with("http://127.") ||
        w.control_plane_url.starts_with("http://localhost") ||
        w.control_plane_url.starts_with("http://[::1]"))) {
    out.push_back({"worker.control_plane_url",
                   "heartbeats and lease renewals go to " + w.control_plane_url +
                       " without TLS: their tokens cross the network in clear; use https://"});
  }
  return out;
}

}  // namespace edge::config
