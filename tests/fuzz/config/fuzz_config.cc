// Fuzz target: the agent config loader and the join-token line remover must never crash,
// throw, or accept input that then fails to dump.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/agent_config.h"
#include "config/join_token_remover.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto cfg = edge::config::LoadAgentConfigFromString(text, "fuzz.yaml", {});
  if (cfg) {
    (void)edge::config::DumpRedacted(*cfg);
    (void)edge::config::ApplyDelta(*cfg, text);
  }
  bool removed = false;
  auto out = edge::config::JoinTokenRemover::RemoveFromText(text, &removed);
  if (out && !removed && *out != text) __builtin_trap();  // nothing removed => unchanged
  if (out && out->size() > text.size()) __builtin_trap();
  return 0;
}
