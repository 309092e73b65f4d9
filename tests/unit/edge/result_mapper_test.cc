// The edge door's mapping of sandbox::InvokeResult to EdgeResult (result_mapper.h, design.md
// §7): Ok / Err / TimedOut / Cancelled with exit code, duration, deadline and reason; the exec
// payload's outputs cut to their last 64 KiB with output_truncated; and the one table of error
// code names. Every expected value is written by hand from the header and design.md §7.
#include "agent/edge/result_mapper.h"

#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include "tests/unit/edge/test_support.h"

namespace edge::agentedge::testing {
namespace {

using namespace std::chrono_literals;
using google::protobuf::util::TimeUtil;
using json = nlohmann::json;

sandbox::InvokeResult Exec(int exit_code, std::string out, std::string err,
                           bool truncated = false) {
  sandbox::InvokeResult r;
  r.command_id = "cmd-1";
  r.outcome = sandbox::Outcome::kOk;
  r.exit_code = exit_code;
  r.payload = {{"exit_code", exit_code}, {"signal", 0}, {"stdout", out}, {"stderr", err}};
  r.duration = 1234ms;
  r.output_truncated = truncated;
  return r;
}

TEST(EdgeErrorCodeTest, StableNamesOfDesignSection7) {
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kNotFound), "NOT_FOUND");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kAlreadyExists), "ALREADY_EXISTS");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kPermissionDenied), "PERMISSION_DENIED");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kLeaseRejected), "LEASE_REJECTED");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kPathOutsideRoot), "PATH_OUTSIDE_ROOT");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kTimedOut), "TIMED_OUT");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kCancelled), "CANCELLED");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kDraining), "DRAINING");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kAborted), "ABORTED");
  EXPECT_EQ(EdgeErrorCode(ErrorCode::kInternal), "INTERNAL");
  // An out-of-range value does not crash and does not invent a name.
  EXPECT_EQ(EdgeErrorCode(static_cast<ErrorCode>(999)), "INTERNAL");
}

TEST(ToEdgeResultTest, OkCarriesExitCodeDurationAndPayload) {
  auto r = ToEdgeResult(Exec(0, "hello\n", "warn\n"), std::nullopt);
  ASSERT_TRUE(r.has_ok()) << r.DebugString();
  EXPECT_EQ(r.ok().exit_code(), 0);
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(r.ok().duration()), 1234);
  const json p = PayloadJson(r);
  EXPECT_EQ(p["stdout"], "hello\n");
  EXPECT_EQ(p["stderr"], "warn\n");
  EXPECT_EQ(p["output_truncated"], false);
  EXPECT_EQ(p["exit_code"], 0.0);  // Struct numbers are doubles
}

TEST(ToEdgeResultTest, NonZeroExitIsStillOk) {
  auto r = ToEdgeResult(Exec(3, "", "boom"), std::nullopt);
  ASSERT_TRUE(r.has_ok()) << r.DebugString();
  EXPECT_EQ(r.ok().exit_code(), 3);
  EXPECT_EQ(PayloadJson(r)["stderr"], "boom");

  auto signalled = Exec(-1, "", "");
  signalled.signal = 9;
  auto s = ToEdgeResult(signalled, std::nullopt);
  ASSERT_TRUE(s.has_ok());
  EXPECT_EQ(s.ok().exit_code(), -1);
}

TEST(ToEdgeResultTest, ExecutorTruncationIsReported) {
  auto r = ToEdgeResult(Exec(0, "short", "", /*truncated=*/true), std::nullopt);
  ASSERT_TRUE(r.has_ok());
  const json p = PayloadJson(r);
  EXPECT_EQ(p["output_truncated"], true);
  EXPECT_EQ(p["stdout"], "short");
}

TEST(ToEdgeResultTest, OutputsKeepOnlyTheirLast64KiB) {
  const std::string head(1000, 'h');
  const std::string tail(64 * 1024, 't');
  auto r = ToEdgeResult(Exec(0, head + tail, "small"), std::nullopt);
  ASSERT_TRUE(r.has_ok());
  const json p = PayloadJson(r);
  EXPECT_EQ(p["stdout"].get<std::string>(), tail);
  EXPECT_EQ(p["stderr"], "small");
  EXPECT_EQ(p["output_truncated"], true);

  // Exactly 64 KiB is not cut.
  auto exact = ToEdgeResult(Exec(0, tail, ""), std::nullopt);
  EXPECT_EQ(PayloadJson(exact)["stdout"].get<std::string>().size(), 64u * 1024);
  EXPECT_EQ(PayloadJson(exact)["output_truncated"], false);

  // stderr alone over the limit also sets it.
  auto err = ToEdgeResult(Exec(0, "", std::string(70 * 1024, 'e')), std::nullopt);
  EXPECT_EQ(PayloadJson(err)["stderr"].get<std::string>().size(), 64u * 1024);
  EXPECT_EQ(PayloadJson(err)["output_truncated"], true);
}

TEST(ToEdgeResultTest, NonExecPayloadsAreObjects) {
  sandbox::InvokeResult r;
  r.outcome = sandbox::Outcome::kOk;
  r.payload = {{"os", "linux"}, {"cpus", 4}};
  auto obj = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(obj.has_ok());
  EXPECT_EQ(PayloadJson(obj), (json{{"os", "linux"}, {"cpus", 4.0}}));  // no output_truncated

  r.payload = json::array({"a", "b"});
  auto arr = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(arr.has_ok());
  EXPECT_EQ(PayloadJson(arr), (json{{"value", {"a", "b"}}}));

  r.payload = nullptr;
  auto none = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(none.has_ok());
  EXPECT_EQ(PayloadJson(none), json::object());
}

TEST(ToEdgeResultTest, ErrCarriesCodeMessageAndExitCode) {
  sandbox::InvokeResult r;
  r.outcome = sandbox::Outcome::kError;
  r.error = {ErrorCode::kPathOutsideRoot, "path \"../etc\": outside the sandbox root"};
  r.exit_code = 0;
  auto e = ToEdgeResult(r, 30s);
  ASSERT_TRUE(e.has_err()) << e.DebugString();
  EXPECT_EQ(e.err().code(), "PATH_OUTSIDE_ROOT");
  EXPECT_EQ(e.err().message(), "path \"../etc\": outside the sandbox root");
  EXPECT_EQ(e.err().exit_code(), 0);

  r.error = {ErrorCode::kLeaseRejected, "lease generation 3 < 5"};
  r.exit_code = 7;
  auto l = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(l.has_err());
  EXPECT_EQ(l.err().code(), "LEASE_REJECTED");
  EXPECT_EQ(l.err().exit_code(), 7);
}

TEST(ToEdgeResultTest, TimedOutReportsTheDeadlineOrElseTheDuration) {
  sandbox::InvokeResult r;
  r.outcome = sandbox::Outcome::kTimedOut;
  r.duration = 5012ms;
  auto with = ToEdgeResult(r, 5s);
  ASSERT_TRUE(with.has_timed_out()) << with.DebugString();
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(with.timed_out().deadline()), 5000);
  auto without = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(without.has_timed_out());
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(without.timed_out().deadline()), 5012);
  // A security context's cap (2 s) ended it before the requested 5 s: the cap is reported.
  r.timeout = 2000ms;
  r.duration = 2004ms;
  auto capped = ToEdgeResult(r, 5s);
  ASSERT_TRUE(capped.has_timed_out());
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(capped.timed_out().deadline()), 2000);
}

TEST(ToEdgeResultTest, CancelledCarriesTheReason) {
  sandbox::InvokeResult r;
  r.outcome = sandbox::Outcome::kCancelled;
  r.reason = "controller sent Cancel";
  auto c = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(c.has_cancelled()) << c.DebugString();
  EXPECT_EQ(c.cancelled().reason(), "controller sent Cancel");
  r.reason.clear();
  auto d = ToEdgeResult(r, std::nullopt);
  ASSERT_TRUE(d.has_cancelled());
  EXPECT_FALSE(d.cancelled().reason().empty());
}

TEST(ErrorResultTest, RefusalByTheDoor) {
  auto r = ErrorResult(ErrorCode::kDraining, "agent is draining");
  ASSERT_TRUE(r.has_err());
  EXPECT_EQ(r.err().code(), "DRAINING");
  EXPECT_EQ(r.err().message(), "agent is draining");
  EXPECT_EQ(r.err().exit_code(), 0);
}

TEST(TailUtf8Test, CutsAtACharacterBoundary) {
  EXPECT_EQ(TailUtf8("abcdef", 3), "def");
  EXPECT_EQ(TailUtf8("abc", 3), "abc");
  EXPECT_EQ(TailUtf8("abc", 10), "abc");
  EXPECT_EQ(TailUtf8("abc", 0), "");
  // "x€y": € is E2 82 AC. The last 3 bytes "82 AC y" start inside it: skip to "y".
  EXPECT_EQ(TailUtf8("x\xE2\x82\xACy", 3), "y");
  EXPECT_EQ(TailUtf8("x\xE2\x82\xACy", 4), "\xE2\x82\xACy");
  // "é" (C3 A9) at the cut: 2 bytes of "éz" would start at A9.
  EXPECT_EQ(TailUtf8("a\xC3\xA9z", 2), "z");
}

TEST(TrimOutputsTest, AnExecutorTailMarkIsKept) {
  // The executor kept only a tail (short enough here) and marked it: still truncated.
  EXPECT_EQ(TrimOutputs(json{{"stdout", "end"}, {"output_truncated", true}}, false, 4),
            (json{{"stdout", "end"}, {"output_truncated", true}}));
  // A tool's own non-boolean field of that name is not taken for the mark.
  EXPECT_EQ(TrimOutputs(json{{"stdout", "end"}, {"output_truncated", "yes"}}, false, 4),
            (json{{"stdout", "end"}, {"output_truncated", false}}));
}

TEST(TrimOutputsTest, MarksOnlyOutputPayloads) {
  EXPECT_EQ(TrimOutputs(json{{"size", 3}}, false, 4), (json{{"size", 3}}));
  EXPECT_EQ(TrimOutputs(json{{"stdout", "abcdef"}}, false, 4),
            (json{{"stdout", "cdef"}, {"output_truncated", true}}));
  EXPECT_EQ(TrimOutputs(json{{"stdout", "ab"}, {"stderr", "cd"}}, false, 4),
            (json{{"stdout", "ab"}, {"stderr", "cd"}, {"output_truncated", false}}));
  EXPECT_EQ(TrimOutputs(json{{"stdout", "ab"}}, true, 4),
            (json{{"stdout", "ab"}, {"output_truncated", true}}));
  EXPECT_EQ(TrimOutputs(json("text"), true, 4), json("text"));
}

TEST(StructJsonTest, RoundTripAndErrorsNameTheField) {
  auto s = JsonToStruct(json{{"command", "ls"}, {"n", 2}, {"env", {{"A", "b"}}}}, "args");
  ASSERT_TRUE(s) << s.error().ToString();
  auto back = StructToJson(*s, "payload");
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, (json{{"command", "ls"}, {"n", 2.0}, {"env", {{"A", "b"}}}}));

  auto bad = JsonToStruct(json::array({1, 2}), "payload");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("payload"), std::string::npos) << bad.error().message;
}

TEST(ToEdgeResultTest, BinaryOutputStillMakesAResult) {
  // A stdout that is not UTF-8 (binary) must not turn the result into an error.
  auto r = ToEdgeResult(Exec(0, std::string("ok\xff\xfe", 4), ""), std::nullopt);
  ASSERT_TRUE(r.has_ok()) << r.DebugString();
  const std::string out = PayloadJson(r)["stdout"].get<std::string>();
  EXPECT_EQ(out.substr(0, 2), "ok");
}

TEST(DescribeResultTest, NamesTheOutcome) {
  EXPECT_EQ(DescribeResult(ToEdgeResult(Exec(0, "", ""), std::nullopt)).rfind("ok", 0), 0u);
  const std::string err = DescribeResult(ErrorResult(ErrorCode::kNotFound, "no tool"));
  EXPECT_EQ(err.rfind("err", 0), 0u) << err;
  EXPECT_NE(err.find("NOT_FOUND"), std::string::npos) << err;
  EXPECT_EQ(err.find("no tool"), std::string::npos) << "messages stay out of the summary";
  sandbox::InvokeResult t;
  t.outcome = sandbox::Outcome::kTimedOut;
  EXPECT_EQ(DescribeResult(ToEdgeResult(t, 1s)), "timed_out");
  sandbox::InvokeResult c;
  c.outcome = sandbox::Outcome::kCancelled;
  EXPECT_EQ(DescribeResult(ToEdgeResult(c, std::nullopt)).rfind("cancelled", 0), 0u);
}

}  // namespace
}  // namespace edge::agentedge::testing
