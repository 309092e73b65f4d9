#include "agent/compute/cloudevent_codec.h"

#include "common/json_parse.h"
#include "common/random.h"

namespace edge::compute {
namespace {

using nlohmann::json;

std::unexpected<Error> Bad(std::string_view what, std::string_view field, std::string_view why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string(what) + "." + std::string(field) + " " + std::string(why));
}

// A member of `j` as a string: "" when absent or null, an error when of another type.
Result<std::string> Str(const json& j, std::string_view what, const char* field,
                        bool required = false) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) return Bad(what, field, "is required");
    return std::string();
  }
  if (!it->is_string()) return Bad(what, field, "must be a string");
  std::string s = it->get<std::string>();
  if (required && s.empty()) return Bad(what, field, "must not be empty");
  return s;
}

// `success`: absent or null = `absent_means`; else it must be a bool.
Result<bool> Success(const json& j, std::string_view what, bool absent_means) {
  auto it = j.find("success");
  if (it == j.end() || it->is_null()) return absent_means;
  if (!it->is_boolean()) return Bad(what, "success", "must be a bool");
  return it->get<bool>();
}

Result<std::vector<std::string>> Strings(const json& j, std::string_view what, const char* field) {
  std::vector<std::string> out;
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) return Bad(what, field, "must be a list of strings");
  for (const auto& v : *it) {
    if (!v.is_string()) return Bad(what, field, "must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::optional<ErrorObject>> OptError(const json& j, std::string_view what) {
  auto it = j.find("error");
  if (it == j.end() || it->is_null()) return std::optional<ErrorObject>();
  auto e = ParseErrorObject(*it, std::string(what) + ".error");
  if (!e) return std::unexpected(e.error());
  return std::optional<ErrorObject>(std::move(*e));
}

Status RequireObject(const json& j, std::string_view what) {
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(what) + " must be a JSON object");
  }
  return OkStatus();
}

void PutCommon(json& j, bool success, const std::optional<ErrorObject>& error,
               const std::vector<std::string>& warnings) {
  j["success"] = success;
  if (!success && error) j["error"] = ToJson(*error);
  if (!warnings.empty()) j["warnings"] = warnings;
}

}  // namespace

json CalculationRequest::data() const {
  if (!payload || !payload->is_object()) return nullptr;
  auto it = payload->find("data");
  return it == payload->end() ? json(nullptr) : *it;
}

// ---- writing -------------------------------------------------------------------------------

json ToJson(const ErrorObject& e) {
  json j = {{"code", e.code}, {"message", e.message}};
  j["retryable"] = e.retryable ? json(*e.retryable) : json(nullptr);
  return j;
}

json ToJson(const JoinEvent& e) {
  json j = {{"id", e.id}, {"tags", e.tags}, {"success", e.success}};
  if (!e.joined_legal_entity_id.empty()) j["joinedLegalEntityId"] = e.joined_legal_entity_id;
  return j;
}

json ToJson(const GreetEvent& e) {
  return json{{"id", e.id},
              {"memberId", e.member_id},
              {"joinedLegalEntityId", e.joined_legal_entity_id},
              {"success", e.success}};
}

json ToJson(const KeepAliveEvent& e) {
  json j = {{"id", e.id}, {"success", e.success}};
  if (!e.member_id.empty()) j["memberId"] = e.member_id;
  return j;
}

json ToJson(const EventAck& e) {
  json j = {{"id", e.id}, {"sourceEventId", e.source_event_id}};
  PutCommon(j, e.success, e.error, e.warnings);
  return j;
}

json ToJson(const CalculationRequest& r) {
  if (r.raw.is_object()) return r.raw;
  const bool processor = r.kind == CalculationRequest::Kind::kProcessor;
  json j = {{"id", r.id}, {"requestId", r.request_id}, {"entityId", r.entity_id}};
  j[processor ? "processorId" : "criteriaId"] = r.handler_id;
  j[processor ? "processorName" : "criteriaName"] = r.handler_name;
  if (!processor && !r.target.empty()) j["target"] = r.target;
  if (!r.workflow.is_null()) j["workflow"] = r.workflow;
  if (!r.transition.is_null()) j["transition"] = r.transition;
  if (!r.transaction_id.empty()) j["transactionId"] = r.transaction_id;
  j["success"] = true;
  if (r.payload) j["payload"] = *r.payload;
  return j;
}

json ToJson(const ProcessorResponse& r) {
  json j = {{"id", r.id}, {"requestId", r.request_id}, {"entityId", r.entity_id}};
  PutCommon(j, r.success, r.error, r.warnings);
  if (r.data) j["payload"] = json{{"type", "JSON"}, {"data", *r.data}};
  return j;
}

json ToJson(const CriteriaResponse& r) {
  json j = {{"id", r.id}, {"requestId", r.request_id}, {"entityId", r.entity_id}};
  PutCommon(j, r.success, r.error, r.warnings);
  if (r.success) j["matches"] = r.matches;
  if (!r.reason.empty()) j["reason"] = r.reason;
  return j;
}

// ---- parsing -------------------------------------------------------------------------------

Result<ErrorObject> ParseErrorObject(const json& j, std::string_view what) {
  if (auto st = RequireObject(j, what); !st) return std::unexpected(st.error());
  ErrorObject e;
  auto code = Str(j, what, "code");
  if (!code) return std::unexpected(code.error());
  auto message = Str(j, what, "message");
  if (!message) return std::unexpected(message.error());
  e.code = std::move(*code);
  e.message = std::move(*message);
  auto it = j.find("retryable");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return Bad(what, "retryable", "must be a bool or null");
    e.retryable = it->get<bool>();
  }
  return e;
}

Result<JoinEvent> ParseJoin(const json& j) {
  constexpr std::string_view w = kJoinEvent;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  JoinEvent e;
  auto id = Str(j, w, "id");
  auto tags = Strings(j, w, "tags");
  auto le = Str(j, w, "joinedLegalEntityId");
  auto ok = Success(j, w, true);
  if (!id) return std::unexpected(id.error());
  if (!tags) return std::unexpected(tags.error());
  if (!le) return std::unexpected(le.error());
  if (!ok) return std::unexpected(ok.error());
  e.id = std::move(*id);
  e.tags = std::move(*tags);
  e.joined_legal_entity_id = std::move(*le);
  e.success = *ok;
  return e;
}

Result<GreetEvent> ParseGreet(const json& j) {
  constexpr std::string_view w = kGreetEvent;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  GreetEvent e;
  auto id = Str(j, w, "id");
  auto member = Str(j, w, "memberId", true);
  auto le = Str(j, w, "joinedLegalEntityId");
  auto ok = Success(j, w, true);
  if (!id) return std::unexpected(id.error());
  if (!member) return std::unexpected(member.error());
  if (!le) return std::unexpected(le.error());
  if (!ok) return std::unexpected(ok.error());
  e.id = std::move(*id);
  e.member_id = std::move(*member);
  e.joined_legal_entity_id = std::move(*le);
  e.success = *ok;
  return e;
}

Result<KeepAliveEvent> ParseKeepAlive(const json& j) {
  constexpr std::string_view w = kKeepAliveEvent;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  KeepAliveEvent e;
  auto id = Str(j, w, "id");
  auto member = Str(j, w, "memberId");
  auto ok = Success(j, w, true);
  if (!id) return std::unexpected(id.error());
  if (!member) return std::unexpected(member.error());
  if (!ok) return std::unexpected(ok.error());
  e.id = std::move(*id);
  e.member_id = std::move(*member);
  e.success = *ok;
  return e;
}

Result<EventAck> ParseAck(const json& j) {
  constexpr std::string_view w = kAckEvent;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  EventAck e;
  auto id = Str(j, w, "id");
  auto source = Str(j, w, "sourceEventId", true);
  auto ok = Success(j, w, true);  // the contract: optional, default true
  auto warnings = Strings(j, w, "warnings");
  auto error = OptError(j, w);
  if (!id) return std::unexpected(id.error());
  if (!source) return std::unexpected(source.error());
  if (!ok) return std::unexpected(ok.error());
  if (!warnings) return std::unexpected(warnings.error());
  if (!error) return std::unexpected(error.error());
  e.id = std::move(*id);
  e.source_event_id = std::move(*source);
  e.success = *ok;
  e.warnings = std::move(*warnings);
  e.error = std::move(*error);
  return e;
}

Result<CalculationRequest> ParseCalculationRequest(const json& j, CalculationRequest::Kind kind) {
  const bool processor = kind == CalculationRequest::Kind::kProcessor;
  const std::string_view w = processor ? kProcessorRequest : kCriteriaRequest;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  CalculationRequest r;
  r.kind = kind;
  auto id = Str(j, w, "id");
  auto request_id = Str(j, w, "requestId");
  auto entity_id = Str(j, w, "entityId");
  auto hid = Str(j, w, processor ? "processorId" : "criteriaId");
  auto hname = Str(j, w, processor ? "processorName" : "criteriaName");
  auto target = Str(j, w, "target");
  auto tx = Str(j, w, "transactionId");
  for (const auto* s : {&id, &request_id, &entity_id, &hid, &hname, &target, &tx}) {
    if (!*s) return std::unexpected(s->error());
  }
  r.id = std::move(*id);
  // The reference server sets both to the same value; either is enough.
  r.request_id = request_id->empty() ? r.id : std::move(*request_id);
  if (r.request_id.empty()) return Bad(w, "requestId", "is required");
  r.entity_id = std::move(*entity_id);
  r.handler_id = std::move(*hid);
  r.handler_name = std::move(*hname);
  if (r.handler().empty()) {
    return Bad(w, processor ? "processorName" : "criteriaName", "is required (or the id)");
  }
  r.target = std::move(*target);
  r.transaction_id = std::move(*tx);
  if (auto it = j.find("workflow"); it != j.end()) {
    if (!it->is_null() && !it->is_object()) return Bad(w, "workflow", "must be an object");
    r.workflow = *it;
  }
  if (auto it = j.find("transition"); it != j.end()) {
    if (!it->is_null() && !it->is_object()) return Bad(w, "transition", "must be an object");
    r.transition = *it;
  }
  if (auto it = j.find("payload"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Bad(w, "payload", "must be an object");
    if (auto t = it->find("type"); t != it->end() && !t->is_null() && !t->is_string()) {
      return Bad(w, "payload.type", "must be a string");
    }
    r.payload = *it;
  }
  r.raw = j;
  return r;
}

Result<ProcessorResponse> ParseProcessorResponse(const json& j) {
  constexpr std::string_view w = kProcessorResponse;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  ProcessorResponse r;
  auto id = Str(j, w, "id");
  auto request_id = Str(j, w, "requestId", true);
  auto entity_id = Str(j, w, "entityId");
  auto ok = Success(j, w, false);  // the reference server's default
  auto warnings = Strings(j, w, "warnings");
  auto error = OptError(j, w);
  if (!id) return std::unexpected(id.error());
  if (!request_id) return std::unexpected(request_id.error());
  if (!entity_id) return std::unexpected(entity_id.error());
  if (!ok) return std::unexpected(ok.error());
  if (!warnings) return std::unexpected(warnings.error());
  if (!error) return std::unexpected(error.error());
  r.id = std::move(*id);
  r.request_id = std::move(*request_id);
  r.entity_id = std::move(*entity_id);
  r.success = *ok;
  r.warnings = std::move(*warnings);
  r.error = std::move(*error);
  if (auto it = j.find("payload"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Bad(w, "payload", "must be an object");
    if (auto d = it->find("data"); d != it->end()) r.data = *d;
  }
  return r;
}

Result<CriteriaResponse> ParseCriteriaResponse(const json& j) {
  constexpr std::string_view w = kCriteriaResponse;
  if (auto st = RequireObject(j, w); !st) return std::unexpected(st.error());
  CriteriaResponse r;
  auto id = Str(j, w, "id");
  auto request_id = Str(j, w, "requestId", true);
  auto entity_id = Str(j, w, "entityId");
  auto ok = Success(j, w, false);
  auto reason = Str(j, w, "reason");
  auto warnings = Strings(j, w, "warnings");
  auto error = OptError(j, w);
  if (!id) return std::unexpected(id.error());
  if (!request_id) return std::unexpected(request_id.error());
  if (!entity_id) return std::unexpected(entity_id.error());
  if (!ok) return std::unexpected(ok.error());
  if (!reason) return std::unexpected(reason.error());
  if (!warnings) return std::unexpected(warnings.error());
  if (!error) return std::unexpected(error.error());
  r.id = std::move(*id);
  r.request_id = std::move(*request_id);
  r.entity_id = std::move(*entity_id);
  r.success = *ok;
  r.reason = std::move(*reason);
  r.warnings = std::move(*warnings);
  r.error = std::move(*error);
  auto it = j.find("matches");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return Bad(w, "matches", "must be a bool");
    r.matches = it->get<bool>();
  } else if (r.success) {
    return Bad(w, "matches", "is required when success is true");
  }
  return r;
}

// ---- the envelope --------------------------------------------------------------------------

ce::CloudEvent MakeCloudEvent(std::string_view type, const json& body, std::string_view source) {
  ce::CloudEvent ev;
  std::string id;
  if (auto it = body.find("id"); it != body.end() && it->is_string()) id = it->get<std::string>();
  ev.set_id(id.empty() ? NewUuidV4() : id);
  ev.set_source(std::string(source));
  ev.set_spec_version("1.0");
  ev.set_type(std::string(type));
  ev.set_text_data(body.dump(-1, ' ', false, json::error_handler_t::replace));
  return ev;
}

Result<DecodedEvent> DecodeCloudEvent(const ce::CloudEvent& event, size_t max_bytes) {
  DecodedEvent d;
  d.type = event.type();
  d.id = event.id();
  const std::string what = "CloudEvent " + (d.type.empty() ? std::string("(no type)") : d.type);
  if (d.type.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "CloudEvent.type is required");
  }
  std::string_view text;
  switch (event.data_case()) {
    case ce::CloudEvent::kTextData:
      text = event.text_data();
      break;
    case ce::CloudEvent::kBinaryData:
      text = event.binary_data();
      break;
    case ce::CloudEvent::kProtoData:
      return MakeError(ErrorCode::kInvalidArgument,
                       what + ": proto_data is not supported (JSON in text_data expected)");
    case ce::CloudEvent::DATA_NOT_SET:
      return MakeError(ErrorCode::kInvalidArgument,
                       what + ": no data (JSON in text_data expected)");
  }
  if (text.size() > max_bytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     what + ": data of " + std::to_string(text.size()) + " bytes exceeds " +
                         std::to_string(max_bytes));
  }
  auto body = ParseJsonBounded(text, what + " data");
  if (!body) return std::unexpected(body.error());
  if (!body->is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, what + ": data must be a JSON object");
  }
  d.body = std::move(*body);
  for (const auto& [name, value] : event.attributes()) {
    switch (value.attr_case()) {
      case ce::CloudEvent::CloudEventAttributeValue::kCeString:
        d.attributes[name] = value.ce_string();
        break;
      case ce::CloudEvent::CloudEventAttributeValue::kCeUri:
        d.attributes[name] = value.ce_uri();
        break;
      case ce::CloudEvent::CloudEventAttributeValue::kCeUriRef:
        d.attributes[name] = value.ce_uri_ref();
        break;
      default:
        break;
    }
  }
  return d;
}

}  // namespace edge::compute
