#include "agent/worker_rpc/rpc_envelope.h"

#include <cctype>
#include <cstdio>
#include <ctime>

#include "common/json_parse.h"

namespace edge::workerrpc {
namespace {

using nlohmann::json;

std::unexpected<Error> Bad(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

Status OptString(const json& obj, const char* key, const std::string& where, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return OkStatus();
  if (!it->is_string()) {
    return Bad(where + key + " must be a string, got " + it->type_name());
  }
  out = it->get<std::string>();
  return OkStatus();
}

}  // namespace

json LeaseToJson(const sandbox::Lease& lease) {
  return {{"resource_id", lease.resource_id},
          {"holder_id", lease.holder_id},
          {"generation", lease.generation},
          {"expires_at", FormatRfc3339(lease.expires_at)}};
}

namespace {

// The envelope out of the parsed body (what ParseRpcRequest checks after the JSON itself).
Result<RpcRequest> RequestFromJson(Result<json> j) {
  if (!j) return std::unexpected(j.error());
  if (!j->is_object()) {
    return Bad(std::string("request body must be a JSON object, got ") + j->type_name());
  }
  RpcRequest r;
  for (auto st : {OptString(*j, "id", "", r.id), OptString(*j, "method", "", r.method),
                  OptString(*j, "worker_id", "", r.worker_id)}) {
    if (!st) return std::unexpected(st.error());
  }
  if (r.method.empty()) return Bad("method is required");
  if (auto it = j->find("params"); it != j->end() && !it->is_null()) {
    if (!it->is_object()) {
      return Bad(std::string("params must be an object, got ") + it->type_name());
    }
    r.params = std::move(*it);
  }
  if (auto it = j->find("lease"); it != j->end() && !it->is_null()) {
    const json& l = *it;
    if (!l.is_object()) return Bad(std::string("lease must be an object, got ") + l.type_name());
    sandbox::Lease lease;
    std::string expires;
    for (auto st : {OptString(l, "resource_id", "lease.", lease.resource_id),
                    OptString(l, "holder_id", "lease.", lease.holder_id),
                    OptString(l, "expires_at", "lease.", expires)}) {
      if (!st) return std::unexpected(st.error());
    }
    if (auto g = l.find("generation"); g != l.end() && !g->is_null()) {
      if (!g->is_number_integer() ||
          (g->is_number_unsigned() && g->get<uint64_t>() > uint64_t(INT64_MAX))) {
        return Bad(std::string("lease.generation must be an integer, got ") + g->dump());
      }
      lease.generation = g->get<int64_t>();
    }
    if (expires.empty()) return Bad("lease.expires_at is required");
    auto t = ParseRfc3339(expires);
    if (!t) return Bad("lease.expires_at: " + t.error().message);
    lease.expires_at = *t;
    r.lease = std::move(lease);
  }
  return r;
}

}  // namespace

Result<RpcRequest> ParseRpcRequest(std::string_view body) {
  return RequestFromJson(ParseJsonBounded(body, "request body"));
}

Result<RpcRequest> ParseRpcRequestInPlace(std::string body) {
  return RequestFromJson(ParseJsonBoundedInPlace(body, "request body"));
}

unsigned HttpStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return 200;
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kLeaseRejected:
    case ErrorCode::kPathOutsideRoot:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kAborted:
    case ErrorCode::kAgentRestarted:
      return 409;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kDraining:
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kTimedOut:
      return 504;
    case ErrorCode::kCancelled:
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

std::optional<std::string> NdjsonChunkLine(std::string_view id, std::string_view worker_id,
                                           std::string_view stream, std::string_view data) {
  // Each part measured, and checked for UTF-8, in one scan; then one allocation for the line.
  std::optional<JsonSizedString> parts[] = {JsonStringSize(id), JsonStringSize(data),
                                            JsonStringSize(stream), JsonStringSize(worker_id)};
  // Keys in nlohmann's (sorted) order, so the bytes equal the json path's.
  static constexpr std::string_view kBefore[] = {
      "{\"id\":", ",\"result\":{\"data\":", ",\"stream\":", "},\"worker_id\":"};
  static constexpr std::string_view kEnd = "}\n";
  size_t total = kEnd.size();
  for (int i = 0; i < 4; ++i) {
    if (!parts[i]) return std::nullopt;
    total += kBefore[i].size() + parts[i]->bytes();
  }
  std::string line;
  line.reserve(total);
  for (int i = 0; i < 4; ++i) {
    line += kBefore[i];
    AppendJsonString(line, *parts[i]);
  }
  line += kEnd;
  return line;
}

json ResultEnvelope(std::string_view id, std::string_view worker_id, json result) {
  return {{"id", id}, {"worker_id", worker_id}, {"result", std::move(result)}};
}

json ErrorEnvelope(std::string_view id, std::string_view worker_id, const Error& error) {
  return {{"id", id},
          {"worker_id", worker_id},
          {"error", error.message},
          {"code", ErrorCodeName(error.code)}};
}

}  // namespace edge::workerrpc
