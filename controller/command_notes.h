// The status notes an operator client gets in the middle of a command's event stream
// (InvokeEvent.status.state, FleetInvokeEvent.note.state). The controller writes them and the
// CLI recognises them, so both read the names from here.
#pragma once

#include <optional>
#include <string>

#include "controller/store.h"

namespace edge::controller {

// The node's stream dropped while the command ran; the controller waits for it to come back.
inline constexpr const char* kNodeDisconnected = "node_disconnected";
// The node reconnected and the command's events flow again.
inline constexpr const char* kNodeReconnected = "node_reconnected";
// The client fell too far behind: output is being discarded for it (OutputPacer).
inline constexpr const char* kOutputDropped = "output_dropped";
// The run of drops ended; the note's detail says how much was missed.
inline constexpr const char* kOutputResumed = "output_resumed";
// The node's output cap (sandbox.max_output_bytes, or the security context's tighter
// limits.max_output_bytes) dropped the rest of the command's output on the node, for every
// client: sent just before the result (OutputCapNote).
inline constexpr const char* kOutputCapped = "output_capped";

// The kOutputCapped note's message for an ended command whose result says the node's output
// cap dropped output (payload output_capped: true, with output_cap_bytes and output_cap_key),
// naming the node, the command, the cap and its config key; nullopt for any other result.
std::optional<std::string> OutputCapNote(const CommandRecord& command);

}  // namespace edge::controller
