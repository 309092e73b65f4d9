#include "sandbox/executor_types.h"

namespace edge::sandbox {

using json = nlohmann::json;
using std::chrono::milliseconds;

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kError:
      return "error";
    case Outcome::kTimedOut:
      return "timed_out";
    case Outcome::kCancelled:
      return "cancelled";
  }
  return "error";
}

json InvokeResult::ToJson() const {
  return json{{"command_id", command_id},
              {"outcome", OutcomeName(outcome)},
              {"exit_code", exit_code},
              {"signal", signal},
              {"payload", payload},
              {"error_code", ErrorCodeName(error.code)},
              {"error_message", error.message},
              {"duration_ms", duration.count()},
              {"timeout_ms", timeout.count()},
              {"output_truncated", output_truncated},
              {"peak_rss_kb", peak_rss_kb},
              {"reason", reason}};
}

Result<InvokeResult> InvokeResult::FromJson(const json& j) {
  try {
    InvokeResult r;
    r.command_id = j.at("command_id").get<std::string>();
    std::string outcome = j.at("outcome").get<std::string>();
    if (outcome == "ok") {
      r.outcome = Outcome::kOk;
    } else if (outcome == "error") {
      r.outcome = Outcome::kError;
    } else if (outcome == "timed_out") {
      r.outcome = Outcome::kTimedOut;
    } else if (outcome == "cancelled") {
      r.outcome = Outcome::kCancelled;
    } else {
      return MakeError(ErrorCode::kInvalidArgument, "outcome '" + outcome + "' is not known");
    }
    r.exit_code = j.at("exit_code").get<int>();
    r.signal = j.at("signal").get<int>();
    r.payload = j.at("payload");
    r.error.code = ErrorCodeFromName(j.at("error_code").get<std::string>());
    r.error.message = j.at("error_message").get<std::string>();
    r.duration = milliseconds(j.at("duration_ms").get<int64_t>());
    r.timeout = milliseconds(j.value("timeout_ms", int64_t{0}));  // absent in older entries
    r.output_truncated = j.at("output_truncated").get<bool>();
    r.peak_rss_kb = j.at("peak_rss_kb").get<long>();
    r.reason = j.at("reason").get<std::string>();
    return r;
  } catch (const json::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("stored result: ") + e.what());
  }
}

}  // namespace edge::sandbox
