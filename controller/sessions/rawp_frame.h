// RawpFrame: the "rawp-dps-1.0" frame envelope of contract document 002 as the controller's
// WebSocket relay reads it from an operator's socket and writes it to one (wire.md §5.3).
//
//   {"v":"rawp-dps-1.0","type","message_id","timestamp","session_id","turn_id"?,"payload"}
//
// ParseControlFrame is the one parser of what a UI sends: a JSON object of exactly those keys
// (unknown keys are refused, so a typo never passes silently), `v` the version above, `type`
// one of the control.* types below, `message_id` a UUIDv4 (lower or upper case hex),
// `timestamp` RFC 3339, `session_id` the socket's own session, `turn_id` (optional) a string
// of at most 128 bytes, `payload` an object whose fields the type fixes:
//   control.prompt.request        {text: string ≤ max, tools?: [tool name, ≤ 64 of them]}
//   control.interrupt             {}
//   control.interaction.response  any object (relayed to the process as it is)
//   control.file.search           {query: string ≤ 1 KiB, limit?: integer 1..1000}
//   control.file.search.cancel    {}
//   control.session.close         {}
// Every refusal is INVALID_ARGUMENT naming the field, the value (shortened) and why.
//
// FrameBuilder writes frames to the UI: the envelope with a fresh message_id and timestamp,
// plus "seq" when the frame is part of the session's numbered stream (SessionRelay).
// Stateless functions; the builder borrows the clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/error.h"

namespace edge::controller {

inline constexpr std::string_view kRawpVersion = "rawp-dps-1.0";

// A control frame from an operator's socket, validated.
struct ControlFrame {
  std::string type;
  std::string message_id;  // as sent (a UUIDv4)
  std::string timestamp;   // as sent (RFC 3339)
  std::string session_id;
  std::optional<std::string> turn_id;
  nlohmann::json payload;  // an object, validated for `type`
};

// Parses one text frame. `session_id`: the session the socket belongs to (a frame naming
// another is refused). `max_text_bytes`: the longest prompt text accepted.
Result<ControlFrame> ParseControlFrame(std::string_view text, std::string_view session_id,
                                       size_t max_text_bytes = 1 << 20);

// True for a UUIDv4 in its canonical 8-4-4-4-12 hex form (either case).
bool IsUuidV4(std::string_view s);

// A frame to a UI socket.
struct OutFrame {
  std::string type;
  std::string session_id;              // "" = none (node.config.changed)
  std::optional<std::string> turn_id;  // none = not written
  nlohmann::json payload = nlohmann::json::object();
  std::string message_id;  // "" = a fresh UUIDv4 (an echoed control frame keeps its own)
  std::string timestamp;   // "" = now
};

// The serialised frame (valid UTF-8 JSON; strings in `payload` must already be valid UTF-8,
// anything else is replaced). `seq` 0 = no "seq" key.
std::string SerializeFrame(const OutFrame& frame, uint64_t seq, const Clock& clock);

// The frame a UI gets for a refused or failed request of its own:
// session.error {code, message, ref_message_id?}.
OutFrame SessionError(std::string_view session_id, std::string_view code, std::string_view message,
                      std::string_view ref_message_id = {});

}  // namespace edge::controller
