// The rawp-dps-1.0 frame parser and writer (wire.md §5.3), with vectors written by hand from
// contract document 002's envelope.
#include "controller/sessions/rawp_frame.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/manual_clock.h"

namespace edge::controller {
namespace {

constexpr const char* kSession = "5b0c8f0e-1d2a-4c3b-9e4f-0a1b2c3d4e5f";
constexpr const char* kMsg = "0f8fad5b-d9cb-469f-a165-70867728950e";

std::string Frame(const std::string& type, const std::string& payload,
                  const std::string& extra = "") {
  return std::string(R"({"v":"rawp-dps-1.0","type":")") + type + R"(","message_id":")" + kMsg +
         R"(","timestamp":"2026-11-25T01:02:03Z","session_id":")" + kSession + "\"" + extra +
         R"(,"payload":)" + payload + "}";
}

std::string ErrorOf(std::string_view text) {
  auto f = ParseControlFrame(text, kSession, 16);
  EXPECT_FALSE(f.has_value()) << text;
  if (f) return "";
  EXPECT_EQ(f.error().code, ErrorCode::kInvalidArgument);
  return f.error().message;
}

TEST(RawpFrameTest, EachControlTypeParsesWithItsPayload) {
  auto p =
      ParseControlFrame(Frame("control.prompt.request", R"({"text":"hello","tools":["file.read"]})",
                              R"(,"turn_id":"t-1")"),
                        kSession);
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(p->type, "control.prompt.request");
  EXPECT_EQ(p->message_id, kMsg);
  EXPECT_EQ(p->timestamp, "2026-11-25T01:02:03Z");
  EXPECT_EQ(p->session_id, kSession);
  EXPECT_EQ(p->turn_id, "t-1");
  EXPECT_EQ(p->payload["tools"][0], "file.read");
  for (const char* type :
       {"control.interrupt", "control.file.search.cancel", "control.session.close"}) {
    auto f = ParseControlFrame(Frame(type, "{}"), kSession);
    ASSERT_TRUE(f.has_value()) << type << ": " << f.error().message;
    EXPECT_FALSE(f->turn_id.has_value());
  }
  EXPECT_TRUE(ParseControlFrame(Frame("control.interaction.response", R"({"choice":2,"ok":true})"),
                                kSession));
  auto s =
      ParseControlFrame(Frame("control.file.search", R"({"query":"main","limit":5})"), kSession);
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->payload["limit"], 5);
  // Upper-case hex is a UUID too.
  EXPECT_TRUE(ParseControlFrame(
      R"({"v":"rawp-dps-1.0","type":"control.interrupt","message_id":"0F8FAD5B-D9CB-469F-A165-70867728950E","timestamp":"2026-11-25T01:02:03.5+09:00","session_id":"5b0c8f0e-1d2a-4c3b-9e4f-0a1b2c3d4e5f","turn_id":null,"payload":{}})",
      kSession));
}

TEST(RawpFrameTest, BadEnvelopesNameTheFieldAndTheValue) {
  EXPECT_NE(ErrorOf("not json").find("frame"), std::string::npos);
  EXPECT_NE(ErrorOf("[1,2]").find("must be a JSON object, not an array"), std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.interrupt", "{}", R"(,"extra":1)"))
                .find("\"extra\" is not a known key"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"v":"rawp-dps-2.0","type":"control.interrupt"})").find("\"rawp-dps-2.0\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"v":"rawp-dps-1.0"})").find("type is missing"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"v":"rawp-dps-1.0","type":7})").find("type must be a string, not a number"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("agent.output", "{}")).find("\"agent.output\" is not a control frame"),
            std::string::npos);
  // A version-1 UUID, and no UUID at all.
  std::string v1 = Frame("control.interrupt", "{}");
  v1.replace(v1.find(kMsg), 36, "0f8fad5b-d9cb-169f-a165-70867728950e");
  EXPECT_NE(ErrorOf(v1).find("message_id \"0f8fad5b-d9cb-169f-a165-70867728950e\" is not a UUIDv4"),
            std::string::npos);
  std::string ts = Frame("control.interrupt", "{}");
  ts.replace(ts.find("2026-11-25T01:02:03Z"), 20, "25/11/2026 01:02:03Z");
  EXPECT_NE(ErrorOf(ts).find("timestamp \"25/11/2026 01:02:03Z\" is not RFC 3339"),
            std::string::npos);
  auto other = ParseControlFrame(Frame("control.interrupt", "{}"), "another-session");
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.error().message.find("is not this socket's session \"another-session\""),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Frame("control.interrupt", "{}", R"(,"turn_id":5)")).find("turn_id must be a string"),
      std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.interrupt", "{}", R"(,"turn_id":"")"))
                .find("turn_id \"\" must be 1..128"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Frame("control.interrupt", "[]")).find("payload must be an object, not an array"),
      std::string::npos);
  // 65 levels of nesting in the payload are refused before nlohmann sees them.
  EXPECT_FALSE(ParseControlFrame(
      Frame("control.interaction.response", std::string(65, '[') + std::string(65, ']')),
      kSession));
}

TEST(RawpFrameTest, BadPayloadsNameTheFieldAndTheValue) {
  EXPECT_NE(ErrorOf(Frame("control.prompt.request", "{}")).find("payload.text is missing"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Frame("control.prompt.request", R"({"text":""})")).find("payload.text is empty"),
      std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.prompt.request", R"({"text":"seventeen bytes!!"})"))
                .find("payload.text is 17 bytes, above the limit of 16"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.prompt.request", R"({"text":"hi","tools":"exec"})"))
                .find("payload.tools must be an array, not a string"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.prompt.request", R"({"text":"hi","tools":["ok",3]})"))
                .find("payload.tools[1] must be a string, not a number"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.prompt.request", R"({"text":"hi","model":"x"})"))
                .find("payload.\"model\" is not a known key"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.interrupt", R"({"now":true})"))
                .find("payload of control.interrupt must be {}"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.file.search", R"({"query":"a","limit":0})"))
                .find("payload.limit 0 is outside 1..1000"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.file.search", R"({"query":"a","limit":1001})"))
                .find("payload.limit 1001 is outside 1..1000"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Frame("control.file.search", R"({"query":"a","limit":"5"})"))
                .find("payload.limit must be an integer, not \"5\""),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Frame("control.file.search", R"({"limit":5})")).find("payload.query is missing"),
      std::string::npos);
}

TEST(RawpFrameTest, IsUuidV4AcceptsOnlyTheCanonicalVersion4Form) {
  EXPECT_TRUE(IsUuidV4("0f8fad5b-d9cb-469f-a165-70867728950e"));
  EXPECT_TRUE(IsUuidV4("00000000-0000-4000-8000-000000000000"));
  EXPECT_TRUE(IsUuidV4("ffffffff-ffff-4fff-bfff-ffffffffffff"));
  EXPECT_FALSE(IsUuidV4("ffffffff-ffff-4fff-cfff-ffffffffffff"));  // variant bits 110
  EXPECT_FALSE(IsUuidV4("0f8fad5bd9cb469fa16570867728950e"));      // no dashes
  EXPECT_FALSE(IsUuidV4("0f8fad5b-d9cb-469f-a165-70867728950"));   // short
  EXPECT_FALSE(IsUuidV4("0f8fad5g-d9cb-469f-a165-70867728950e"));  // not hex
  EXPECT_FALSE(IsUuidV4("{0f8fad5b-d9cb-469f-a165-70867728950e}"));
}

TEST(RawpFrameTest, SerializedFramesCarryTheEnvelopeAndSeq) {
  ManualClock clock(ManualClock::WallTime(std::chrono::seconds(1'764'032'523)));
  OutFrame f;
  f.type = "agent.output";
  f.session_id = kSession;
  f.turn_id = "t-9";
  f.payload = {{"stream", "stdout"}, {"data", "hi"}};
  auto doc = nlohmann::json::parse(SerializeFrame(f, 7, clock));
  EXPECT_EQ(doc["v"], "rawp-dps-1.0");
  EXPECT_EQ(doc["type"], "agent.output");
  EXPECT_TRUE(IsUuidV4(doc["message_id"].get<std::string>()));
  EXPECT_EQ(doc["timestamp"], "2025-11-25T01:02:03Z");
  EXPECT_EQ(doc["session_id"], kSession);
  EXPECT_EQ(doc["turn_id"], "t-9");
  EXPECT_EQ(doc["seq"], 7);
  EXPECT_EQ(doc["payload"]["data"], "hi");

  OutFrame changed;
  changed.type = "node.config.changed";
  changed.message_id = kMsg;
  changed.timestamp = "2026-01-01T00:00:00Z";
  auto c = nlohmann::json::parse(SerializeFrame(changed, 0, clock));
  EXPECT_FALSE(c.contains("session_id"));
  EXPECT_FALSE(c.contains("turn_id"));
  EXPECT_FALSE(c.contains("seq"));
  EXPECT_EQ(c["message_id"], kMsg);
  EXPECT_EQ(c["timestamp"], "2026-01-01T00:00:00Z");

  // A payload string that is not UTF-8 never throws.
  OutFrame bad;
  bad.type = "agent.output";
  bad.payload = {{"data", std::string("a\xff")}};
  auto b = nlohmann::json::parse(SerializeFrame(bad, 1, clock));
  EXPECT_EQ(b["payload"]["data"], "a\xEF\xBF\xBD");

  auto e = SessionError(kSession, "RATE_LIMITED", "slow down", kMsg);
  EXPECT_EQ(e.type, "session.error");
  EXPECT_EQ(e.payload["code"], "RATE_LIMITED");
  EXPECT_EQ(e.payload["ref_message_id"], kMsg);
  EXPECT_FALSE(SessionError(kSession, "X", "y").payload.contains("ref_message_id"));
}

}  // namespace
}  // namespace edge::controller
