// What `edge-agent config check --production` refuses, and what the daemon warns about at
// start: settings that are fine on a developer's machine but unsafe on a fleet host.
// Stateless; the findings name the config key and say what to do.
#pragma once

#include <string>
#include <vector>

#include "config/agent_config.h"

namespace edge::config {

struct ProductionFinding {
  std::string key;      // the config key concerned ("security_contexts", ...)
  std::string message;  // what is unsafe and what to configure instead
};

// Empty when the config is fit for production.
std::vector<ProductionFinding> ProductionFindings(const AgentConfig& config);

}  // namespace edge::config
