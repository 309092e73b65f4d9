// OutputTail: one output stream (stdout or stderr) of a command, kept for its result: all of
// it, or with a limit only its last `limit` bytes, the cut moved on past at most three UTF-8
// continuation bytes to the start of a character, as Utf8TailStart does (for valid text and a
// limit of 4 or more, never inside one). Memory stays within a few times the limit: the kept bytes
// are trimmed once past twice the limit (under three times it while a small chunk is appended; the
// string's capacity can reach four times), and of a chunk at least as large as the limit only
// its own tail is copied (a streamed chunk is often a megabyte; the edge door keeps 64 KiB).
// A value type, owned by the executor's per-command state; not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace edge::sandbox {

class OutputTail {
 public:
  // `limit` 0 keeps everything.
  explicit OutputTail(size_t limit = 0) : limit_(limit) {}

  void Add(std::string_view data);
  // The kept bytes, trimmed to the limit now (the last call; Add after it keeps adding).
  const std::string& Finish();
  // True once bytes were dropped to keep within the limit.
  bool cut() const { return cut_; }

 private:
  void Trim();

  size_t limit_;
  std::string kept_;
  bool cut_ = false;
};

}  // namespace edge::sandbox
