#include "config/production_check.h"

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
  return out;
}

}  // namespace edge::config
