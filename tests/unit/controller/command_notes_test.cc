// OutputCapNote: the `output_capped` note is made only for an ok result whose payload says
// output_capped: true, and names the node, the command and the cap. The payloads are written
// here as the agent's result reaches the store (JSON text of the result's Struct).
#include "controller/command_notes.h"

#include <gtest/gtest.h>

namespace edge::controller {
namespace {

CommandRecord Ended(std::string outcome, std::string payload_json) {
  CommandRecord c;
  c.command_id = "cmd-7";
  c.node_id = "edge-3";
  c.state = kCommandCompleted;
  c.result.outcome = std::move(outcome);
  c.result.payload_json = std::move(payload_json);
  return c;
}

TEST(OutputCapNoteTest, NamesTheNodeTheCommandAndTheCap) {
  auto note = OutputCapNote(
      Ended("ok", R"({"exit_code":0,"signal":0,"stdout":"aaaa","output_truncated":true,)"
                  R"("output_capped":true,"output_cap_bytes":67108864,)"
                  R"("output_cap_key":"sandbox.max_output_bytes"})"));
  ASSERT_TRUE(note);
  EXPECT_EQ(*note,
            "node edge-3 reached its output cap of 64MiB (sandbox.max_output_bytes) and dropped "
            "the rest of command cmd-7's output");
  // A cap that is no whole unit is given in bytes; a context's cap is named by its key.
  note = OutputCapNote(
      Ended("ok", R"({"output_capped":true,"output_cap_bytes":100000,)"
                  R"("output_cap_key":"security_contexts.ops.limits.max_output_bytes"})"));
  ASSERT_TRUE(note);
  EXPECT_EQ(*note,
            "node edge-3 reached its output cap of 100000 bytes "
            "(security_contexts.ops.limits.max_output_bytes) and dropped the rest of command "
            "cmd-7's output");
  // Without the size and key (a payload that says only that it was capped): still a note.
  note = OutputCapNote(Ended("ok", R"({"output_capped":true,"output_cap_key":7})"));
  ASSERT_TRUE(note);
  EXPECT_EQ(*note,
            "node edge-3 reached its output cap and dropped the rest of command cmd-7's output");
}

TEST(OutputCapNoteTest, NoNoteUnlessAnOkPayloadSaysItWasCapped) {
  // The 64 KiB tail cut of a streamed exec is not a loss: output_truncated alone says nothing.
  EXPECT_FALSE(OutputCapNote(Ended("ok", R"({"exit_code":0,"output_truncated":true})")));
  EXPECT_FALSE(OutputCapNote(Ended("ok", "")));
  EXPECT_FALSE(OutputCapNote(Ended("ok", R"({"output_capped":false})")));
  EXPECT_FALSE(OutputCapNote(Ended("ok", R"({"output_capped":"yes"})")));
  // The words inside the output (a string value) are not the key.
  EXPECT_FALSE(OutputCapNote(Ended("ok", R"({"stdout":"\"output_capped\":true"})")));
  EXPECT_FALSE(OutputCapNote(Ended("ok", R"(["output_capped",true])")));
  // Not JSON at all: no note, no crash.
  EXPECT_FALSE(OutputCapNote(Ended("ok", R"({"output_capped":tru)")));
  // A command that did not end ok reports its own failure.
  EXPECT_FALSE(OutputCapNote(Ended("error", R"({"output_capped":true})")));
}

}  // namespace
}  // namespace edge::controller
