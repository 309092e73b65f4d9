// EdgeApiLimits: the per-node `edge_api.limits` of the operator API (wire.md §5.2) with their
// §5.2 defaults — what every node's sessions run with until PushConfig sets other limits.
// Plain data.
#pragma once

#include <cstdint>
#include <string>

namespace edge::controller {

struct EdgeApiLimits {
  int64_t rate_limit = 20;                             // control frames per second per session
  int64_t max_frame_size = 1 << 20;                    // bytes
  int64_t reattach_window = 300;                       // seconds
  int64_t max_buffer_size = 4 << 20;                   // bytes
  std::string buffer_overflow_policy = "drop_oldest";  // or "disconnect"
};

}  // namespace edge::controller
