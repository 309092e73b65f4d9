// Fuzz target: a PushConfig delta (partial YAML or canonical JSON, wire.md §2.3) merged over a
// valid agent config, and taken apart by the controller (SplitPushConfigDelta: its
// edge_api.limits and the node's part). Invariants: nothing crashes or throws; a refused
// delta says why; an accepted one gives a config that dumps, and applying the same delta to
// it again changes nothing (a delta is a merge, not an increment); accepted limits are within
// their ranges and the node's part no longer has edge_api.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/agent_config.h"
#include "config/controller_config.h"

namespace {

const edge::config::AgentConfig& Base() {
  static const edge::config::AgentConfig* base = [] {
    auto cfg = edge::config::LoadAgentConfigFromString(
        "node_id: edge-01\n"
        "cluster: { heartbeat_interval_secs: 30 }\n"
        "labels: { site: lab, rack: r1 }\n",
        "base.yaml", {});
    if (!cfg) __builtin_trap();
    return new edge::config::AgentConfig(std::move(*cfg));
  }();
  return *base;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string delta(reinterpret_cast<const char*>(data), size);
  auto parts = edge::config::SplitPushConfigDelta(delta, {}, "delta");
  if (!parts) {
    if (parts.error().ToString().empty()) __builtin_trap();
  } else if (parts->edge_api) {
    const auto& l = *parts->edge_api;
    if (l.rate_limit < 1 || l.max_frame_size < 1024 || l.max_buffer_size < 4096 ||
        l.reattach_window_secs < 1 ||
        (l.buffer_overflow_policy != "drop_oldest" && l.buffer_overflow_policy != "disconnect"))
      __builtin_trap();
    auto rest = edge::config::SplitPushConfigDelta(parts->node_delta, {}, "rest");
    if (!parts->node_delta.empty() && rest && rest->edge_api) __builtin_trap();
  }
  auto merged = edge::config::ApplyDelta(Base(), delta);
  if (!merged) {
    if (merged.error().ToString().empty()) __builtin_trap();
    return 0;
  }
  const std::string dumped = edge::config::DumpRedacted(*merged);
  auto again = edge::config::ApplyDelta(*merged, delta);
  if (!again) __builtin_trap();  // what was accepted once is accepted on its own result
  if (edge::config::DumpRedacted(*again) != dumped) __builtin_trap();
  return 0;
}
