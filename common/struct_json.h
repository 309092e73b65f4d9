// StructJson: google.protobuf.Struct / Value ⇄ nlohmann::json, converted directly, value by
// value. Both doors of a command cross this bridge (the controller turns an operator's JSON
// args into the InvokeTool's Struct and a result's Struct payload back into JSON; the agent
// the reverse of each): protobuf's JSON utilities, which went through JSON text and a type
// resolver, were 4 % of the agent's and 7 % of the controller's CPU per command (issue 14).
//
// The mapping is the one protobuf's JSON format defines for these types, and the one the
// text round trip produced before:
//   JSON → Value: null, bool, string, number (as a double; NaN and ±infinity, which JSON
//     text cannot hold, become null), array → list_value, object → struct_value. A string
//     or key that is not UTF-8 has each invalid byte sequence replaced by U+FFFD, as
//     nlohmann's dump with error_handler_t::replace does.
//   Value → JSON: a whole number protobuf's printer wrote as digits (below 1e15, or up to
//     1e17 where 15 significant digits do not hold it) becomes a JSON integer, any other
//     finite one a double, NaN / ±infinity the strings "NaN", "Infinity", "-Infinity".
//     A member or element with no kind set is left out, as that printer left it out; a
//     top-level Value with none is an error.
// The JSON text the controller makes of it (payload_json) differs from protobuf's only in
// form: keys sorted, the shortest digits for a double, '<' and '>' not escaped.
// More than kMaxStructDepth nested arrays and objects (the top object counts) are refused:
// the recursion's stack. Errors are INVALID_ARGUMENT and name `field` and the path inside it
// ("args.env.PATH", "payload.items[3]"). Stateless functions.
#pragma once

#include <google/protobuf/struct.pb.h>

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace edge {

inline constexpr size_t kMaxStructDepth = 100;

// `json` must be an object.
Result<google::protobuf::Struct> JsonToStruct(const nlohmann::json& json, std::string_view field);
Result<google::protobuf::Value> JsonToValue(const nlohmann::json& json, std::string_view field);

Result<nlohmann::json> StructToJson(const google::protobuf::Struct& s, std::string_view field);
Result<nlohmann::json> ValueToJson(const google::protobuf::Value& v, std::string_view field);

}  // namespace edge
