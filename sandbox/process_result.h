// The outcome of one process run by ProcessRunner, and the output chunks it streams on the
// way. Plain values. OutputSink is the back-pressured consumer of the chunks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace edge::sandbox {

enum class OutputStream { kStdout, kStderr };

// "stdout" / "stderr".
inline const char* OutputStreamName(OutputStream s) {
  return s == OutputStream::kStdout ? "stdout" : "stderr";
}

// At most kMaxChunkBytes of one stream, in the order it was read.
struct OutputChunk {
  static constexpr size_t kMaxChunkBytes = 32 * 1024;
  OutputStream stream = OutputStream::kStdout;
  std::string data;
};

// Receives each chunk and must call `ack` exactly once (from any thread, at any later time)
// when it is ready for the next one: until then the runner reads nothing more from that
// command, so a slow consumer slows the child instead of growing memory.
using OutputSink = std::function<void(OutputChunk chunk, std::function<void()> ack)>;

struct ProcessResult {
  pid_t pid = 0;
  int exit_code = -1;  // -1 when the child was ended by a signal
  int signal = 0;      // the terminating signal, 0 when it exited
  bool timed_out = false;
  bool cancelled = false;
  std::string cancel_reason;
  bool output_truncated = false;
  uint64_t stdout_bytes = 0;  // bytes delivered to the sink
  uint64_t stderr_bytes = 0;
  std::chrono::milliseconds wall_time{0};
  long peak_rss_kb = 0;  // ru_maxrss from wait4
};

}  // namespace edge::sandbox
