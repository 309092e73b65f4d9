// Conversions between the edge stream's protobuf messages and what the controller stores and
// shows: EdgeResult → CommandOutcomeRecord (payload Any → JSON), EdgeCapabilities ↔ JSON, and
// operator JSON args → google.protobuf.Struct. Stateless.
#pragma once

#include <string>

#include <google/protobuf/struct.pb.h>

#include "common/error.h"
#include "controller/store.h"
#include "node_cluster.pb.h"

namespace edge::controller {

// The label an agent sets when it acknowledges a Drain (wire.md §2.3 step 6).
inline constexpr const char* kAgentStateLabel = "agent.state";

// Ok → "ok" (exit_code, payload as JSON, duration), Err → "error" (code, message, exit_code),
// TimedOut → "timed_out" (duration = the deadline), Cancelled → "cancelled" (message = reason).
// A result with no outcome is stored as an "error" with code "INVALID_ARGUMENT". A payload
// that packs a google.protobuf.Struct/Value becomes that JSON; any other Any becomes
// {"@type": url, "value_base64": …}.
CommandOutcomeRecord OutcomeFromResult(const aegis::cluster::v1::EdgeResult& result);

// {"os","arch","local_tools":[…],"mount_points":[…],"custom_labels":{…}}
std::string CapabilitiesToJson(const aegis::cluster::v1::EdgeCapabilities& caps);
// The inverse, for the admin API; an empty or malformed string gives empty capabilities.
aegis::cluster::v1::EdgeCapabilities CapabilitiesFromJson(const std::string& json);
bool IsDraining(const aegis::cluster::v1::EdgeCapabilities& caps);

// The label in which an agent states the largest message its end of the stream takes (its
// edge.max_message_bytes).
inline constexpr const char* kAgentMaxMessageLabel = "agent.max_message_bytes";
// That limit from stored capabilities JSON; 0 when the node did not state one (an older agent)
// or stated something that is not a positive decimal number.
uint64_t NodeMaxMessageBytes(const std::string& capabilities_json);

// How deep an InvokeTool's args may nest: each JSON object level costs up to three protobuf
// message levels (Struct, map entry, Value), and a node parses the EdgeCommand with
// protobuf's default limit of 100 nested messages.
inline constexpr size_t kMaxArgsDepth = 32;

// A JSON object as a Struct. INVALID_ARGUMENT naming `field` when `json` is not an object,
// is not valid JSON (with the byte position) or nests deeper than kMaxArgsDepth.
Result<google::protobuf::Struct> StructFromJsonObject(const std::string& json,
                                                      const std::string& field);

}  // namespace edge::controller
