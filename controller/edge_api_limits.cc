#include "controller/edge_api_limits.h"

#include <nlohmann/json.hpp>

namespace edge::controller {

EdgeApiLimits LimitsFromConfig(const config::ControllerConfig::EdgeApi& c) {
  return {.rate_limit = c.rate_limit,
          .max_frame_size = static_cast<int64_t>(c.max_frame_size),
          .reattach_window = c.reattach_window_secs,
          .max_buffer_size = static_cast<int64_t>(c.max_buffer_size),
          .buffer_overflow_policy = c.buffer_overflow_policy};
}

config::ControllerConfig::EdgeApi LimitsToConfig(const EdgeApiLimits& l) {
  config::ControllerConfig::EdgeApi c;
  c.rate_limit = l.rate_limit;
  c.max_frame_size = static_cast<uint64_t>(l.max_frame_size);
  c.reattach_window_secs = l.reattach_window;
  c.max_buffer_size = static_cast<uint64_t>(l.max_buffer_size);
  c.buffer_overflow_policy = l.buffer_overflow_policy;
  return c;
}

std::string LimitsToJson(const EdgeApiLimits& l) {
  return nlohmann::json{{"rate_limit", l.rate_limit},
                        {"max_frame_size", l.max_frame_size},
                        {"reattach_window", l.reattach_window},
                        {"max_buffer_size", l.max_buffer_size},
                        {"buffer_overflow_policy", l.buffer_overflow_policy}}
      .dump();
}

std::optional<EdgeApiLimits> LimitsFromJson(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  EdgeApiLimits l;
  auto num = [&](const char* key, int64_t& out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return false;
    out = it->get<int64_t>();
    return out > 0;
  };
  auto policy = j.find("buffer_overflow_policy");
  if (!num("rate_limit", l.rate_limit) || !num("max_frame_size", l.max_frame_size) ||
      !num("reattach_window", l.reattach_window) || !num("max_buffer_size", l.max_buffer_size) ||
      policy == j.end() || !policy->is_string()) {
    return std::nullopt;
  }
  l.buffer_overflow_policy = policy->get<std::string>();
  if (l.buffer_overflow_policy != "drop_oldest" && l.buffer_overflow_policy != "disconnect")
    return std::nullopt;
  return l;
}

}  // namespace edge::controller
