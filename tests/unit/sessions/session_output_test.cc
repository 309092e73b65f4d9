// The line assembler and classifier of a session process's output (wire.md §5.5).
#include "controller/sessions/session_output.h"

#include <gtest/gtest.h>

#include <vector>

namespace edge::controller {
namespace {

struct Collect {
  std::vector<ProcessFrame> frames;
  SessionOutput::Sink sink() {
    return [this](ProcessFrame f) { frames.push_back(std::move(f)); };
  }
};

TEST(SessionOutputTest, LinesAreReassembledAcrossChunksPerStream) {
  SessionOutput out(1024);
  Collect c;
  out.Append(false, "hel", c.sink());
  out.Append(true, "err", c.sink());
  EXPECT_TRUE(c.frames.empty());
  out.Append(false, "lo\nwor", c.sink());
  out.Append(true, " line\r\n", c.sink());
  out.Append(false, "ld\n\n", c.sink());
  ASSERT_EQ(c.frames.size(), 4u);
  EXPECT_EQ(c.frames[0].type, "agent.output");
  EXPECT_EQ(c.frames[0].payload["stream"], "stdout");
  EXPECT_EQ(c.frames[0].payload["data"], "hello");
  EXPECT_EQ(c.frames[1].payload["stream"], "stderr");
  EXPECT_EQ(c.frames[1].payload["data"], "err line");
  EXPECT_EQ(c.frames[2].payload["data"], "world");
  EXPECT_EQ(c.frames[3].payload["data"], "");
}

TEST(SessionOutputTest, JsonLinesOfTheProcessBecomeTheirFrames) {
  auto f = SessionOutput::Classify(
      false, R"({"type":"agent.message","turn_id":"t1","payload":{"text":"hi"}})");
  EXPECT_EQ(f.type, "agent.message");
  EXPECT_EQ(f.turn_id, "t1");
  EXPECT_EQ(f.payload["text"], "hi");
  auto u =
      SessionOutput::Classify(false, R"({"type":"session.usage","payload":{"input_tokens":3}})");
  EXPECT_EQ(u.type, "session.usage");
  EXPECT_FALSE(u.turn_id.has_value());
  auto t = SessionOutput::Classify(false, R"({"type":"tool.call"})");
  EXPECT_EQ(t.type, "tool.call");
  EXPECT_TRUE(t.payload.is_object());
  EXPECT_TRUE(t.payload.empty());
}

TEST(SessionOutputTest, AnythingElseIsPlainOutputAndControllerFramesCannotBeForged) {
  for (const char* line :
       {R"({"type":"session.ended","payload":{"exit_code":0}})",  // the controller's own
        R"({"type":"session.error","payload":{}})", R"({"type":"session.started"})",
        R"({"type":"control.prompt.request","payload":{}})",  // not a process frame
        R"({"type":"agent.x","payload":[1]})",                // payload not an object
        R"({"type":"agent.x","turn_id":3})",                  // turn_id not a string
        R"({"kind":"agent.x"})", R"([1,2])", R"({"type":"agent.x")", "plain text"}) {
    auto f = SessionOutput::Classify(false, line);
    EXPECT_EQ(f.type, "agent.output") << line;
    EXPECT_EQ(f.payload["data"], line);
  }
  // stderr is never parsed.
  auto e = SessionOutput::Classify(true, R"({"type":"agent.message","payload":{}})");
  EXPECT_EQ(e.type, "agent.output");
  EXPECT_EQ(e.payload["stream"], "stderr");
  // Bytes that are not UTF-8 become U+FFFD.
  auto b = SessionOutput::Classify(false,
                                   "a\xff"
                                   "b");
  EXPECT_EQ(b.payload["data"],
            "a\xEF\xBF\xBD"
            "b");
}

TEST(SessionOutputTest, LongLinesAreCutAtTheLimitWithoutSplittingACharacter) {
  SessionOutput out(16);
  Collect c;
  // 15 ASCII bytes and a 2-byte character straddling the 16-byte limit.
  std::string line = std::string(15, 'x') + "\xC3\xA9" + "tail";
  out.Append(false, line.substr(0, 10), c.sink());
  out.Append(false, line.substr(10) + "\n", c.sink());
  ASSERT_EQ(c.frames.size(), 2u);
  EXPECT_EQ(c.frames[0].payload["data"], std::string(15, 'x'));
  EXPECT_EQ(c.frames[1].payload["data"], "\xC3\xA9tail");
  // A line exactly at the limit is one frame.
  c.frames.clear();
  out.Append(false, std::string(16, 'y') + "\n", c.sink());
  ASSERT_EQ(c.frames.size(), 1u);
  EXPECT_EQ(c.frames[0].payload["data"], std::string(16, 'y'));
}

TEST(SessionOutputTest, FlushHandsOutWhatIsLeftWithoutANewline) {
  SessionOutput out(64);
  Collect c;
  out.Append(false, "partial", c.sink());
  out.Append(true, "err", c.sink());
  out.Flush(c.sink());
  ASSERT_EQ(c.frames.size(), 2u);
  EXPECT_EQ(c.frames[0].payload["data"], "partial");
  EXPECT_EQ(c.frames[1].payload["data"], "err");
  out.Flush(c.sink());
  EXPECT_EQ(c.frames.size(), 2u);
}

}  // namespace
}  // namespace edge::controller
