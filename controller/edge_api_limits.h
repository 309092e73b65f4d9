// EdgeApiLimits: the per-node `edge_api.limits` of the operator API (wire.md §5.2) with their
// §5.2 defaults, and NodeLimits: the limits in force for one node with their config_version.
// The controller's edge_api.limits apply to every node (version 0) until a PushConfig with
// `edge_api.limits` gives a node its own; the version then rises by 1 with each push that
// changes them, and is stored with the node (it survives a restart). A session pins the
// limits (and their version) it was created with. Plain data and conversions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/controller_config.h"

namespace edge::controller {

struct EdgeApiLimits {
  int64_t rate_limit = 20;                             // control frames per second per session
  int64_t max_frame_size = 1 << 20;                    // bytes
  int64_t reattach_window = 300;                       // seconds
  int64_t max_buffer_size = 4 << 20;                   // bytes
  std::string buffer_overflow_policy = "drop_oldest";  // or "disconnect"

  bool operator==(const EdgeApiLimits&) const = default;
};

struct NodeLimits {
  EdgeApiLimits limits;
  int64_t version = 0;          // 0 = the controller's edge_api.limits
  int64_t effective_at_ms = 0;  // when `version` took effect (0 = since the node enrolled)
};

EdgeApiLimits LimitsFromConfig(const config::ControllerConfig::EdgeApi& c);
config::ControllerConfig::EdgeApi LimitsToConfig(const EdgeApiLimits& l);
// The stored form: a JSON object with the five §5.2 keys.
std::string LimitsToJson(const EdgeApiLimits& l);
// nullopt when `text` is not such an object (a damaged row reads as "not set").
std::optional<EdgeApiLimits> LimitsFromJson(std::string_view text);

}  // namespace edge::controller
