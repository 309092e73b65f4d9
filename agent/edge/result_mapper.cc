#include "agent/edge/result_mapper.h"

#include <google/protobuf/util/time_util.h>

#include "common/utf8.h"

namespace edge::agentedge {
namespace {

namespace pb = aegis::cluster::v1;
using google::protobuf::util::TimeUtil;

}  // namespace

std::string_view EdgeErrorCode(ErrorCode code) {
  // The edge wire carries the executor's stable names (design.md §7) as they are.
  return ErrorCodeName(code);
}

std::string TailUtf8(std::string_view s, size_t limit) {
  return std::string(s.substr(Utf8TailStart(s, limit)));
}

nlohmann::json TrimOutputs(nlohmann::json payload, bool executor_truncated, size_t limit) {
  if (!payload.is_object()) return payload;
  // The executor marks a payload whose output it kept only the tail of.
  const auto marked = payload.find("output_truncated");
  bool cut = executor_truncated ||
             (marked != payload.end() && marked->is_boolean() && marked->get<bool>());
  for (const char* name : {"stdout", "stderr"}) {
    auto it = payload.find(name);
    if (it == payload.end() || !it->is_string()) continue;
    const auto& text = it->get_ref<const std::string&>();
    if (text.size() > limit) {
      *it = TailUtf8(text, limit);
      cut = true;
    }
  }
  if (payload.contains("stdout") || payload.contains("stderr") || cut) {
    payload["output_truncated"] = cut;
  }
  return payload;
}

pb::EdgeResult ErrorResult(ErrorCode code, std::string message) {
  pb::EdgeResult r;
  auto* err = r.mutable_err();
  err->set_code(std::string(EdgeErrorCode(code)));
  err->set_message(std::move(message));
  return r;
}

pb::EdgeResult ToEdgeResult(const sandbox::InvokeResult& result,
                            std::optional<std::chrono::milliseconds> deadline) {
  pb::EdgeResult r;
  switch (result.outcome) {
    case sandbox::Outcome::kOk: {
      auto* ok = r.mutable_ok();
      ok->set_exit_code(result.exit_code);
      *ok->mutable_duration() = TimeUtil::MillisecondsToDuration(result.duration.count());
      nlohmann::json payload = result.payload.is_null() ? nlohmann::json::object() : result.payload;
      if (!payload.is_object()) payload = nlohmann::json{{"value", payload}};
      payload = TrimOutputs(std::move(payload), result.output_truncated);
      auto s = JsonToStruct(payload, "payload");
      if (!s) return ErrorResult(ErrorCode::kInternal, s.error().message);
      ok->mutable_payload()->PackFrom(*s);
      return r;
    }
    case sandbox::Outcome::kError: {
      auto* err = r.mutable_err();
      err->set_code(std::string(EdgeErrorCode(result.error.code)));
      err->set_message(result.error.message);
      err->set_exit_code(result.exit_code);
      return r;
    }
    case sandbox::Outcome::kTimedOut: {
      // The limit that ended it: the executor's (the deadline, or a security context's
      // tighter cap), else the requested deadline, else how long it ran.
      const auto d =
          result.timeout.count() > 0 ? result.timeout : deadline.value_or(result.duration);
      *r.mutable_timed_out()->mutable_deadline() = TimeUtil::MillisecondsToDuration(d.count());
      return r;
    }
    case sandbox::Outcome::kCancelled:
      r.mutable_cancelled()->set_reason(result.reason.empty() ? "cancelled" : result.reason);
      return r;
  }
  return ErrorResult(ErrorCode::kInternal, "unknown outcome");
}

std::string DescribeResult(const pb::EdgeResult& r) {
  switch (r.outcome_case()) {
    case pb::EdgeResult::kOk:
      return "ok exit " + std::to_string(r.ok().exit_code());
    case pb::EdgeResult::kErr:
      return "err " + r.err().code();
    case pb::EdgeResult::kTimedOut:
      return "timed_out";
    case pb::EdgeResult::kCancelled:
      return "cancelled (" + r.cancelled().reason() + ")";
    default:
      return "empty";
  }
}

}  // namespace edge::agentedge
