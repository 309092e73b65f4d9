// The status notes an operator client gets in the middle of a command's event stream
// (InvokeEvent.status.state, FleetInvokeEvent.note.state). The controller writes them and the
// CLI recognises them, so both read the names from here.
#pragma once

namespace edge::controller {

// The node's stream dropped while the command ran; the controller waits for it to come back.
inline constexpr const char* kNodeDisconnected = "node_disconnected";
// The node reconnected and the command's events flow again.
inline constexpr const char* kNodeReconnected = "node_reconnected";
// The client fell too far behind: output is being discarded for it (OutputPacer).
inline constexpr const char* kOutputDropped = "output_dropped";
// The run of drops ended; the note's detail says how much was missed.
inline constexpr const char* kOutputResumed = "output_resumed";

}  // namespace edge::controller
