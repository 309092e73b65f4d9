// The compute-member protocol's JSON shapes (seeds/003, wire.md §3) and the CloudEvent
// envelope that carries them: join, greet, keep-alive, ack, processor and criteria requests
// and responses, and the error object. Used by both sides — the agent's member door
// (agent/compute) and the controller's dispatcher (controller/compute_*).
//
// Parsing is strict about what the protocol needs (ids are strings, `tags` is a list of
// strings, `matches` is a bool, ...) and lenient about the rest: unknown fields are ignored
// and every request keeps the JSON it arrived as (`raw`), which is what a tool gets on stdin.
// Every failure is INVALID_ARGUMENT naming the event type and the field. Nothing throws.
//
// Writing: every body carries `"success"` explicitly (the reference server defaults it to
// false); `error` only when success is false; `warnings` only when there are some.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cloudevents/cloudevents.pb.h"
#include "common/error.h"

namespace edge::compute {

namespace ce = io::cloudevents::v1;

// Event types (CloudEvent.type).
inline constexpr std::string_view kJoinEvent = "CalculationMemberJoinEvent";
inline constexpr std::string_view kGreetEvent = "CalculationMemberGreetEvent";
inline constexpr std::string_view kKeepAliveEvent = "CalculationMemberKeepAliveEvent";
inline constexpr std::string_view kAckEvent = "EventAckResponse";
inline constexpr std::string_view kProcessorRequest = "EntityProcessorCalculationRequest";
inline constexpr std::string_view kProcessorResponse = "EntityProcessorCalculationResponse";
inline constexpr std::string_view kCriteriaRequest = "EntityCriteriaCalculationRequest";
inline constexpr std::string_view kCriteriaResponse = "EntityCriteriaCalculationResponse";

// The dispatch errors of the engine side (seeds/003 "ERRORS").
inline constexpr std::string_view kNoComputeMemberForTag = "NO_COMPUTE_MEMBER_FOR_TAG";
inline constexpr std::string_view kComputeMemberDisconnected = "COMPUTE_MEMBER_DISCONNECTED";
inline constexpr std::string_view kDispatchTimeout = "DISPATCH_TIMEOUT";

// `source` of the events each side writes.
inline constexpr std::string_view kClientSource = "client";
inline constexpr std::string_view kServerSource = "edge-controller";

// {"code","message","retryable"}; retryable may be null.
struct ErrorObject {
  std::string code;
  std::string message;
  std::optional<bool> retryable;
};

struct JoinEvent {
  std::string id;
  std::vector<std::string> tags;
  std::string joined_legal_entity_id;  // "" = absent (the server then uses the token's tenant)
  bool success = true;
};

struct GreetEvent {
  std::string id;
  std::string member_id;
  std::string joined_legal_entity_id;
  bool success = true;
};

struct KeepAliveEvent {
  std::string id;
  std::string member_id;  // "" when the server's keep-alive leaves it out
  bool success = true;
};

struct EventAck {
  std::string id;
  std::string source_event_id;
  bool success = true;
  std::optional<ErrorObject> error;
  std::vector<std::string> warnings;
};

// EntityProcessorCalculationRequest and EntityCriteriaCalculationRequest.
struct CalculationRequest {
  enum class Kind { kProcessor, kCriteria };
  Kind kind = Kind::kProcessor;
  std::string id;
  std::string request_id;
  std::string entity_id;
  std::string handler_id;    // processorId / criteriaId
  std::string handler_name;  // processorName / criteriaName
  std::string target;        // criteria: NA | WORKFLOW | PROCESSOR | TRANSITION ("" = absent)
  std::string transaction_id;
  nlohmann::json workflow;    // {"id","name"}; null when absent
  nlohmann::json transition;  // null when absent
  // {"type":"JSON","data":…,"meta":{…}}; nullopt when absent (attachEntity=false).
  std::optional<nlohmann::json> payload;
  // The body as it arrived (writing a request sends this when it is set, else the fields).
  nlohmann::json raw;

  // The name the member looks up in its config: the name, else the id.
  const std::string& handler() const { return handler_name.empty() ? handler_id : handler_name; }
  // payload.data, or null.
  nlohmann::json data() const;
};

struct ProcessorResponse {
  std::string id;
  std::string request_id;
  std::string entity_id;
  bool success = true;
  // payload.data ({"type":"JSON","data":…} on the wire); nullopt = no payload.
  std::optional<nlohmann::json> data;
  std::optional<ErrorObject> error;
  std::vector<std::string> warnings;
};

struct CriteriaResponse {
  std::string id;
  std::string request_id;
  std::string entity_id;
  bool success = true;
  bool matches = false;
  std::string reason;  // "" = absent
  std::optional<ErrorObject> error;
  std::vector<std::string> warnings;
};

nlohmann::json ToJson(const ErrorObject& e);
nlohmann::json ToJson(const JoinEvent& e);
nlohmann::json ToJson(const GreetEvent& e);
nlohmann::json ToJson(const KeepAliveEvent& e);
nlohmann::json ToJson(const EventAck& e);
nlohmann::json ToJson(const CalculationRequest& r);
nlohmann::json ToJson(const ProcessorResponse& r);
nlohmann::json ToJson(const CriteriaResponse& r);

Result<ErrorObject> ParseErrorObject(const nlohmann::json& j, std::string_view what);
Result<JoinEvent> ParseJoin(const nlohmann::json& j);
Result<GreetEvent> ParseGreet(const nlohmann::json& j);
Result<KeepAliveEvent> ParseKeepAlive(const nlohmann::json& j);
Result<EventAck> ParseAck(const nlohmann::json& j);
Result<CalculationRequest> ParseCalculationRequest(const nlohmann::json& j,
                                                   CalculationRequest::Kind kind);
Result<ProcessorResponse> ParseProcessorResponse(const nlohmann::json& j);
Result<CriteriaResponse> ParseCriteriaResponse(const nlohmann::json& j);

// ---- the envelope ---------------------------------------------------------------------

// A CloudEvent of `type` with `body` as JSON in text_data; id = body["id"] when it is a
// non-empty string, else a new UUID; spec_version "1.0".
ce::CloudEvent MakeCloudEvent(std::string_view type, const nlohmann::json& body,
                              std::string_view source);

struct DecodedEvent {
  std::string type;
  std::string id;  // the envelope's id
  nlohmann::json body;
  // String-valued extension attributes (ce_string, ce_uri, ce_uri_ref), e.g. the auth
  // context authtype / authid / authclaims.
  std::map<std::string, std::string> attributes;
};

// The JSON body of `event`: text_data, or binary_data read as JSON text. INVALID_ARGUMENT for
// proto_data (not supported), no data, text that is not a JSON object, more than
// `max_bytes` of it, or nesting deeper than common/json_parse.h allows.
Result<DecodedEvent> DecodeCloudEvent(const ce::CloudEvent& event, size_t max_bytes = 16u << 20);

}  // namespace edge::compute
