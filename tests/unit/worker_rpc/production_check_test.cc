// config check --production: the worker RPC findings (inline secrets, a shared token beside
// signed tokens, a signing key repeated in the rotation list, RPC in clear on the network,
// an unverified or clear-text control plane).
#include <gtest/gtest.h>

#include <algorithm>

#include "config/production_check.h"

namespace edge::config {
namespace {

std::vector<std::string> Keys(const AgentConfig& c) {
  std::vector<std::string> out;
  for (const auto& f : ProductionFindings(c)) {
    if (f.key.starts_with("worker")) out.push_back(f.key + ": " + f.message);
  }
  return out;
}

bool Has(const std::vector<std::string>& v, std::string_view fragment) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.find(fragment) != std::string::npos; });
}

TEST(WorkerProductionCheck, CleanWorkerConfigHasNoFinding) {
  AgentConfig c;
  c.worker.auth.worker_signing_key = "k-from-file-aaaaaaaa";
  c.worker.auth.worker_signing_key_file = "/run/secrets/key";
  c.worker.listen_addr = "127.0.0.1:7430";
  EXPECT_TRUE(Keys(c).empty());
  c.worker.listen_addr = "0.0.0.0:7430";
  c.worker.rpc_tls.enabled = true;
  c.worker.control_plane_url = "https://cp.example:8443";
  c.worker.control_plane_tls.ca_file = "/etc/edge-agent/cp-ca.pem";
  EXPECT_TRUE(Keys(c).empty());
  c.worker.control_plane_url = "http://127.0.0.1:8443";
  EXPECT_TRUE(Keys(c).empty());
}

TEST(WorkerProductionCheck, Findings) {
  AgentConfig c;
  c.worker.auth.worker_token = "inline-shared-token";
  c.worker.auth.worker_signing_key = "inline-key-bbbbbbbb";
  c.worker.auth.worker_signing_keys = {"inline-key-bbbbbbbb", "old-1", "old-1"};
  c.worker.auth.worker_tokens = {{"w", "t"}};
  c.worker.listen_addr = "0.0.0.0:7430";
  c.worker.control_plane_url = "http://cp.example:8080";
  c.worker.control_plane_tls.insecure_skip_verify = true;
  auto f = Keys(c);
  EXPECT_TRUE(Has(f,
                  "worker.control_plane_tls.insecure_skip_verify: the control plane's "
                  "certificate is not verified"));
  EXPECT_TRUE(Has(f,
                  "worker.control_plane_url: heartbeats and lease renewals go to "
                  "http://cp.example:8080 without TLS"));
  EXPECT_TRUE(Has(f, "worker.auth.worker_token: an inline secret")) << f.size();
  EXPECT_TRUE(Has(f, "worker.auth.worker_signing_key: an inline secret"));
  EXPECT_TRUE(Has(f, "worker.auth.worker_tokens"));
  EXPECT_TRUE(Has(f, "beside signed worker tokens"));
  EXPECT_TRUE(Has(f, "repeats the active signing key"));
  EXPECT_TRUE(Has(f, "same rotation key twice"));
  EXPECT_TRUE(Has(f, "without TLS"));
  for (const auto& s : f) {
    EXPECT_EQ(s.find("inline-key-bbbbbbbb"), std::string::npos) << "a secret in: " << s;
    EXPECT_EQ(s.find("inline-shared-token"), std::string::npos) << "a secret in: " << s;
  }
}

}  // namespace
}  // namespace edge::config
