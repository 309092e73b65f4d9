#include "agent/compute/call_mapper.h"

#include "common/json_parse.h"
#include "common/random.h"

namespace edge::compute {
namespace {

using nlohmann::json;
using sandbox::InvokeResult;
using sandbox::Outcome;

constexpr size_t kStderrInMessage = 1024;

bool Blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// The tool's stdout as text; nullopt when it was not UTF-8 (then it is not JSON either).
std::optional<std::string> Stdout(const InvokeResult& r) {
  if (!r.payload.is_object()) return std::string();
  if (r.payload.contains("stdout_base64")) return std::nullopt;
  auto it = r.payload.find("stdout");
  if (it == r.payload.end() || !it->is_string()) return std::string();
  return it->get<std::string>();
}

std::string StderrTail(const InvokeResult& r) {
  if (!r.payload.is_object()) return "";
  auto it = r.payload.find("stderr");
  if (it == r.payload.end() || !it->is_string()) return "";
  std::string s = it->get<std::string>();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  if (s.size() > kStderrInMessage) s = "…" + s.substr(s.size() - kStderrInMessage);
  return s;
}

ErrorObject ToolFailed(const std::string& tool, const InvokeResult& r) {
  std::string msg = "tool '" + tool + "' ";
  msg += r.signal != 0 ? "was ended by signal " + std::to_string(r.signal)
                       : "exited with code " + std::to_string(r.exit_code);
  if (auto err = StderrTail(r); !err.empty()) msg += ": " + err;
  return ErrorObject{std::string(kToolFailed), msg, false};
}

ErrorObject BadOutput(const std::string& tool, const std::string& why) {
  return ErrorObject{std::string(kInvalidOutput), "tool '" + tool + "' output " + why, false};
}

template <typename Response>
Response Base(const CalculationRequest& request) {
  Response r;
  r.id = NewUuidV4();
  r.request_id = request.request_id;
  r.entity_id = request.entity_id;
  return r;
}

}  // namespace

ErrorObject ErrorFor(const Error& error) {
  bool retryable = false;
  switch (error.code) {
    case ErrorCode::kResourceExhausted:
    case ErrorCode::kDraining:
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimedOut:
    case ErrorCode::kCancelled:
    case ErrorCode::kAborted:
    case ErrorCode::kAgentRestarted:
    case ErrorCode::kInternal:
      retryable = true;
      break;
    default:
      break;
  }
  return ErrorObject{std::string(ErrorCodeName(error.code)), error.message, retryable};
}

Result<sandbox::InvokeRequest> CallMapper::ToInvoke(
    const CalculationRequest& request, const std::map<std::string, std::string>& attributes) const {
  const bool processor = request.kind == CalculationRequest::Kind::kProcessor;
  const auto& handlers = processor ? processors_ : criteria_;
  auto it = handlers.find(request.handler());
  if (it == handlers.end()) {
    return MakeError(ErrorCode::kNotFound, std::string(processor ? "processor" : "criterion") +
                                               " '" + request.handler() +
                                               "' is not configured on this member (compute." +
                                               (processor ? "processors" : "criteria") + ")");
  }
  const config::ComputeHandler& h = it->second;
  sandbox::InvokeRequest inv;
  inv.command_id = "compute:" + request.request_id;
  inv.tool = h.tool;
  inv.security_context = h.security_context;
  inv.timeout = h.timeout;
  inv.door_limit = sandbox::InvokeRequest::DoorLimit{std::string(kDoorName), std::string(kCapKey),
                                                     max_concurrent_};
  std::string in = ToJson(request).dump(-1, ' ', false, json::error_handler_t::replace);
  if (in.size() > max_stdin_bytes_) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "request of " + std::to_string(in.size()) + " bytes exceeds the " +
                         std::to_string(max_stdin_bytes_) + " bytes a tool is given");
  }
  inv.stdin_data = std::move(in);
  inv.env["EDGE_COMPUTE_KIND"] = processor ? "processor" : "criteria";
  inv.env["EDGE_COMPUTE_NAME"] = request.handler();
  inv.env["EDGE_COMPUTE_REQUEST_ID"] = request.request_id;
  inv.env["EDGE_COMPUTE_ENTITY_ID"] = request.entity_id;
  for (const char* name : {"authtype", "authid", "authclaims"}) {
    auto a = attributes.find(name);
    if (a == attributes.end()) continue;
    std::string var = "EDGE_COMPUTE_";
    for (const char* p = name; *p != '\0'; ++p)
      var += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
    // A NUL cannot be in an environment value; the tool gets what precedes it.
    inv.env[var] = a->second.substr(0, a->second.find('\0'));
  }
  return inv;
}

json CallMapper::Failure(const CalculationRequest& request, const ErrorObject& error) {
  if (request.kind == CalculationRequest::Kind::kProcessor) {
    auto r = Base<ProcessorResponse>(request);
    r.success = false;
    r.error = error;
    return ToJson(r);
  }
  auto r = Base<CriteriaResponse>(request);
  r.success = false;
  r.error = error;
  return ToJson(r);
}

json CallMapper::Answer(const CalculationRequest& request, const InvokeResult& result) const {
  const bool processor = request.kind == CalculationRequest::Kind::kProcessor;
  const auto& handlers = processor ? processors_ : criteria_;
  auto h = handlers.find(request.handler());
  const std::string tool = h == handlers.end() ? request.handler() : h->second.tool;
  switch (result.outcome) {
    case Outcome::kOk:
      break;
    case Outcome::kTimedOut:
      return Failure(request, ErrorFor(Error{ErrorCode::kTimedOut,
                                             "tool '" + tool + "' did not finish within " +
                                                 std::to_string(result.timeout.count()) + " ms"}));
    case Outcome::kCancelled:
      return Failure(
          request,
          ErrorFor(Error{ErrorCode::kCancelled,
                         "tool '" + tool + "' was cancelled: " +
                             (result.reason.empty() ? "no reason given" : result.reason)}));
    case Outcome::kError:
      return Failure(request, ErrorFor(result.error));
  }
  if (result.output_truncated) {
    return Failure(request, BadOutput(tool, "exceeded the output limit and was cut"));
  }
  const auto out = Stdout(result);
  const bool clean_exit =
      result.signal == 0 && (result.exit_code == 0 || (!processor && result.exit_code == 1));
  if (!clean_exit) return Failure(request, ToolFailed(tool, result));
  if (!out) return Failure(request, BadOutput(tool, "is not UTF-8 text, so not JSON"));

  if (processor) {
    auto r = Base<ProcessorResponse>(request);
    if (Blank(*out)) {
      // Empty output leaves the entity as it was: its data goes back unchanged.
      if (request.payload) r.data = request.data();
      return ToJson(r);
    }
    auto parsed = ParseJsonBounded(*out, "tool '" + tool + "' output");
    if (!parsed) return Failure(request, BadOutput(tool, "is not JSON: " + parsed.error().message));
    if (!parsed->is_object()) {
      return Failure(request, BadOutput(tool, "must be a JSON object (the new entity data)"));
    }
    r.data = std::move(*parsed);
    return ToJson(r);
  }

  auto r = Base<CriteriaResponse>(request);
  if (Blank(*out)) {
    r.matches = result.exit_code == 0;
    return ToJson(r);
  }
  auto parsed = ParseJsonBounded(*out, "tool '" + tool + "' output");
  if (!parsed) return Failure(request, BadOutput(tool, "is not JSON: " + parsed.error().message));
  auto m = parsed->is_object() ? parsed->find("matches") : parsed->end();
  if (!parsed->is_object() || m == parsed->end() || !m->is_boolean()) {
    return Failure(request,
                   BadOutput(tool, "must be a JSON object {\"matches\": bool, \"reason\": …}"));
  }
  r.matches = m->get<bool>();
  if (auto reason = parsed->find("reason"); reason != parsed->end() && !reason->is_null()) {
    r.reason = reason->is_string() ? reason->get<std::string>() : reason->dump();
  }
  return ToJson(r);
}

}  // namespace edge::compute
