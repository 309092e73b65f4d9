// SessionOutput: turns the byte chunks of a session process's stdout and stderr (the
// CommandProgress chunks of its session.start command) into the frames the UI sees (wire.md
// §5.5): lines are reassembled across chunks, each stream on its own, and cut at
// `max_line_bytes` (the session's max_frame_size; a cut never splits a UTF-8 character, and
// the rest of the long line follows as the next piece). Each line then becomes a frame:
//   - on stdout, a JSON object whose "type" starts with "agent.", "tool." or "session." is
//     that frame: its "payload" (an object; {} when absent) and "turn_id" (a string) are kept,
//     the controller writes the rest of the envelope. The frame types the controller itself
//     owns (session.started, session.ended, session.error) are not accepted from the process:
//     such a line is relayed as plain output instead, so a process cannot forge them.
//   - anything else (any stderr line, other JSON, text) becomes
//     agent.output {stream: "stdout"|"stderr", data: <the line, invalid UTF-8 as U+FFFD>}.
// The trailing "\n" (and a "\r" before it) is not part of a line. Flush() hands out what is
// left without a newline when the process has ended.
// Not thread-safe: one per session, fed under the session's lock.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace edge::controller {

// A frame of the process, before the envelope.
struct ProcessFrame {
  std::string type;
  std::optional<std::string> turn_id;
  nlohmann::json payload;
};

class SessionOutput {
 public:
  using Sink = std::function<void(ProcessFrame)>;

  explicit SessionOutput(size_t max_line_bytes)
      : max_line_(max_line_bytes < 16 ? 16 : max_line_bytes) {}

  // `stderr_stream` false = stdout.
  void Append(bool stderr_stream, std::string_view bytes, const Sink& sink);
  // What is left of both streams, as lines.
  void Flush(const Sink& sink);

  // The frame of one complete line.
  static ProcessFrame Classify(bool stderr_stream, std::string_view line);

 private:
  void Emit(bool stderr_stream, std::string_view line, const Sink& sink);

  const size_t max_line_;
  std::string partial_[2];
};

}  // namespace edge::controller
