#include "controller/edge_codec.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "agent/identity/encoding.h"
#include "common/json_parse.h"
#include "common/struct_json.h"

namespace edge::controller {

namespace pb = aegis::cluster::v1;

namespace {

int64_t Millis(const google::protobuf::Duration& d) {
  return d.seconds() * 1000 + d.nanos() / 1'000'000;
}

std::string PayloadJson(const google::protobuf::Any& any) {
  if (any.type_url().empty() && any.value().empty()) return "";
  google::protobuf::Struct st;
  google::protobuf::Value v;
  if (any.Is<google::protobuf::Struct>() && any.UnpackTo(&st)) {
    if (auto j = StructToJson(st, "payload"); j) return j->dump();
  }
  if (any.Is<google::protobuf::Value>() && any.UnpackTo(&v)) {
    if (auto j = ValueToJson(v, "payload"); j) return j->dump();
  }
  return nlohmann::json{{"@type", any.type_url()},
                        {"value_base64", identity::Base64Encode(any.value())}}
      .dump();
}

}  // namespace

CommandOutcomeRecord OutcomeFromResult(const pb::EdgeResult& r) {
  CommandOutcomeRecord out;
  switch (r.outcome_case()) {
    case pb::EdgeResult::kOk:
      out.outcome = "ok";
      out.exit_code = r.ok().exit_code();
      out.payload_json = PayloadJson(r.ok().payload());
      out.duration_ms = Millis(r.ok().duration());
      break;
    case pb::EdgeResult::kErr:
      out.outcome = "error";
      out.error_code = r.err().code();
      out.message = r.err().message();
      out.exit_code = r.err().exit_code();
      break;
    case pb::EdgeResult::kTimedOut:
      out.outcome = "timed_out";
      out.duration_ms = Millis(r.timed_out().deadline());
      break;
    case pb::EdgeResult::kCancelled:
      out.outcome = "cancelled";
      out.message = r.cancelled().reason();
      break;
    case pb::EdgeResult::OUTCOME_NOT_SET:
      out.outcome = "error";
      out.error_code = "INVALID_ARGUMENT";
      out.message = "the agent sent a CommandResult without an outcome";
      break;
  }
  return out;
}

std::string CapabilitiesToJson(const pb::EdgeCapabilities& caps) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : caps.custom_labels())
    labels[k] = v;
  return nlohmann::json{{"os", caps.os()},
                        {"arch", caps.arch()},
                        {"local_tools", std::vector<std::string>(caps.local_tools().begin(),
                                                                 caps.local_tools().end())},
                        {"mount_points", std::vector<std::string>(caps.mount_points().begin(),
                                                                  caps.mount_points().end())},
                        {"custom_labels", labels}}
      .dump();
}

pb::EdgeCapabilities CapabilitiesFromJson(const std::string& json) {
  pb::EdgeCapabilities caps;
  auto parsed = ParseJsonBounded(json, "capabilities");
  if (!parsed || !parsed->is_object()) return caps;
  const nlohmann::json& j = *parsed;
  auto str = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  caps.set_os(str("os"));
  caps.set_arch(str("arch"));
  auto list = [&](const char* k, google::protobuf::RepeatedPtrField<std::string>* out) {
    if (!j.contains(k) || !j[k].is_array()) return;
    for (const auto& v : j[k])
      if (v.is_string()) out->Add(v.get<std::string>());
  };
  list("local_tools", caps.mutable_local_tools());
  list("mount_points", caps.mutable_mount_points());
  if (j.contains("custom_labels") && j["custom_labels"].is_object()) {
    for (const auto& [k, v] : j["custom_labels"].items())
      if (v.is_string()) (*caps.mutable_custom_labels())[k] = v.get<std::string>();
  }
  return caps;
}

uint64_t NodeMaxMessageBytes(const std::string& capabilities_json) {
  const auto caps = CapabilitiesFromJson(capabilities_json);
  auto it = caps.custom_labels().find(kAgentMaxMessageLabel);
  if (it == caps.custom_labels().end()) return 0;
  uint64_t v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() ? v : 0;
}

bool IsDraining(const pb::EdgeCapabilities& caps) {
  auto it = caps.custom_labels().find(kAgentStateLabel);
  return it != caps.custom_labels().end() && it->second == "draining";
}

Result<google::protobuf::Struct> StructFromJsonObject(const std::string& json,
                                                      const std::string& field) {
  // Bounded before anything recursive sees it (issue 15 #9: 100 000 levels crashed the
  // controller in a recursive dump).
  auto parsed = ParseJsonBounded(json.empty() ? std::string_view("{}") : std::string_view(json),
                                 field, kMaxArgsDepth);
  if (!parsed) return std::unexpected(parsed.error());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     field + " must be a JSON object, got " + std::string(j.type_name()));
  }
  return JsonToStruct(j, field);
}

}  // namespace edge::controller
