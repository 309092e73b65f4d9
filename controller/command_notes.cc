#include "controller/command_notes.h"

#include <nlohmann/json.hpp>

#include "config/duration.h"

namespace edge::controller {

std::optional<std::string> OutputCapNote(const CommandRecord& command) {
  const std::string& payload = command.result.payload_json;
  // Most results are not capped: skip the parse unless the key can be there.
  if (command.result.outcome != "ok" || payload.find("\"output_capped\"") == std::string::npos) {
    return std::nullopt;
  }
  const auto j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto capped = j.find("output_capped");
  if (capped == j.end() || !capped->is_boolean() || !capped->get<bool>()) return std::nullopt;
  std::string cap = "its output cap";
  if (const auto bytes = j.find("output_cap_bytes");
      bytes != j.end() && bytes->is_number_unsigned()) {
    std::string size = config::FormatSize(bytes->get<uint64_t>());
    if (size.find_first_not_of("0123456789") == std::string::npos) size += " bytes";
    cap += " of " + size;
  }
  if (const auto key = j.find("output_cap_key"); key != j.end() && key->is_string()) {
    cap += " (" + key->get<std::string>() + ")";
  }
  return "node " + command.node_id + " reached " + cap + " and dropped the rest of command " +
         command.command_id + "'s output";
}

}  // namespace edge::controller
