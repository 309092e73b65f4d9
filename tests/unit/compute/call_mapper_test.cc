// CallMapper: a request becomes the InvokeRequest of its mapped tool (stdin, env, timeout,
// context, cap); the tool's result becomes the response (processor data, criteria by exit
// code or JSON, every failure success:false with the request's requestId). The last test runs
// a real Executor: a config tool gets the request on stdin and the auth attributes in its
// environment (the InvokeRequest::stdin_data / env addition).
#include "agent/compute/call_mapper.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <thread>

#include "common/clock.h"
#include "sandbox/executor.h"
#include "tests/support/temp_dir.h"

namespace edge::compute {
namespace {

using nlohmann::json;
using sandbox::InvokeResult;
using sandbox::Outcome;
using namespace std::chrono_literals;

config::ComputeConfig Config() {
  config::ComputeConfig c;
  c.max_concurrent_calls = 3;
  c.processors["enrich"] = config::ComputeHandler{"enrich-tool", 5s, "ops"};
  c.criteria["is-big"] = config::ComputeHandler{"big-tool", 2s, ""};
  return c;
}

CalculationRequest Request(CalculationRequest::Kind kind, const std::string& name) {
  const bool p = kind == CalculationRequest::Kind::kProcessor;
  json body = {{"id", "req-1"},
               {"requestId", "req-1"},
               {"entityId", "ent-1"},
               {p ? "processorName" : "criteriaName", name},
               {"payload", {{"type", "JSON"}, {"data", {{"n", 1}}}}}};
  auto r = ParseCalculationRequest(body, kind);
  EXPECT_TRUE(r) << r.error().ToString();
  return *r;
}

InvokeResult Exited(int code, const std::string& out, const std::string& err = "") {
  InvokeResult r;
  r.exit_code = code;
  r.payload = json{{"exit_code", code}, {"signal", 0}, {"stdout", out}, {"stderr", err}};
  return r;
}

TEST(CallMapper, RequestBecomesTheMappedToolsInvocation) {
  CallMapper m(Config());
  auto inv = m.ToInvoke(
      Request(CalculationRequest::Kind::kProcessor, "enrich"),
      {{"authtype", "user"}, {"authid", "u-1"}, {"authclaims", "ROLE_M2M"}, {"other", "x"}});
  ASSERT_TRUE(inv) << inv.error().ToString();
  EXPECT_EQ(inv->tool, "enrich-tool");
  EXPECT_EQ(inv->command_id, "compute:req-1");
  EXPECT_EQ(inv->security_context, "ops");
  EXPECT_EQ(inv->timeout, std::optional<std::chrono::milliseconds>(5s));
  ASSERT_TRUE(inv->door_limit);
  EXPECT_EQ(inv->door_limit->door, "compute");
  EXPECT_EQ(inv->door_limit->key, "compute.max_concurrent_calls");
  EXPECT_EQ(inv->door_limit->max_concurrent, 3u);
  ASSERT_TRUE(inv->stdin_data);
  EXPECT_EQ(json::parse(*inv->stdin_data)["payload"]["data"]["n"], 1);
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_AUTHTYPE"), "user");
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_AUTHID"), "u-1");
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_AUTHCLAIMS"), "ROLE_M2M");
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_KIND"), "processor");
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_NAME"), "enrich");
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_REQUEST_ID"), "req-1");
  EXPECT_EQ(inv->env.at("EDGE_COMPUTE_ENTITY_ID"), "ent-1");
  EXPECT_FALSE(inv->env.contains("EDGE_COMPUTE_OTHER"));
}

TEST(CallMapper, UnknownHandlerIsNotFoundNamingIt) {
  CallMapper m(Config());
  auto p = m.ToInvoke(Request(CalculationRequest::Kind::kProcessor, "is-big"), {});
  ASSERT_FALSE(p);  // a criterion's name is no processor
  EXPECT_EQ(p.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(p.error().message,
            "processor 'is-big' is not configured on this member (compute.processors)");
  auto c = m.ToInvoke(Request(CalculationRequest::Kind::kCriteria, "nope"), {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "criterion 'nope' is not configured on this member (compute.criteria)");
  const json f = CallMapper::Failure(Request(CalculationRequest::Kind::kCriteria, "nope"),
                                     ErrorFor(c.error()));
  EXPECT_EQ(f["success"], false);
  EXPECT_EQ(f["requestId"], "req-1");
  EXPECT_EQ(f["entityId"], "ent-1");
  EXPECT_EQ(f["error"]["code"], "NOT_FOUND");
  EXPECT_EQ(f["error"]["retryable"], false);
  EXPECT_FALSE(f.contains("matches"));
}

TEST(CallMapper, TooLargeRequestIsRefused) {
  CallMapper m(Config(), 64);
  auto inv = m.ToInvoke(Request(CalculationRequest::Kind::kProcessor, "enrich"), {});
  ASSERT_FALSE(inv);
  EXPECT_EQ(inv.error().code, ErrorCode::kResourceExhausted);
}

TEST(CallMapper, ProcessorOutputObjectIsTheNewData) {
  CallMapper m(Config());
  auto req = Request(CalculationRequest::Kind::kProcessor, "enrich");
  json r = m.Answer(req, Exited(0, R"({"n": 2, "extra": "yes"})"));
  EXPECT_EQ(r["success"], true);
  EXPECT_EQ(r["requestId"], "req-1");
  EXPECT_EQ(r["entityId"], "ent-1");
  EXPECT_EQ(r["payload"], json::parse(R"({"type":"JSON","data":{"n":2,"extra":"yes"}})"));
  EXPECT_FALSE(r.contains("error"));
  EXPECT_EQ(r["id"].get<std::string>().size(), 36u);
}

TEST(CallMapper, ProcessorEmptyOutputLeavesTheEntityUnchanged) {
  CallMapper m(Config());
  json r = m.Answer(Request(CalculationRequest::Kind::kProcessor, "enrich"), Exited(0, " \n"));
  EXPECT_EQ(r["success"], true);
  EXPECT_EQ(r["payload"]["data"], json::parse(R"({"n":1})"));
}

TEST(CallMapper, ProcessorFailures) {
  CallMapper m(Config());
  auto req = Request(CalculationRequest::Kind::kProcessor, "enrich");
  json failed = m.Answer(req, Exited(3, "", "boom\n"));
  EXPECT_EQ(failed["success"], false);
  EXPECT_EQ(failed["requestId"], "req-1");
  EXPECT_EQ(failed["error"], json::parse(R"({"code":"TOOL_FAILED",
      "message":"tool 'enrich-tool' exited with code 3: boom","retryable":false})"));
  json not_json = m.Answer(req, Exited(0, "hello"));
  EXPECT_EQ(not_json["success"], false);
  EXPECT_EQ(not_json["error"]["code"], "INVALID_OUTPUT");
  json array = m.Answer(req, Exited(0, "[1,2]"));
  EXPECT_EQ(array["error"]["code"], "INVALID_OUTPUT");
  // A processor that exits 1 failed (only criteria read 1 as "no match").
  EXPECT_EQ(m.Answer(req, Exited(1, R"({"n":3})"))["error"]["code"], "TOOL_FAILED");
  InvokeResult signalled = Exited(-1, "");
  signalled.signal = 9;
  EXPECT_EQ(m.Answer(req, signalled)["error"]["message"],
            "tool 'enrich-tool' was ended by signal 9");
  InvokeResult bytes = Exited(0, "");
  bytes.payload["stdout_base64"] = "/w==";
  EXPECT_EQ(m.Answer(req, bytes)["error"]["code"], "INVALID_OUTPUT");
  InvokeResult cut = Exited(0, "{}");
  cut.output_truncated = true;
  EXPECT_EQ(m.Answer(req, cut)["error"]["code"], "INVALID_OUTPUT");
}

TEST(CallMapper, TimeoutCancelAndRefusalsMapThroughTheTable) {
  CallMapper m(Config());
  auto req = Request(CalculationRequest::Kind::kProcessor, "enrich");
  InvokeResult timed;
  timed.outcome = Outcome::kTimedOut;
  timed.timeout = 5000ms;
  timed.error = Error{ErrorCode::kTimedOut, "deadline"};
  json t = m.Answer(req, timed);
  EXPECT_EQ(t["success"], false);
  EXPECT_EQ(t["error"], json::parse(R"({"code":"TIMED_OUT",
      "message":"tool 'enrich-tool' did not finish within 5000 ms","retryable":true})"));
  InvokeResult busy;
  busy.outcome = Outcome::kError;
  busy.error = Error{ErrorCode::kResourceExhausted, "compute.max_concurrent_calls 3 commands"};
  json b = m.Answer(req, busy);
  EXPECT_EQ(b["success"], false);
  EXPECT_EQ(b["error"]["code"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(b["error"]["retryable"], true);
  InvokeResult denied;
  denied.outcome = Outcome::kError;
  denied.error = Error{ErrorCode::kPermissionDenied, "context ops does not allow it"};
  EXPECT_EQ(m.Answer(req, denied)["error"]["retryable"], false);
  InvokeResult cancelled;
  cancelled.outcome = Outcome::kCancelled;
  cancelled.reason = "agent stopping";
  EXPECT_EQ(m.Answer(req, cancelled)["error"]["code"], "CANCELLED");
  EXPECT_EQ(ErrorFor(Error{ErrorCode::kDraining, "d"}).retryable, std::optional<bool>(true));
  EXPECT_EQ(ErrorFor(Error{ErrorCode::kInvalidArgument, "d"}).retryable,
            std::optional<bool>(false));
}

TEST(CallMapper, CriteriaByExitCodeAndByJson) {
  CallMapper m(Config());
  auto req = Request(CalculationRequest::Kind::kCriteria, "is-big");
  json yes = m.Answer(req, Exited(0, ""));
  EXPECT_EQ(yes["success"], true);
  EXPECT_EQ(yes["matches"], true);
  json no = m.Answer(req, Exited(1, ""));
  EXPECT_EQ(no["success"], true);
  EXPECT_EQ(no["matches"], false);
  json by_json = m.Answer(req, Exited(0, R"({"matches": false, "reason": "n is 1"})"));
  EXPECT_EQ(by_json["matches"], false);
  EXPECT_EQ(by_json["reason"], "n is 1");
  EXPECT_EQ(m.Answer(req, Exited(2, ""))["error"]["code"], "TOOL_FAILED");
  EXPECT_EQ(m.Answer(req, Exited(0, "maybe"))["error"]["code"], "INVALID_OUTPUT");
  EXPECT_EQ(m.Answer(req, Exited(0, R"({"matches":"yes"})"))["error"]["code"], "INVALID_OUTPUT");
  EXPECT_FALSE(m.Answer(req, Exited(0, R"({"matches":"yes"})")).contains("matches"));
}

// The sandbox addition: a config tool gets InvokeRequest::stdin_data on stdin and ::env in its
// environment, through the real executor.
TEST(CallMapper, RealExecutorGivesTheToolStdinAndEnv) {
  testing::TempDir dir("compute-exec");
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread t([&] { io.run(); });
  {
    sandbox::ExecutorOptions eo;
    eo.data_dir = dir.path();
    eo.own_id = "n1";
    eo.kill_grace = 200ms;
    eo.pids_cgroup_root = "";
    eo.tools["echo-env"] = sandbox::ToolConfig{
        {"sh", "-c", "cat; printf ' %s' \"$EDGE_COMPUTE_AUTHID\" \"$EDGE_COMPUTE_KIND\""}, 0ms, ""};
    SystemClock clock;
    auto ex = sandbox::Executor::Open(io, clock, eo);
    ASSERT_TRUE(ex) << ex.error().ToString();
    config::ComputeConfig cc;
    cc.processors["p"] = config::ComputeHandler{"echo-env", 10s, ""};
    CallMapper m(cc);
    auto inv = m.ToInvoke(Request(CalculationRequest::Kind::kProcessor, "p"), {{"authid", "u-9"}});
    ASSERT_TRUE(inv);
    std::promise<InvokeResult> done;
    (*ex)->Invoke(std::move(*inv), {}, nullptr, [&](InvokeResult r) { done.set_value(r); });
    InvokeResult r = done.get_future().get();
    ASSERT_EQ(r.outcome, Outcome::kOk) << r.error.ToString();
    const std::string out = r.payload["stdout"];
    ASSERT_NE(out.rfind(' '), std::string::npos);
    EXPECT_TRUE(out.ends_with(" u-9 processor")) << out;
    EXPECT_EQ(json::parse(out.substr(0, out.size() - std::string(" u-9 processor").size()))["id"],
              "req-1");
  }
  work.reset();
  io.stop();
  t.join();
}

}  // namespace
}  // namespace edge::compute
