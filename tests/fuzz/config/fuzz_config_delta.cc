// Fuzz target: a PushConfig delta (partial YAML or canonical JSON, wire.md §2.3) merged over a
// valid agent config. Invariants: nothing crashes or throws; a refused delta says why; an
// accepted one gives a config that dumps, and applying the same delta to it again changes
// nothing (a delta is a merge, not an increment).
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/agent_config.h"

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
