// The worker RPC envelope parser, RFC 3339 times and the error table.
#include <gtest/gtest.h>

#include <fstream>

#include "agent/worker_rpc/rpc_envelope.h"
#include "tests/support/manual_clock.h"
#include "tests/support/temp_dir.h"

namespace edge::workerrpc {
namespace {

using namespace std::chrono;

TEST(RpcEnvelope, ParsesTheContractExample) {
  auto r = ParseRpcRequest(R"({
    "id": "req-123", "method": "worker.spawn", "worker_id": "worker-a",
    "lease": {"resource_id": "sb-abc123", "holder_id": "worker-a", "generation": 4,
              "expires_at": "2026-05-09T10:31:00Z"},
    "params": {"sandbox_id": "sb-abc123"}, "future_key": 1})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, "req-123");
  EXPECT_EQ(r->method, "worker.spawn");
  EXPECT_EQ(r->worker_id, "worker-a");
  ASSERT_TRUE(r->lease);
  EXPECT_EQ(r->lease->resource_id, "sb-abc123");
  EXPECT_EQ(r->lease->holder_id, "worker-a");
  EXPECT_EQ(r->lease->generation, 4);
  EXPECT_EQ(r->lease->expires_at, Clock::WallTime(seconds(1778322660)));
  EXPECT_EQ(r->params["sandbox_id"], "sb-abc123");
}

TEST(RpcEnvelope, RefusesWrongTypesNamingTheField) {
  struct Case {
    std::string body, fragment;
  };
  for (const auto& c : std::vector<Case>{
           {"", "request body"},
           {"[]", "must be a JSON object"},
           {R"({"method":1})", "method must be a string"},
           {R"({"method":"m","id":2})", "id must be a string"},
           {R"({"method":"m","worker_id":[]})", "worker_id must be a string"},
           {R"({"method":"m","params":"x"})", "params must be an object"},
           {R"({"method":"m","lease":1})", "lease must be an object"},
           {R"({"method":"m","lease":{"generation":1.5,"expires_at":"2026-01-01T00:00:00Z"}})",
            "lease.generation"},
           {R"({"method":"m","lease":{"generation":1}})", "lease.expires_at is required"},
           {R"({"method":"m","lease":{"expires_at":"2026-13-01T00:00:00Z"}})", "RFC 3339"},
           {R"({"id":"x"})", "method is required"},
           {std::string(100, '[') + std::string(100, ']'), "nest"},
       }) {
    auto r = ParseRpcRequest(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.fragment), std::string::npos)
        << c.body << " -> " << r.error().message;
  }
}

TEST(RpcEnvelope, Rfc3339) {
  auto base = Clock::WallTime(seconds(1778322660));
  EXPECT_EQ(*ParseRfc3339("2026-05-09T10:31:00Z"), base);
  EXPECT_EQ(*ParseRfc3339("2026-05-09T12:31:00+02:00"), base);
  EXPECT_EQ(*ParseRfc3339("2026-05-09T09:31:00-01:00"), base);
  EXPECT_EQ(*ParseRfc3339("2026-05-09T10:31:00.5Z"), base + milliseconds(500));
  EXPECT_EQ(*ParseRfc3339("2026-05-09T10:31:00.123456789Z"), base + nanoseconds(123456789));
  for (auto bad :
       {"2026-05-09", "2026-05-09T10:31:00", "2026-05-09 10:31:00Z", "2026-05-09T25:31:00Z",
        "2026-05-09T10:31:00.Z", "2026-05-09T10:31:00Zjunk", "2026-05-09T10:31:00+0200"}) {
    EXPECT_FALSE(ParseRfc3339(bad)) << bad;
  }
  EXPECT_EQ(FormatRfc3339(base), "2026-05-09T10:31:00Z");
  EXPECT_EQ(FormatRfc3339(base + milliseconds(250)), "2026-05-09T10:31:00.250Z");
}

TEST(RpcEnvelope, ErrorTable) {
  EXPECT_EQ(HttpStatus(ErrorCode::kInvalidArgument), 400u);
  EXPECT_EQ(HttpStatus(ErrorCode::kUnauthenticated), 401u);
  EXPECT_EQ(HttpStatus(ErrorCode::kLeaseRejected), 403u);
  EXPECT_EQ(HttpStatus(ErrorCode::kNotFound), 404u);
  EXPECT_EQ(HttpStatus(ErrorCode::kFailedPrecondition), 409u);
  EXPECT_EQ(HttpStatus(ErrorCode::kDraining), 503u);
  EXPECT_EQ(HttpStatus(ErrorCode::kTimedOut), 504u);
  EXPECT_EQ(HttpStatus(ErrorCode::kInternal), 500u);
  auto e = ErrorEnvelope("i", "w", {ErrorCode::kNotFound, "gone"});
  EXPECT_EQ(e, nlohmann::json(
                   {{"id", "i"}, {"worker_id", "w"}, {"error", "gone"}, {"code", "NOT_FOUND"}}));
}

TEST(NdjsonChunkLine, SameBytesAsTheJsonPathAndNulloptForBinary) {
  for (const std::string& data : {std::string("hello\n"), std::string("a\"b\\c\x01\t"),
                                  std::string("caf\xc3\xa9"), std::string(70000, 'y')}) {
    auto line = NdjsonChunkLine("req-1", "worker-a", "stdout", data);
    ASSERT_TRUE(line.has_value());
    const std::string want =
        ResultEnvelope("req-1", "worker-a", {{"stream", "stdout"}, {"data", data}}).dump() + "\n";
    EXPECT_EQ(*line, want);
  }
  // By hand, for one small chunk.
  EXPECT_EQ(
      *NdjsonChunkLine("7", "w", "stderr", "x\n"),
      "{\"id\":\"7\",\"result\":{\"data\":\"x\\n\",\"stream\":\"stderr\"},\"worker_id\":\"w\"}\n");
  EXPECT_FALSE(NdjsonChunkLine("1", "w", "stdout", "\xff\xfe").has_value());
  EXPECT_FALSE(NdjsonChunkLine("1", "w", "stdout", "ok\xc3").has_value());  // cut character
}

}  // namespace
}  // namespace edge::workerrpc
