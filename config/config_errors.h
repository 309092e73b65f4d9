// Problems found while loading a config: every one names where (file:line:column, or the
// environment variable), the dotted key, the bad value and the rule it broke. A load
// collects all of them instead of stopping at the first.
#pragma once

#include <string>
#include <vector>

namespace edge::config {

struct ConfigIssue {
  std::string source;  // file name, "config delta", or "environment EDGE_AGENT_..."
  int line = 0;        // 1-based; 0 = no position
  int column = 0;
  std::string key;    // dotted path, e.g. "sandbox.max_sandboxes"
  std::string value;  // the offending value as written ("" when not applicable)
  std::string rule;   // what is wrong / what is expected
  // The value names something (a tool, a security context) that is not defined: a problem a
  // partial config (a PushConfig delta) may resolve against the node's own config.
  bool cross_reference = false;

  // "agent.yaml:7:5: sandbox.max_sandboxes: value \"-3\": must be an integer between 1 and 10000"
  std::string ToString() const;
};

struct ConfigErrors {
  std::vector<ConfigIssue> issues;
  // One issue per line.
  std::string ToString() const;
};

}  // namespace edge::config
