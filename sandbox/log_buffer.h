// LogBuffer: one sandbox's console log (issue 4). Bytes appended are split into lines
// (a partial last line is held until its newline arrives) and kept in a ring bounded by a
// line count and a byte count, oldest dropped first; every byte is also appended to a file
// (usually <sandboxes_dir>/<id>/console.log, 0600, O_APPEND). The file is bounded too: an
// append that would take it past max_file_bytes first renames it to "<file>.1" (replacing
// the one before) and begins a new file, so a sandbox's console log never holds more than
// twice max_file_bytes on disk however long its processes write. On open, the ring is
// seeded from the end of the two files, so Tail() works across restarts and rotations. The
// rotation works relative to the directory opened with the file: once that directory is
// removed (the sandbox destroyed), a buffer still held by a dying command never touches a
// new sandbox of the same id. A failed write or rotation is logged once (until a write
// succeeds again) and returned. Thread-safe. Owns its file descriptors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "sandbox/unique_fd.h"

namespace edge::sandbox {

class LogBuffer {
 public:
  struct Options {
    size_t max_lines = 1000;
    size_t max_bytes = 1u << 20;        // sum of the lines' sizes in the ring
    size_t max_line_bytes = 64u << 10;  // longer lines are cut into pieces of this size
    size_t max_file_bytes = 16u << 20;  // the file's bound; it rotates to "<file>.1" past it
  };

  // Opens (creating, 0600) `file_path` for appending; its directory must exist.
  // INVALID_ARGUMENT for a zero bound.
  static Result<std::unique_ptr<LogBuffer>> Open(const std::string& file_path, Options options);
  static Result<std::unique_ptr<LogBuffer>> Open(const std::string& file_path) {
    return Open(file_path, Options{});
  }

  // Appends raw output to the file and its complete lines (without "\n") to the ring. An
  // error (the write or the rotation failed: disk full, say) names the file; the ring has the
  // lines either way.
  Status Append(std::string_view bytes);
  // The last `n` complete lines, oldest first (fewer when the ring holds fewer).
  std::vector<std::string> Tail(size_t n) const;
  // Moves a held partial line into the ring (e.g. when the process exits without "\n").
  void FlushPartial();

  size_t line_count() const;
  size_t byte_count() const;
  const std::string& file_path() const { return file_path_; }

 private:
  LogBuffer(std::string file_path, std::string name, UniqueFd dir, UniqueFd fd, Options options,
            size_t file_bytes)
      : file_path_(std::move(file_path)),
        name_(std::move(name)),
        dir_(std::move(dir)),
        fd_(std::move(fd)),
        options_(options),
        file_bytes_(file_bytes) {}
  // One entry of the ring: `head` then `tail` (a held partial line and the rest of it).
  void PushLineLocked(std::string_view head, std::string_view tail = {});
  void IngestLocked(std::string_view bytes);
  Status WriteLocked(std::string_view bytes);
  Status RotateLocked();
  Status OpenNewLocked();

  std::string file_path_;
  std::string name_;  // the file's name in dir_
  UniqueFd dir_;      // O_PATH: the directory the file was opened in
  UniqueFd fd_;       // the current file (-1 after a rotation that could not make one)
  Options options_;
  size_t file_bytes_;     // the current file's size
  bool failing_ = false;  // the last write or rotation failed (and was logged)
  mutable std::mutex mu_;
  // The ring: its lines back to back in text_ from text_start_ on (no allocation per line;
  // the dead prefix is dropped once it is the larger part), their sizes in sizes_.
  std::string text_;
  size_t text_start_ = 0;
  std::deque<uint32_t> sizes_;
  size_t bytes_ = 0;  // = text_.size() - text_start_
  std::string partial_;
};

}  // namespace edge::sandbox
